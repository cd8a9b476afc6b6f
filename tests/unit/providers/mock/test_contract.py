"""The mock provider passes the provider contract (what its in-memory backend can simulate)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vk_provider.provider import (
    ContainerPort,
    ContainerSpec,
    PodLifecycle,
    PodRef,
    PodRequest,
    ProviderContext,
)
from vk_provider.testing.contract import ProviderContract, ProviderHarness, new_uid
from vk_providers.mock import MockProvider
from vk_providers.mock.provider import FAIL_CREATE_LABEL


class MockHarness:
    outage_fails_calls = False  # the mock's outage (its marker file) affects the health check only

    def __init__(self, state_dir: Path) -> None:
        self.node_name = "mock-contract"
        self._marker = state_dir / "unhealthy"
        self._state_dir = state_dir
        self.provider: PodLifecycle = self._new(self.node_name)

    def _new(self, node_name: str) -> MockProvider:
        config = {"unhealthy_marker_file": str(self._marker)}
        return MockProvider(ProviderContext(node_name, config, "127.0.0.1", self._state_dir))

    def pod(self, name: str, *, uid: str | None = None, labels: dict[str, str] | None = None) -> PodRequest:
        container = ContainerSpec(
            name="server", image="example/server:1", ports=(ContainerPort(8080, name="http"),)
        )
        return PodRequest(
            ref=PodRef("default", name, uid or new_uid()),
            node_name=self.node_name,
            containers=(container,),
            labels=labels or {},
        )

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
        return None  # pods live in the instance's memory

    async def start_outage(self) -> None:
        self._marker.touch()

    async def end_outage(self) -> None:
        self._marker.unlink()

    async def force_error(self, ref: PodRef, message: str) -> bool:
        return False

    async def vanish(self, ref: PodRef) -> bool:
        return False


class TestMockContract(ProviderContract):
    @pytest.fixture
    async def harness(self, tmp_path: Path) -> AsyncIterator[ProviderHarness]:
        harness = MockHarness(tmp_path)
        yield harness
        await harness.provider.aclose()
