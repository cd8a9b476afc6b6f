"""`vk-provider conformance`: the contract suite run against any provider, in-process or a plugin.

The suite is `vk_provider.testing.contract`; the kit gives it a harness built from the command line
instead of one written for a backend. What only a backend's own harness can do (make the provider
refuse a pod for good, fail for a while, go down, lose or break a workload) is skipped with the reason,
as are the optional capabilities the provider does not declare, and the restart tests of a provider
that declares its workloads ephemeral (`vk_provider.provider.declares_ephemeral_workloads`; the mock
does): the report says what passed, what failed and why, and what was skipped and why. The exit code
is pytest's: 0 only when nothing failed.

A plugin serves one node, so the test that needs a second node is skipped for plugins; a new
connection to the same plugin stands for the node's restart (the plugin keeps its workloads).

The kit needs pytest and pytest-asyncio (`pip install 'vk-provider[conformance]'`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import tempfile
import types
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from vk_provider import plugins
from vk_provider.provider import (
    ContainerPort,
    ContainerSpec,
    PodLifecycle,
    PodRef,
    PodRequest,
    PodState,
    ProviderContext,
    declares_ephemeral_workloads,
)
from vk_provider.testing.contract import wait_stopped

GRPC_PROVIDER = "grpc"
"""The provider that talks to plugins, found like any other through its entry point."""
SUITE = Path(__file__).with_name("testing") / "conformance_suite.py"


@dataclasses.dataclass(frozen=True)
class PodTemplate:
    """The container every test pod runs (it must keep running until deleted)."""

    image: str = "conformance/server:1"
    command: tuple[str, ...] = ()
    port: int = 8080


def _not_declared(what: str) -> Any:
    pytest.skip(f"not declared: {what}")


class KitHarness:
    """A `ProviderHarness` that knows only what the command line says of the provider."""

    outage_fails_calls = False

    def __init__(
        self,
        provider: PodLifecycle,
        node_name: str,
        template: PodTemplate,
        *,
        other: Callable[[], PodLifecycle] | None,
        restarted: Callable[[], PodLifecycle] | None,
    ) -> None:
        self.provider = provider
        self.node_name = node_name
        self._template = template
        self._other = other
        self._restarted = restarted
        self.opened: list[PodLifecycle] = []

    def pod(self, name: str, *, uid: str | None = None) -> PodRequest:
        container = ContainerSpec(
            name="server",
            image=self._template.image,
            command=self._template.command,
            ports=(ContainerPort(self._template.port, name="http"),),
        )
        return PodRequest(
            ref=PodRef("conformance", name, uid or str(uuid.uuid4())),
            node_name=self.node_name,
            containers=(container,),
            termination_grace_period_seconds=5,
        )

    async def rejected_pod(self) -> tuple[PodRequest, str]:
        return _not_declared("the kit cannot know which pod this provider refuses for good")  # type: ignore[no-any-return]

    async def temporarily_failing_pod(self) -> tuple[PodRequest, PodRequest]:
        return _not_declared("the kit cannot make this provider fail for a while")  # type: ignore[no-any-return]

    def other_node(self) -> PodLifecycle:
        if self._other is None:
            return _not_declared("a plugin serves one node")  # type: ignore[no-any-return]
        provider = self._other()
        self.opened.append(provider)
        return provider

    def restarted(self) -> PodLifecycle | None:
        """The node's restart: the instance in use is closed (as a node's process ends), and a new one
        takes its place, also for the clean-up."""
        if self._restarted is None:
            return None  # the suite skips: the workloads do not outlive the instance
        self.provider = Successor(self.provider, self._restarted)
        return self.provider

    async def start_outage(self) -> None:
        _not_declared("the kit cannot take this provider's backend down")

    async def end_outage(self) -> None:
        return None

    async def force_error(self, ref: PodRef, message: str) -> bool:
        return False

    async def vanish(self, ref: PodRef) -> bool:
        return False

    async def close(self) -> None:
        """Delete every pod the test left (a plugin outlives the test, and so do local processes),
        then close every instance opened."""
        try:
            for provider in [self.provider, *self.opened]:
                await _delete_everything(provider)
        finally:
            for provider in [*self.opened, self.provider]:
                await provider.aclose()


async def _delete_everything(provider: PodLifecycle) -> None:
    left = [state.ref for state in await provider.list_pods()]
    for _ in range(2):  # again once stopped: some providers forget a pod only then
        await asyncio.gather(*(provider.delete_pod(ref, grace_period_seconds=0) for ref in left))
        for ref in left:
            await wait_stopped(provider, ref, what=f"{ref}, left by the test, to stop")


class Successor:
    """The instance a restarted node makes: made only once the one it replaces is closed, as a node's
    new process starts after the old one ended (two live instances on one backend would both act)."""

    def __init__(self, retired: PodLifecycle, make: Callable[[], PodLifecycle]) -> None:
        self._retired: PodLifecycle | None = retired
        self._make = make
        self._instance: PodLifecycle | None = None

    async def _current(self) -> PodLifecycle:
        if self._instance is None:
            if self._retired is not None:
                await self._retired.aclose()
                self._retired = None
            self._instance = self._make()
        return self._instance

    async def create_pod(self, pod: PodRequest) -> None:
        await (await self._current()).create_pod(pod)

    async def update_pod(self, pod: PodRequest) -> None:
        await (await self._current()).update_pod(pod)

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        await (await self._current()).delete_pod(ref, grace_period_seconds=grace_period_seconds)

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        return await (await self._current()).get_pod_state(ref)

    async def list_pods(self) -> Sequence[PodState]:
        return await (await self._current()).list_pods()

    async def check_health(self) -> None:
        await (await self._current()).check_health()

    async def aclose(self) -> None:
        for instance in (self._retired, self._instance):
            if instance is not None:
                await instance.aclose()


@dataclasses.dataclass(frozen=True)
class InProcessTarget:
    """An installed provider, by name, with its settings."""

    name: str
    config: dict[str, Any]
    template: PodTemplate
    ephemeral_workloads: bool | None = None
    """Whether the provider keeps its workloads in its own memory (as `mock` does), so that a new
    instance cannot find them and the tests of a node restart are skipped rather than failed. None (the
    default) takes the provider's own declaration (`declares_ephemeral_workloads`); True or False
    overrides it (`--ephemeral-workloads`, `--no-ephemeral-workloads`)."""

    async def open(self, folder: Path) -> KitHarness:
        node = "conformance-node"

        def build(node_name: str) -> PodLifecycle:
            state = folder / node_name
            state.mkdir(parents=True, exist_ok=True)
            return plugins.build(self.name, ProviderContext(node_name, self.config, "127.0.0.1", state))

        provider = build(node)
        ephemeral = self.ephemeral_workloads
        if ephemeral is None:
            ephemeral = declares_ephemeral_workloads(provider)
        return KitHarness(
            provider,
            node,
            self.template,
            other=lambda: build("conformance-other-node"),
            restarted=None if ephemeral else lambda: build(node),
        )


@dataclasses.dataclass(frozen=True)
class PluginTarget:
    """A plugin at an address (`unix:///path` or `host:port`), through the `grpc` provider."""

    address: str
    template: PodTemplate
    call_timeout_seconds: float = 30.0

    async def open(self, folder: Path) -> KitHarness:
        config = {"address": self.address, "call_timeout_seconds": self.call_timeout_seconds}
        node = "conformance-node"

        def connect() -> PodLifecycle:  # blocks until the plugin answers GetPluginInfo
            return plugins.build(GRPC_PROVIDER, ProviderContext(node, config, "127.0.0.1", folder))

        return KitHarness(
            await asyncio.to_thread(connect), node, self.template, other=None, restarted=connect
        )


Target = InProcessTarget | PluginTarget


class KitPlugin:
    """The pytest plugin that hands the suite its harness."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def harness_fixture(self) -> Any:
        target = self.target

        @pytest.fixture
        async def harness() -> AsyncIterator[KitHarness]:
            folder = Path(tempfile.mkdtemp(prefix="vk-conformance-"))
            opened = await target.open(folder)
            try:
                yield opened
            finally:
                await opened.close()
                shutil.rmtree(folder, ignore_errors=True)

        return harness


def run(target: Target, *, junit: Path | None = None, extra: Sequence[str] = ()) -> int:
    """Run the suite against `target`; pytest's exit code (0: nothing failed)."""
    plugin = KitPlugin(target)
    with tempfile.TemporaryDirectory(prefix="vk-conformance-") as scratch:
        ini = Path(scratch) / "pytest.ini"
        ini.write_text(
            "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
            "asyncio_default_test_loop_scope = function\n"
        )
        arguments = [str(SUITE), "-c", str(ini), "--rootdir", scratch, "-p", "no:cacheprovider", "-rA", "-q"]
        if junit is not None:
            arguments.append(f"--junitxml={junit}")
        holder = types.ModuleType("vk_provider_conformance_harness")  # fixtures of a module: functions
        holder.harness = plugin.harness_fixture()  # type: ignore[attr-defined]
        return int(pytest.main([*arguments, *extra], plugins=[holder]))
