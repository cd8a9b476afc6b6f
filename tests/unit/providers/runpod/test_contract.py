"""The runpod provider passes the provider contract against the fake RunPod."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.provider import PodLifecycle, PodRef, PodRequest
from vk_provider.testing.contract import ProviderContract, ProviderHarness
from vk_providers.runpod import RunPodProvider

from .support import ManualClock, make_provider, pod_request, runpod_pod_of


class RunPodHarness:
    outage_fails_calls = True

    def __init__(self, fake: FakeRunPod, state_dir: Path) -> None:
        self.fake = fake
        self.node_name = "runpod-contract"
        self.clock = ManualClock()
        self._state_dir = state_dir
        self._extra: list[RunPodProvider] = []
        self.provider: PodLifecycle = self._new(self.node_name)

    def _new(self, node_name: str) -> RunPodProvider:
        return make_provider(self.fake, self._state_dir, clock=self.clock, node_name=node_name)

    def pod(self, name: str, *, uid: str | None = None) -> PodRequest:
        return pod_request(name, uid=uid, node_name=self.node_name)

    async def rejected_pod(self) -> tuple[PodRequest, str]:
        # As RunPod answers a body it cannot accept: 422 with its reasons.
        detail = "image 'registry.example/llm-server:1' is not a valid reference"
        await self.fake.control.fail(status=422, method="POST", path="^/v2/pods$", detail=detail)
        return self.pod("rejected"), detail

    async def temporarily_failing_pod(self) -> tuple[PodRequest, PodRequest]:
        await self.fake.control.fail(status=503, method="POST", path="^/v2/pods$", times=3)  # = max_attempts
        request = self.pod("flaky")
        return request, request

    def _track(self, provider: RunPodProvider) -> RunPodProvider:
        self._extra.append(provider)
        return provider

    def other_node(self) -> PodLifecycle:
        return self._track(self._new("another-node"))

    def restarted(self) -> PodLifecycle | None:
        return self._track(self._new(self.node_name))

    async def start_outage(self) -> None:
        await self.fake.control.fail(status=503, detail="upstream connect error", times=None)

    async def end_outage(self) -> None:
        await self.fake.control.clear_faults()
        self.clock.advance(31)  # past the breaker's open period: the next call is its trial

    async def force_error(self, ref: PodRef, message: str) -> bool:
        pod = await runpod_pod_of(self.fake, ref.uid)
        await self.fake.control.set_status(pod["id"], "ERROR", message)
        return True

    async def vanish(self, ref: PodRef) -> bool:
        pod = await runpod_pod_of(self.fake, ref.uid)
        await self.fake.control.vanish(pod["id"])
        return True

    async def aclose(self) -> None:
        for provider in [self.provider, *self._extra]:
            await provider.aclose()


class TestRunPodContract(ProviderContract):
    @pytest.fixture
    async def harness(self, fake: FakeRunPod, tmp_path: Path) -> AsyncIterator[ProviderHarness]:
        harness = RunPodHarness(fake, tmp_path)
        yield harness
        await harness.aclose()
