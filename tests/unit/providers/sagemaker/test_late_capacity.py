"""Capacity SageMaker reports late: an endpoint it accepted goes Failed for InsufficientInstanceCapacity.
The pod never fails for it: its endpoint is replaced (same name, the pod UID's) on its next instance type,
or, with no type left, the pod waits and tries again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from vk_devtools.standins.sagemaker import (
    CAPACITY_FAILURE_REASON,
    GPU_INSTANCE_TYPE,
    MotoSageMaker,
    SageMakerLayer,
)
from vk_provider.errors import CapacityUnavailableError, TemporaryProviderError
from vk_provider.provider import PodRequest, PodState, ProviderContext
from vk_providers.sagemaker import SageMakerProvider
from vk_providers.sagemaker.translate import INSTANCE_TYPE_ANNOTATION

from .support import ManualClock, RecordedSleep, instance_type_served, pod_request

SECOND_TYPE = "ml.g4dn.2xlarge"
DELETING_SECONDS = 60.0


def two_types(name: str) -> PodRequest:
    return pod_request(name, annotations={INSTANCE_TYPE_ANNOTATION: f"{GPU_INSTANCE_TYPE}, {SECOND_TYPE}"})


async def created_again_when_gone(provider: SageMakerProvider, pod: PodRequest) -> PodState | None:
    """What the node does at each pass: the pod's state, and a create when the provider holds nothing."""
    state = await provider.get_pod_state(pod.ref)
    if state is None:
        await provider.create_pod(pod)
    return state


async def test_an_endpoint_failed_for_capacity_is_replaced_on_the_next_instance_type(
    subject: SageMakerProvider, layer: SageMakerLayer, moto: MotoSageMaker, context: ProviderContext
) -> None:
    layer.set_capacity(GPU_INSTANCE_TYPE, 0)
    pod = two_types("late")
    await subject.create_pod(pod)  # accepted: the shortage shows on the endpoint, later
    name = subject.resource_name(pod.ref)
    assert layer.status(name) == "Failed"

    state = await created_again_when_gone(subject, pod)
    assert state is not None
    assert (state.phase, state.containers[0].reason) == ("Pending", "NoCapacity")
    assert GPU_INSTANCE_TYPE in (state.message or "")
    assert layer.calls["DeleteEndpoint"] == 1

    assert await created_again_when_gone(subject, pod) is None  # gone: created again
    assert instance_type_served(moto, name) == SECOND_TYPE
    state = await subject.get_pod_state(pod.ref)
    assert state is not None
    assert (state.phase, state.containers[0].ready) == ("Running", True)
    assert (layer.calls["CreateEndpoint"], layer.calls["DeleteEndpoint"]) == (2, 1)
    [(ref, kind, reason, message)] = context.pod_events.recorded
    assert (ref, kind, reason) == (pod.ref, "Warning", "NoCapacity")
    assert message == (
        f"SageMaker had no capacity for 1 x {GPU_INSTANCE_TYPE} (its endpoint failed: "
        f"{CAPACITY_FAILURE_REASON}); trying {SECOND_TYPE}"
    )


async def test_with_no_instance_type_left_the_pod_waits_then_tries_again(
    subject: SageMakerProvider, layer: SageMakerLayer, moto: MotoSageMaker, clock: ManualClock
) -> None:
    layer.set_capacity(GPU_INSTANCE_TYPE, 0)
    pod = pod_request("one-type")
    await subject.create_pod(pod)
    state = await subject.get_pod_state(pod.ref)
    assert state is not None
    assert state.phase == "Pending"

    assert await subject.get_pod_state(pod.ref) is None
    with pytest.raises(CapacityUnavailableError) as waiting:
        await subject.create_pod(pod)
    assert waiting.value.retry_after_seconds == subject.settings.capacity_retry_seconds
    assert CAPACITY_FAILURE_REASON in str(waiting.value)
    assert layer.calls["CreateEndpoint"] == 1  # not asked again before the wait

    layer.set_capacity(GPU_INSTANCE_TYPE, None)
    clock.advance(subject.settings.capacity_retry_seconds)
    await subject.create_pod(pod)
    assert instance_type_served(moto, subject.resource_name(pod.ref)) == GPU_INSTANCE_TYPE
    state = await subject.get_pod_state(pod.ref)
    assert state is not None
    assert state.phase == "Running"


@pytest.fixture
def deleting_layer(moto: MotoSageMaker, clock: ManualClock) -> SageMakerLayer:
    return SageMakerLayer(moto, clock=clock, deleting_seconds=DELETING_SECONDS)


@pytest.fixture
async def deleting(
    context: ProviderContext, deleting_layer: SageMakerLayer, clock: ManualClock, sleep: RecordedSleep
) -> AsyncIterator[SageMakerProvider]:
    provider = SageMakerProvider(context, clock=clock, sleep=sleep, client_hook=deleting_layer.install)
    yield provider
    await provider.aclose()


async def test_while_the_failed_endpoint_is_deleted_the_pod_stays_pending(
    deleting: SageMakerProvider,
    deleting_layer: SageMakerLayer,
    moto: MotoSageMaker,
    clock: ManualClock,
) -> None:
    deleting_layer.set_capacity(GPU_INSTANCE_TYPE, 0)
    pod = two_types("slow-delete")
    await deleting.create_pod(pod)
    name = deleting.resource_name(pod.ref)
    for _ in range(3):  # asked again and again while SageMaker deletes it: one DeleteEndpoint
        state = await deleting.get_pod_state(pod.ref)
        assert state is not None
        assert (state.phase, state.containers[0].reason) == ("Pending", "NoCapacity")
        clock.advance(DELETING_SECONDS / 4)
    assert deleting_layer.status(name) == "Deleting"
    assert deleting_layer.calls["DeleteEndpoint"] == 1
    with pytest.raises(TemporaryProviderError):  # a create that comes too early waits for the deletion
        await deleting.create_pod(pod)

    clock.advance(DELETING_SECONDS)
    assert await created_again_when_gone(deleting, pod) is None
    assert instance_type_served(moto, name) == SECOND_TYPE
