"""The sagemaker provider passes the provider contract against moto, with SageMaker's timing added.

Endpoints are Creating for 50 ms and Deleting for 50 ms (real time; the contract polls), creating one
for a name that exists is refused and deleting one that is Creating is refused, as SageMaker does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vk_devtools.standins.sagemaker import MotoSageMaker, SageMakerLayer
from vk_provider.provider import PodLifecycle, PodRef, PodRequest
from vk_provider.testing.contract import ProviderContract, ProviderHarness
from vk_providers.sagemaker import SageMakerProvider
from vk_providers.sagemaker.translate import INSTANCE_TYPE_ANNOTATION, resource_name

from .support import ManualClock, make_provider, pod_request


class SageMakerHarness:
    outage_fails_calls = True

    def __init__(self, moto: MotoSageMaker, state_dir: Path) -> None:
        self.moto = moto
        self.layer = SageMakerLayer(moto, creating_seconds=0.05, deleting_seconds=0.05)
        self.node_name = "sagemaker-contract"
        self.clock = ManualClock()  # the breaker's
        self._state_dir = state_dir
        self._extra: list[SageMakerProvider] = []
        self.provider: PodLifecycle = self._new(self.node_name)

    def _new(self, node_name: str) -> SageMakerProvider:
        return make_provider(
            self.moto, self._state_dir, layer=self.layer, clock=self.clock, node_name=node_name
        )

    def pod(self, name: str, *, uid: str | None = None) -> PodRequest:
        return pod_request(name, uid=uid, node_name=self.node_name)

    async def rejected_pod(self) -> tuple[PodRequest, str]:
        # SageMaker (and moto) refuse an instance type they do not have: ValidationException.
        request = pod_request(
            "rejected",
            node_name=self.node_name,
            annotations={INSTANCE_TYPE_ANNOTATION: "ml.nonexistent.xlarge"},
        )
        return request, "Value 'ml.nonexistent.xlarge' at 'instanceType' failed to satisfy constraint"

    async def temporarily_failing_pod(self) -> tuple[PodRequest, PodRequest]:
        self.layer.fail(
            "CreateEndpoint",
            code="ResourceLimitExceeded",
            message="The account-level service limit 'ml.g4dn.xlarge for endpoint usage' is 2 Instances, "
            "with current utilization of 2 Instances and a request delta of 1 Instances.",
        )
        request = self.pod("flaky")
        return request, request

    def _track(self, provider: SageMakerProvider) -> SageMakerProvider:
        self._extra.append(provider)
        return provider

    def other_node(self) -> PodLifecycle:
        return self._track(self._new("another-node"))

    def restarted(self) -> PodLifecycle | None:
        return self._track(self._new(self.node_name))

    async def start_outage(self) -> None:
        self.layer.start_outage()

    async def end_outage(self) -> None:
        self.layer.clear_faults()
        self.clock.advance(31)  # past the breaker's open period: the next call is its trial

    async def force_error(self, ref: PodRef, message: str) -> bool:
        self.layer.force(resource_name("vk", ref.uid), "Failed", message)
        return True

    async def vanish(self, ref: PodRef) -> bool:
        self.layer.vanish(resource_name("vk", ref.uid))
        return True

    async def aclose(self) -> None:
        for provider in [self.provider, *self._extra]:
            assert isinstance(provider, SageMakerProvider)
            await provider.aclose()


class TestSageMakerContract(ProviderContract):
    @pytest.fixture
    async def harness(self, moto: MotoSageMaker, tmp_path: Path) -> AsyncIterator[ProviderHarness]:
        harness = SageMakerHarness(moto, tmp_path)
        yield harness
        await harness.aclose()
