"""EndpointStatus to pod states: each status through the provider and moto, and the mapping's rules."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from vk_devtools.standins.sagemaker import MotoSageMaker, SageMakerLayer
from vk_provider.provider import ContainerStateKind, PodRef
from vk_providers.sagemaker import SageMakerProvider
from vk_providers.sagemaker.translate import Endpoint, Owner, endpoint_state

from .support import ManualClock, make_provider, pod_request

REASON = "The primary container for production variant AllTraffic did not pass the ping health check."

# status -> (phase, container state, ready, traffic address published)
EXPECTED = {
    "Creating": ("Pending", ContainerStateKind.WAITING, False, False),
    "InService": ("Running", ContainerStateKind.RUNNING, True, True),
    "Updating": ("Running", ContainerStateKind.RUNNING, True, True),
    "SystemUpdating": ("Running", ContainerStateKind.RUNNING, True, True),
    "RollingBack": ("Running", ContainerStateKind.RUNNING, True, True),
    "UpdateRollbackFailed": ("Running", ContainerStateKind.RUNNING, True, True),
    "OutOfService": ("Running", ContainerStateKind.RUNNING, False, False),
    "Deleting": ("Running", ContainerStateKind.RUNNING, False, False),
    "Failed": ("Failed", ContainerStateKind.TERMINATED, False, False),
}


@pytest.mark.parametrize("status", sorted(EXPECTED))
async def test_each_endpoint_status_maps_to_a_pod_state(
    provider: SageMakerProvider, layer: SageMakerLayer, status: str
) -> None:
    request = pod_request(f"status-{status.lower()}")
    await provider.create_pod(request)
    name = provider.resource_name(request.ref)
    layer.force(name, status, REASON if status in ("Failed", "UpdateRollbackFailed") else None)
    state = await provider.get_pod_state(request.ref)
    assert state is not None
    phase, kind, ready, serving = EXPECTED[status]
    [container] = state.containers
    assert (state.phase, container.state, container.ready) == (phase, kind, ready)
    assert container.name == "server"
    expected_address = f"https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/{name}/invocations"
    assert state.traffic_address == (expected_address if serving else None)
    # The router must sign what it sends there, for SageMaker in the provider's region.
    expected_auth = "aws-sigv4; service=sagemaker; region=us-east-1"
    assert state.traffic_auth == (expected_auth if serving else None)
    assert not state.terminated
    # What SageMaker is doing, said on the pod (or, while Creating, on the waiting container).
    message = container.message if status == "Creating" else state.message
    if status == "InService":
        assert message is None
    else:
        assert message is not None
        assert name in message


async def test_failed_carries_sagemakers_failure_reason(
    provider: SageMakerProvider, layer: SageMakerLayer
) -> None:
    request = pod_request("fails")
    await provider.create_pod(request)
    name = provider.resource_name(request.ref)
    layer.force(name, "Failed", REASON)
    state = await provider.get_pod_state(request.ref)
    assert state is not None
    assert state.phase == "Failed"
    assert state.reason == "EndpointFailed"
    assert state.message == f"SageMaker endpoint {name} failed: {REASON}"
    [container] = state.containers
    assert container.termination is not None
    assert (container.termination.exit_code, container.termination.reason) == (1, "Error")
    assert container.termination.message == REASON


async def test_an_endpoint_goes_from_creating_to_in_service(
    moto: MotoSageMaker, tmp_path: Path, clock: ManualClock
) -> None:
    layer = SageMakerLayer(moto, creating_seconds=300, clock=clock)
    provider = make_provider(moto, tmp_path, layer=layer, clock=clock)
    try:
        request = pod_request("grows")
        await provider.create_pod(request)
        creating = await provider.get_pod_state(request.ref)
        assert creating is not None
        assert (creating.phase, creating.containers[0].reason) == ("Pending", "ContainerCreating")
        assert [state.phase for state in await provider.list_pods()] == ["Pending"]
        clock.advance(300)
        running = await provider.get_pod_state(request.ref)
        assert running is not None
        assert running.phase == "Running"
        assert running.containers[0].ready
        assert running.started_at is not None
    finally:
        await provider.aclose()


async def test_the_runtime_url_can_be_overridden(
    moto: MotoSageMaker, layer: SageMakerLayer, tmp_path: Path, clock: ManualClock
) -> None:
    provider = make_provider(moto, tmp_path, layer=layer, clock=clock, runtime_url="http://relay.test:8080/")
    try:
        request = pod_request("relayed")
        await provider.create_pod(request)
        state = await provider.get_pod_state(request.ref)
        assert state is not None
        assert state.traffic_address == (
            f"http://relay.test:8080/endpoints/{provider.resource_name(request.ref)}/invocations"
        )
        # The relay's host says no region, so the marker names it.
        assert state.traffic_auth == "aws-sigv4; service=sagemaker; region=us-east-1"
    finally:
        await provider.aclose()


OWNER = Owner(PodRef("default", "p", "uid-1"), "node", "server", "image:1")
CREATED = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
MODIFIED = datetime(2026, 12, 1, 10, 9, tzinfo=UTC)


def test_an_unknown_status_is_unknown_with_the_status_as_reason() -> None:
    state = endpoint_state(
        OWNER.ref, Endpoint("vk-x", "arn:x", "Hibernating", CREATED), OWNER, traffic_address="https://t"
    )
    assert (state.phase, state.reason, state.traffic_address) == ("Unknown", "Hibernating", None)
    assert state.containers[0].state is ContainerStateKind.WAITING


def test_a_failed_endpoint_ends_when_sagemaker_last_modified_it() -> None:
    endpoint = Endpoint("vk-x", "arn:x", "Failed", CREATED, MODIFIED, failure_reason="out of capacity")
    state = endpoint_state(OWNER.ref, endpoint, OWNER, traffic_address="https://t")
    termination = state.containers[0].termination
    assert termination is not None
    assert (termination.started_at, termination.finished_at) == (CREATED, MODIFIED)


def test_a_requested_deletion_stops_the_traffic_of_an_updating_endpoint() -> None:
    endpoint = Endpoint("vk-x", "arn:x", "Updating", CREATED)
    state = endpoint_state(OWNER.ref, endpoint, OWNER, traffic_address="https://t", deletion_requested=True)
    assert state.traffic_address is None
    assert not state.containers[0].ready
    assert state.message is not None
    assert state.message.startswith("deletion requested")
    # Once SageMaker has it Deleting, the request is no longer news.
    deleting = endpoint_state(
        OWNER.ref,
        Endpoint("vk-x", "arn:x", "Deleting", CREATED),
        OWNER,
        traffic_address="https://t",
        deletion_requested=True,
    )
    assert deleting.message == "SageMaker is deleting endpoint vk-x"
