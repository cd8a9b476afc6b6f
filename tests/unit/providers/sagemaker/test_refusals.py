"""SageMaker's capacity and quota refusals: the pod's next instance type, or a wait; a quota of 0 holds
creates of that instance type back, and shows on the node once every type asked for is held, never a
storm of CreateEndpoint calls."""

from __future__ import annotations

import pytest

from vk_devtools.standins.sagemaker import GPU_INSTANCE_TYPE, TEST_ROLE_ARN, MotoSageMaker, SageMakerLayer
from vk_provider.errors import CapacityUnavailableError, ProviderRefusesWorkError
from vk_provider.provider import PodRef, PricedPod, ProviderContext
from vk_providers.sagemaker import SageMakerProvider
from vk_providers.sagemaker.config import SageMakerSettings
from vk_providers.sagemaker.prices import endpoint_price
from vk_providers.sagemaker.quota_holds import QUOTA_REASON
from vk_providers.sagemaker.translate import INSTANCE_TYPE_ANNOTATION

from ..node_retries import retry_as_the_node_does
from .support import (
    ManualClock,
    RecordedSleep,
    instance_type_served,
    pod_request,
)

SECOND_TYPE = "ml.g4dn.2xlarge"
NO_CAPACITY = (
    "Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
)
QUOTA_ZERO = (
    f"The account-level service limit '{GPU_INSTANCE_TYPE} for endpoint usage' is 0 Instances, with "
    "current utilization of 0 Instances and a request delta of 1 Instances."
)


async def test_no_capacity_moves_the_pod_to_its_next_instance_type_and_says_so(
    subject: SageMakerProvider, layer: SageMakerLayer, moto: MotoSageMaker, context: ProviderContext
) -> None:
    layer.fail("CreateEndpoint", code="InsufficientInstanceCapacity", message=NO_CAPACITY)
    pod = pod_request("moved", annotations={INSTANCE_TYPE_ANNOTATION: f"{GPU_INSTANCE_TYPE}, {SECOND_TYPE}"})
    await subject.create_pod(pod)

    assert instance_type_served(moto, subject.resource_name(pod.ref)) == SECOND_TYPE
    assert (layer.calls["CreateEndpointConfig"], layer.calls["CreateEndpoint"]) == (2, 2)
    [(ref, kind, reason, message)] = context.pod_events.recorded
    assert (ref, kind, reason) == (pod.ref, "Warning", "NoCapacity")
    assert message == (
        f"SageMaker has no capacity or quota left for 1 x {GPU_INSTANCE_TYPE}; trying {SECOND_TYPE}"
    )
    await subject.update_pod(pod)  # the type it runs on is one the pod allows: no move back
    assert layer.calls["UpdateEndpoint"] == 0


async def test_with_one_instance_type_no_capacity_is_a_wait(
    subject: SageMakerProvider, layer: SageMakerLayer, sleep: RecordedSleep
) -> None:
    layer.fail("CreateEndpoint", code="InsufficientInstanceCapacity", message=NO_CAPACITY)
    with pytest.raises(CapacityUnavailableError) as refused:
        await subject.create_pod(pod_request("waiting"))
    assert refused.value.retry_after_seconds == subject.settings.capacity_retry_seconds
    assert f"InsufficientInstanceCapacity: {NO_CAPACITY}" in str(refused.value)
    assert layer.calls["CreateEndpoint"] == 1
    assert sleep.waits == []  # not retried within the call: the node waits


async def create_endpoint_calls_while_refused(
    provider: SageMakerProvider, layer: SageMakerLayer, clock: ManualClock, *, pods: int, seconds: float
) -> int:
    """Pods retried as the node retries them (its default backoff, never before the provider's wait)
    for `seconds` of manual time: the CreateEndpoint calls SageMaker received."""
    requests = [pod_request(f"waiting-{index}") for index in range(pods)]
    start = clock.now

    def set_clock(offset: float) -> None:
        clock.now = start + offset

    await retry_as_the_node_does(provider.create_pod, requests, set_clock, seconds=seconds)
    return layer.calls["CreateEndpoint"]


async def test_a_quota_of_0_holds_every_create_back_until_aws_raises_it(
    subject: SageMakerProvider, layer: SageMakerLayer, clock: ManualClock
) -> None:
    layer.fail("CreateEndpoint", code="ResourceLimitExceeded", message=QUOTA_ZERO, times=None)
    calls = await create_endpoint_calls_while_refused(subject, layer, clock, pods=5, seconds=600)
    # One CreateEndpoint at 0, 120, 360 s (the first wait is the provider's capacity_retry_seconds, then
    # doubled); before this, every pod sent one every 120 s (30 calls, measured on the same run).
    assert calls == 3
    with pytest.raises(ProviderRefusesWorkError) as unavailable:
        await subject.check_health()
    assert unavailable.value.reason == "QuotaExceeded"
    assert "is 0 Instances" in str(unavailable.value)

    layer.clear_faults()  # AWS raised the quota
    clock.advance(1200)
    await subject.check_health()
    await subject.create_pod(pod_request("after-the-raise"))
    await subject.check_health()
    assert layer.calls["CreateEndpoint"] == calls + 1


async def test_a_quota_of_0_holds_that_instance_type_only(
    subject: SageMakerProvider,
    layer: SageMakerLayer,
    moto: MotoSageMaker,
    context: ProviderContext,
    clock: ManualClock,
) -> None:
    layer.set_quota(GPU_INSTANCE_TYPE, 0)
    first = pod_request(
        "first", annotations={INSTANCE_TYPE_ANNOTATION: f"{GPU_INSTANCE_TYPE}, {SECOND_TYPE}"}
    )
    await subject.create_pod(first)
    assert instance_type_served(moto, subject.resource_name(first.ref)) == SECOND_TYPE
    assert layer.calls["CreateEndpoint"] == 2  # refused on the first type, taken on the second
    await subject.check_health()  # the second type has quota: the provider takes work

    second = pod_request(
        "second", annotations={INSTANCE_TYPE_ANNOTATION: f"{GPU_INSTANCE_TYPE}, {SECOND_TYPE}"}
    )
    await subject.create_pod(second)
    assert instance_type_served(moto, subject.resource_name(second.ref)) == SECOND_TYPE
    assert layer.calls["CreateEndpoint"] == 3  # the held type is not asked again
    told = [message for ref, _, reason, message in context.pod_events.recorded if reason == "NoCapacity"]
    assert told[0] == f"SageMaker has a quota of 0 for 1 x {GPU_INSTANCE_TYPE}; trying {SECOND_TYPE}"
    assert told[1].startswith(f"SageMaker has a quota of 0 for 1 x {GPU_INSTANCE_TYPE} (not asked again for ")
    assert told[1].endswith(f"; trying {SECOND_TYPE}")

    only_held = pod_request("only-the-held-type")  # the provider's default: the held type
    with pytest.raises(CapacityUnavailableError) as waiting:
        await subject.create_pod(only_held)
    assert layer.calls["CreateEndpoint"] == 3
    assert 0 < (waiting.value.retry_after_seconds or 0) <= subject.settings.capacity_retry_seconds
    await subject.check_health()  # still: another type has quota

    layer.set_quota(GPU_INSTANCE_TYPE, None)  # AWS raised the quota
    clock.advance(subject.settings.capacity_retry_seconds)
    await subject.create_pod(only_held)
    assert instance_type_served(moto, subject.resource_name(only_held.ref)) == GPU_INSTANCE_TYPE


async def test_the_node_is_unavailable_once_every_instance_type_asked_for_is_held(
    subject: SageMakerProvider, layer: SageMakerLayer
) -> None:
    layer.set_quota(GPU_INSTANCE_TYPE, 0)
    layer.set_quota(SECOND_TYPE, 0)
    pod = pod_request(
        "nowhere", annotations={INSTANCE_TYPE_ANNOTATION: f"{GPU_INSTANCE_TYPE}, {SECOND_TYPE}"}
    )
    with pytest.raises(ProviderRefusesWorkError) as refused:
        await subject.create_pod(pod)
    assert refused.value.reason == QUOTA_REASON
    with pytest.raises(ProviderRefusesWorkError) as unavailable:
        await subject.check_health()
    assert unavailable.value.reason == QUOTA_REASON
    assert f"{GPU_INSTANCE_TYPE}: " in str(unavailable.value)
    assert f"{SECOND_TYPE}: " in str(unavailable.value)
    assert layer.calls["CreateEndpoint"] == 2


def test_a_pod_of_several_instance_types_costs_its_dearest() -> None:
    settings = SageMakerSettings(
        role_arn=TEST_ROLE_ARN, instance_prices={GPU_INSTANCE_TYPE: 0.7364, SECOND_TYPE: 1.0528}
    )

    def price(types: str) -> float | None:
        pod = PricedPod(PodRef("ns", "p", "u"), annotations={INSTANCE_TYPE_ANNOTATION: types}, requests={})
        return endpoint_price(pod, settings, "eu-west-1")

    assert price(f"{GPU_INSTANCE_TYPE}, {SECOND_TYPE}") == 1.0528
    assert price(f"{SECOND_TYPE}, {GPU_INSTANCE_TYPE}") == 1.0528
    assert price(GPU_INSTANCE_TYPE) == 0.7364
    assert price(f"{GPU_INSTANCE_TYPE}, ml.unpriced.xlarge") is None  # unknown: counted as such
