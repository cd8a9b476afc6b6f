"""The `grpc` provider against plugins that behave, and plugins that do not: capabilities as declared,
streams, every error kind across the wire, garbage, a plugin that hangs, one that is not there, and one
that declares what it does not implement."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.unit.providers.grpc.support import RawPlugin, plugin_for, raw_plugin, serving_raw, socket_folder
from tests.unit.providers.mock.test_contract import MockHarness
from vk_provider.errors import (
    CapabilityMissingError,
    InvalidPodError,
    NotFoundError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.plugin import serving
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import (
    LogOptions,
    PodRef,
    PodRequest,
    PodState,
    ProviderContext,
    SupportsGpuCatalog,
    SupportsLogs,
    SupportsNodeCapacity,
    SupportsPodAddress,
    SupportsStatusPush,
    SupportsUsage,
)
from vk_provider.testing.contract import eventually, health, new_uid, wait_running
from vk_providers.grpc import create_provider
from vk_providers.grpc.provider import GrpcSettings, PluginError, plugin_info, provider_for

REF = PodRef("default", "p", "uid-1")


class Scripted:
    """The required operations only, each doing what the test set for it."""

    def __init__(self) -> None:
        self.raise_on_create: Exception | None = None
        self.hang = asyncio.Event()
        self.unhealthy: Exception | None = None

    async def create_pod(self, pod: PodRequest) -> None:
        if self.raise_on_create is not None:
            raise self.raise_on_create

    async def update_pod(self, pod: PodRequest) -> None:
        raise NotFoundError(f"no pod {pod.ref}")

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        return None

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        await self.hang.wait()  # never set: the call outlives its deadline
        return None

    async def list_pods(self) -> Sequence[PodState]:
        return []

    async def check_health(self) -> None:
        if self.unhealthy is not None:
            raise self.unhealthy

    async def aclose(self) -> None:
        return None


@contextlib.asynccontextmanager
async def scripted_plugin(**settings: float) -> AsyncIterator[tuple[Scripted, Any]]:
    scripted = Scripted()
    async with socket_folder() as sockets, plugin_for(scripted, sockets / "s", **settings) as (client, _):
        yield scripted, client


async def test_a_plugin_declares_what_its_provider_offers_and_the_node_sees_exactly_that(
    tmp_path: Path,
) -> None:
    mock = MockHarness(tmp_path).provider
    async with socket_folder() as sockets, plugin_for(mock, sockets / "m") as (client, _):
        for protocol in (
            SupportsStatusPush,
            SupportsPodAddress,
            SupportsLogs,
            SupportsUsage,
            SupportsNodeCapacity,
        ):
            assert isinstance(mock, protocol) == isinstance(client, protocol), protocol
        assert not isinstance(client, SupportsGpuCatalog)
    async with scripted_plugin() as (_, bare):
        offered = (SupportsStatusPush, SupportsPodAddress, SupportsLogs, SupportsUsage, SupportsNodeCapacity)
        assert not any(isinstance(bare, protocol) for protocol in offered)
    await mock.aclose()


async def test_logs_usage_address_and_pushed_states_cross_the_plugin_as_they_are(tmp_path: Path) -> None:
    harness = MockHarness(tmp_path)
    mock = harness.provider
    async with socket_folder() as sockets, plugin_for(mock, sockets / "m") as (client, _):
        request = harness.pod("logs", uid=new_uid())
        running_pushed = asyncio.Event()

        async def watch() -> None:
            async for state in client.watch_states():
                if state.ref == request.ref and state.phase == "Running":
                    running_pushed.set()

        watcher = asyncio.create_task(watch())
        await client.create_pod(request)
        await wait_running(client, request.ref)
        options = LogOptions(tail_lines=3, timestamps=True)
        direct = b"".join([chunk async for chunk in mock.stream_logs(request.ref, "server", options)])
        through = b"".join([chunk async for chunk in client.stream_logs(request.ref, "server", options)])
        assert through == direct
        assert through.count(b"\n") == 3
        assert await client.pod_address(request.ref) == await mock.pod_address(request.ref)
        assert [item.name for item in await client.usage(request.ref)] == ["server"]
        async with asyncio.timeout(10):
            await running_pushed.wait()
        with pytest.raises(NotFoundError):
            [
                chunk
                async for chunk in client.stream_logs(PodRef("default", "none", "nope"), "server", options)
            ]
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    await mock.aclose()


@pytest.mark.parametrize(
    ("raised", "expected", "words"),
    [
        (InvalidPodError("image not allowed"), InvalidPodError, "image not allowed"),
        (NotFoundError("gone"), NotFoundError, "gone"),
        (TemporaryProviderError("capacity", retry_after_seconds=7.5), TemporaryProviderError, "capacity"),
        (RuntimeError("bug in the plugin"), TemporaryProviderError, "the plugin failed: RuntimeError: bug"),
    ],
)
async def test_each_error_kind_crosses_the_plugin_as_the_same_kind(
    raised: Exception, expected: type[Exception], words: str
) -> None:
    async with scripted_plugin() as (scripted, client):
        scripted.raise_on_create = raised
        with pytest.raises(expected, match=words) as caught:
            await client.create_pod(PodRequest(ref=REF, node_name="n", containers=()))
        if isinstance(raised, TemporaryProviderError):
            assert isinstance(caught.value, TemporaryProviderError)
            assert caught.value.retry_after_seconds == 7.5
        with pytest.raises(NotFoundError, match="no pod"):
            await client.update_pod(PodRequest(ref=REF, node_name="n", containers=()))


async def test_an_unhealthy_plugin_makes_the_provider_unavailable() -> None:
    async with scripted_plugin() as (scripted, client):
        await client.check_health()
        scripted.unhealthy = ProviderUnavailableError("the cloud's API is down")
        with pytest.raises(ProviderUnavailableError, match="the cloud's API is down"):
            await client.check_health()
        scripted.unhealthy = TemporaryProviderError("rate limited")
        with pytest.raises(ProviderUnavailableError, match="rate limited"):
            await client.check_health()


async def test_a_plugin_that_hangs_is_cut_off_at_the_deadline() -> None:
    async with scripted_plugin(call_timeout_seconds=0.5) as (_, client):
        with pytest.raises(TemporaryProviderError, match="did not answer GetPodState in time"):
            await client.get_pod_state(REF)


async def test_a_plugin_that_is_not_there_is_unavailable_and_named_at_start() -> None:
    async with socket_folder() as sockets:
        settings = GrpcSettings(
            f"unix://{sockets / 'absent'}", call_timeout_seconds=1, connect_timeout_seconds=0.5
        )
        with pytest.raises(
            PluginError, match=rf"unix://{sockets}/absent did not answer GetPluginInfo within 0.5 s"
        ):
            await asyncio.to_thread(plugin_info, settings, "n")
        client = provider_for(settings, pb.PluginInfo(name="gone", api_version="v1"))
        with pytest.raises(ProviderUnavailableError):
            await client.check_health()
        with pytest.raises(TemporaryProviderError):
            await client.list_pods()
        await client.aclose()


async def test_garbage_and_capabilities_declared_but_missing_are_clear_errors() -> None:
    garbage = pb.ListPodsResponse(
        pods=[pb.PodState(ref=pb.PodRef(namespace="d", name="p", uid="u"), phase="Asleep")]
    )
    async with socket_folder() as sockets, raw_plugin(sockets / "liar", {"ListPods": garbage}) as address:
        settings = GrpcSettings(address, call_timeout_seconds=2, connect_timeout_seconds=5)
        client = provider_for(settings, await asyncio.to_thread(plugin_info, settings, "n"))
        assert isinstance(client, SupportsLogs)  # as declared
        with pytest.raises(
            TemporaryProviderError, match="liar answered ListPods with a message the node cannot read"
        ):
            await client.list_pods()
        with pytest.raises(CapabilityMissingError, match="does not implement StreamLogs"):
            [chunk async for chunk in client.stream_logs(REF, "c", LogOptions())]
        with pytest.raises(CapabilityMissingError, match="does not implement CreatePod"):
            await client.create_pod(PodRequest(ref=REF, node_name="n", containers=()))
        await client.aclose()


async def test_a_plugin_of_another_api_version_is_refused_at_start() -> None:
    async with socket_folder() as sockets, raw_plugin(sockets / "v2", {}, api_version="v2") as address:
        settings = GrpcSettings(address, connect_timeout_seconds=5)
        with pytest.raises(PluginError, match="speaks plugin API 'v2', not 'v1'"):
            await asyncio.to_thread(plugin_info, settings, "n")


async def test_a_node_started_before_its_plugin_comes_up_and_learns_the_capabilities_later(
    tmp_path: Path,
) -> None:
    async with socket_folder() as sockets:
        address = f"unix://{sockets / 'late'}"
        context = ProviderContext(
            "n",
            {"address": address, "connect_timeout_seconds": 0.5, "call_timeout_seconds": 2},
            "127.0.0.1",
            tmp_path,
        )
        client = await asyncio.to_thread(create_provider, context)  # no plugin yet: no error either
        assert isinstance(client, SupportsLogs)  # every capability, until the plugin says which
        assert isinstance(client, SupportsGpuCatalog)
        with pytest.raises(ProviderUnavailableError):
            await client.check_health()
        with pytest.raises(TemporaryProviderError):
            await client.node_capacity()
        harness = MockHarness(tmp_path)
        async with serving(harness.provider, address, name="late"):
            # As the node's health checks do: unavailable until the channel's next reconnection.
            await eventually(lambda: health(client), lambda error: error is None, what="the plugin healthy")
            request = harness.pod("late", uid=new_uid())
            await client.create_pod(request)
            await wait_running(client, request.ref)
            lines = [
                chunk async for chunk in client.stream_logs(request.ref, "server", LogOptions(tail_lines=2))
            ]
            assert b"".join(lines).count(b"\n") == 2
            with pytest.raises(CapabilityMissingError, match="does not offer a GPU catalog"):
                await client.gpu_offers()
        await client.aclose()
        await harness.provider.aclose()


async def test_bytes_that_are_no_message_and_silence_are_named_with_the_call() -> None:
    plugin = RawPlugin(garbage={"CheckHealth", "GetPodState"}, hangs={"ListPods"})
    async with socket_folder() as sockets, serving_raw(plugin, sockets / "raw") as address:
        settings = GrpcSettings(address, call_timeout_seconds=0.5, connect_timeout_seconds=5)
        client = provider_for(settings, await asyncio.to_thread(plugin_info, settings, "n"))
        unreadable = "liar answered {} with a message the node cannot read: bytes that are not a {} message"
        with pytest.raises(
            ProviderUnavailableError, match=unreadable.format("CheckHealth", "CheckHealthResponse")
        ):
            await client.check_health()
        with pytest.raises(
            TemporaryProviderError, match=unreadable.format("GetPodState", "GetPodStateResponse")
        ):
            await client.get_pod_state(REF)
        with pytest.raises(TemporaryProviderError, match="did not answer ListPods in time"):
            await client.list_pods()
        plugin.garbage.clear()
        plugin.hangs.add("CheckHealth")
        with pytest.raises(ProviderUnavailableError, match="did not answer CheckHealth in time"):
            await client.check_health()
        await client.aclose()
