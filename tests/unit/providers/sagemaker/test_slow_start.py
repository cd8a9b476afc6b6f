"""A SageMaker endpoint Creating for longer than ten minutes (research notes, section 1: 525 s for
Qwen3-8B on ml.g6.2xlarge without container caching) is a pod on its way, never a failed one; only
SageMaker's Failed fails it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vk_devtools.standins.sagemaker import MotoSageMaker, SageMakerLayer
from vk_providers.sagemaker import SageMakerProvider

from .support import ManualClock, RecordedSleep, make_provider, pod_request

CREATING_SECONDS = 15 * 60.0
STEP_SECONDS = 30.0


@pytest.fixture
def slow_layer(moto: MotoSageMaker, clock: ManualClock) -> SageMakerLayer:
    return SageMakerLayer(moto, clock=clock, creating_seconds=CREATING_SECONDS)


@pytest.fixture
async def slow(
    moto: MotoSageMaker, slow_layer: SageMakerLayer, tmp_path: Path, clock: ManualClock, sleep: RecordedSleep
) -> AsyncIterator[SageMakerProvider]:
    subject = make_provider(moto, tmp_path, layer=slow_layer, clock=clock, sleep=sleep)
    yield subject
    await subject.aclose()


async def test_fifteen_minutes_creating_is_pending_all_along_then_running(
    slow: SageMakerProvider, slow_layer: SageMakerLayer, clock: ManualClock
) -> None:
    request = pod_request("slow")
    await slow.create_pod(request)
    seen = set()
    while clock.now + STEP_SECONDS < 1000.0 + CREATING_SECONDS:
        clock.advance(STEP_SECONDS)
        state = await slow.get_pod_state(request.ref)
        assert state is not None
        seen.add((state.phase, state.containers[0].reason))
    assert seen == {("Pending", "ContainerCreating")}

    clock.advance(STEP_SECONDS)
    state = await slow.get_pod_state(request.ref)
    assert state is not None
    assert (state.phase, state.containers[0].ready) == ("Running", True)
    assert (slow_layer.calls["CreateEndpoint"], slow_layer.calls["DeleteEndpoint"]) == (1, 0)


async def test_only_sagemakers_failed_fails_the_pod(
    slow: SageMakerProvider, slow_layer: SageMakerLayer, clock: ManualClock
) -> None:
    request = pod_request("unhealthy")
    await slow.create_pod(request)
    clock.advance(11 * 60)
    state = await slow.get_pod_state(request.ref)
    assert state is not None
    assert state.phase == "Pending"
    reason = "The primary container for production variant AllTraffic did not pass the ping health check."
    slow_layer.force(slow.resource_name(request.ref), "Failed", reason)
    state = await slow.get_pod_state(request.ref)
    assert state is not None
    assert (state.phase, state.reason) == ("Failed", "EndpointFailed")
    assert reason in (state.message or "")
