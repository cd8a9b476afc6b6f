"""The chain passes the provider contract: over two mock members, and over two RunPod stand-ins."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.provider import PodLifecycle, PodRef, PodRequest
from vk_provider.testing.contract import ProviderContract, ProviderHarness
from vk_providers.chain import ChainProvider
from vk_providers.mock.provider import FAIL_CREATE_LABEL

from ..runpod.support import pod_request as runpod_pod_request
from ..runpod.support import runpod_pods_of
from .conftest import runpod_member
from .support import make_chain, pod_request


class ChainOfMocksHarness:
    outage_fails_calls = False  # the mocks' outage (their marker file) affects health checks only

    def __init__(self, folder: Path) -> None:
        self.node_name = "chain-contract"
        self._folder = folder
        self._marker = folder / "unhealthy"
        self.provider: PodLifecycle = self._new(self.node_name)

    def _new(self, node_name: str) -> ChainProvider:
        config = {"unhealthy_marker_file": str(self._marker)}
        members = [{"name": name, "provider": "mock", "config": config} for name in ("home", "burst")]
        return make_chain(self._folder / node_name, members, node_name=node_name)

    def pod(self, name: str, *, uid: str | None = None, labels: dict[str, str] | None = None) -> PodRequest:
        return pod_request(name, uid=uid, node_name=self.node_name, labels=labels)

    async def rejected_pod(self) -> tuple[PodRequest, str]:
        return self.pod(
            "rejected", labels={FAIL_CREATE_LABEL: "invalid image reference"}
        ), "invalid image reference"

    async def temporarily_failing_pod(self) -> tuple[PodRequest, PodRequest]:
        failing = self.pod("flaky", labels={FAIL_CREATE_LABEL: "backend busy"})
        return failing, self.pod("flaky", uid=failing.ref.uid)

    def other_node(self) -> PodLifecycle:
        return self._new("another-node")

    def restarted(self) -> PodLifecycle | None:
        return None  # the mocks' pods live in the instance's memory

    async def start_outage(self) -> None:
        self._marker.touch()

    async def end_outage(self) -> None:
        self._marker.unlink()

    async def force_error(self, ref: PodRef, message: str) -> bool:
        return False

    async def vanish(self, ref: PodRef) -> bool:
        return False


class TestChainOfMocksContract(ProviderContract):
    @pytest.fixture
    async def harness(self, tmp_path: Path) -> AsyncIterator[ProviderHarness]:
        harness = ChainOfMocksHarness(tmp_path)
        yield harness
        await harness.provider.aclose()


class ChainOfRunPodsHarness:
    """Members built through the node's plugin loading (`runpod`), each on its own stand-in."""

    outage_fails_calls = True

    def __init__(self, cheap: FakeRunPod, pricey: FakeRunPod, folder: Path) -> None:
        self.fakes = (cheap, pricey)
        self.node_name = "chain-contract"
        self._folder = folder
        self._extra: list[ChainProvider] = []
        self.provider: PodLifecycle = self._new(self.node_name)

    def _new(self, node_name: str) -> ChainProvider:
        members = [
            runpod_member("cheap", self.fakes[0], self._folder / "keys"),
            runpod_member("pricey", self.fakes[1], self._folder / "keys"),
        ]
        return make_chain(self._folder / node_name, members, node_name=node_name)

    def _track(self, chain: ChainProvider) -> ChainProvider:
        self._extra.append(chain)
        return chain

    def pod(self, name: str, *, uid: str | None = None) -> PodRequest:
        return runpod_pod_request(name, uid=uid, node_name=self.node_name)

    async def rejected_pod(self) -> tuple[PodRequest, str]:
        detail = "image 'registry.example/llm-server:1' is not a valid reference"
        for fake in self.fakes:
            await fake.control.fail(status=422, method="POST", path="^/v2/pods$", detail=detail)
        return self.pod("rejected"), detail

    async def temporarily_failing_pod(self) -> tuple[PodRequest, PodRequest]:
        for fake in self.fakes:  # every attempt of each member (max_attempts 3) fails
            await fake.control.fail(status=503, method="POST", path="^/v2/pods$", times=3)
        request = self.pod("flaky")
        return request, request

    def other_node(self) -> PodLifecycle:
        return self._track(self._new("another-node"))

    def restarted(self) -> PodLifecycle | None:
        return self._track(self._new(self.node_name))

    async def start_outage(self) -> None:
        for fake in self.fakes:
            await fake.control.fail(status=503, detail="upstream connect error", times=None)

    async def end_outage(self) -> None:
        for fake in self.fakes:
            await fake.control.clear_faults()  # the breakers let a trial through after 0.2 s

    async def _holder(self, ref: PodRef) -> tuple[FakeRunPod, str]:
        held = [(fake, pod["id"]) for fake in self.fakes for pod in await runpod_pods_of(fake, ref.uid)]
        assert len(held) == 1, held
        return held[0]

    async def force_error(self, ref: PodRef, message: str) -> bool:
        fake, pod_id = await self._holder(ref)
        await fake.control.set_status(pod_id, "ERROR", message)
        return True

    async def vanish(self, ref: PodRef) -> bool:
        fake, pod_id = await self._holder(ref)
        await fake.control.vanish(pod_id)
        return True

    async def aclose(self) -> None:
        for chain in [self.provider, *self._extra]:
            await chain.aclose()


class TestChainOfRunPodsContract(ProviderContract):
    @pytest.fixture
    async def harness(
        self, cheap: FakeRunPod, pricey: FakeRunPod, tmp_path: Path
    ) -> AsyncIterator[ProviderHarness]:
        harness = ChainOfRunPodsHarness(cheap, pricey, tmp_path)
        yield harness
        await harness.aclose()
