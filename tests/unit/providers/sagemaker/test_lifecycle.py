"""Create, resume, delete and list against moto: the three resources, their names and tags, idempotence."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from vk_devtools.standins.sagemaker import GPU_INSTANCE_TYPE, TEST_ROLE_ARN, MotoSageMaker, SageMakerLayer
from vk_provider.errors import InvalidPodError, TemporaryProviderError
from vk_provider.provider import PodRef
from vk_provider.testing.contract import eventually
from vk_providers.sagemaker import SageMakerProvider
from vk_providers.sagemaker.translate import INSTANCE_COUNT_ANNOTATION, INSTANCE_TYPE_ANNOTATION

if TYPE_CHECKING:
    from mypy_boto3_sagemaker.type_defs import ProductionVariantTypeDef

from .support import IMAGE, NODE, ManualClock, RecordedSleep, make_provider, pod_request


def resources(moto: MotoSageMaker, name: str) -> dict[str, bool]:
    """Which of the pod's three resources moto holds."""
    client = moto.client()
    found = {}
    for kind, describe in (
        ("model", lambda: client.describe_model(ModelName=name)),
        ("config", lambda: client.describe_endpoint_config(EndpointConfigName=name)),
        ("endpoint", lambda: client.describe_endpoint(EndpointName=name)),
    ):
        try:
            describe()
        except ClientError:
            found[kind] = False
        else:
            found[kind] = True
    return found


async def resources_now(moto: MotoSageMaker, name: str) -> dict[str, bool]:
    """`resources` for `eventually`."""
    return resources(moto, name)


def create_untagged(moto: MotoSageMaker, name: str) -> None:
    """A model, configuration and endpoint named `name`, made by someone else (no tags)."""
    client = moto.client()
    client.create_model(ModelName=name, ExecutionRoleArn=TEST_ROLE_ARN, PrimaryContainer={"Image": IMAGE})
    variant: ProductionVariantTypeDef = {
        "VariantName": "AllTraffic",
        "ModelName": name,
        "InstanceType": "ml.g4dn.xlarge",
        "InitialInstanceCount": 1,
    }
    client.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])
    client.create_endpoint(EndpointName=name, EndpointConfigName=name)


ALL = {"model": True, "config": True, "endpoint": True}
NONE = {"model": False, "config": False, "endpoint": False}


async def test_a_pod_becomes_a_model_a_config_and_an_endpoint(
    provider: SageMakerProvider, moto: MotoSageMaker
) -> None:
    request = pod_request(
        "llm",
        namespace="serving",
        env=(("MODEL", "llama"), ("MODEL", "mistral"), ("PORT", "8080")),
        annotations={INSTANCE_COUNT_ANNOTATION: "2"},
    )
    await provider.create_pod(request)
    name = provider.resource_name(request.ref)
    assert name == f"vk-{request.ref.uid}"
    client = moto.client()
    model = client.describe_model(ModelName=name)
    assert model["ExecutionRoleArn"] == TEST_ROLE_ARN
    assert model["PrimaryContainer"]["Image"] == IMAGE
    assert model["PrimaryContainer"]["Environment"] == {"MODEL": "mistral", "PORT": "8080"}  # last one wins
    [variant] = client.describe_endpoint_config(EndpointConfigName=name)["ProductionVariants"]
    assert (variant["ModelName"], variant["InstanceType"], variant["InitialInstanceCount"]) == (
        name,
        GPU_INSTANCE_TYPE,
        2,
    )
    endpoint = client.describe_endpoint(EndpointName=name)
    assert endpoint["EndpointConfigName"] == name
    expected_tags = {
        "vk-provider.dev/pod-uid": request.ref.uid,
        "vk-provider.dev/node": NODE,
        "vk-provider.dev/pod": "serving/llm",
        "vk-provider.dev/container": "server",
        "vk-provider.dev/image": IMAGE,
    }
    for arn in (model["ModelArn"], endpoint["EndpointArn"]):
        tags = {tag["Key"]: tag["Value"] for tag in client.list_tags(ResourceArn=arn)["Tags"]}
        assert tags == expected_tags


async def test_the_instance_type_annotation_wins_over_the_setting(
    provider: SageMakerProvider, moto: MotoSageMaker
) -> None:
    request = pod_request("big", annotations={INSTANCE_TYPE_ANNOTATION: "ml.p3.2xlarge"})
    await provider.create_pod(request)
    config = moto.client().describe_endpoint_config(EndpointConfigName=provider.resource_name(request.ref))
    assert config["ProductionVariants"][0]["InstanceType"] == "ml.p3.2xlarge"


async def test_a_pod_that_mounts_a_secret_is_refused_before_anything_is_made(
    provider: SageMakerProvider, moto: MotoSageMaker
) -> None:
    request = dataclasses.replace(
        pod_request("files"),
        raw={"spec": {"volumes": [{"name": "hf-token", "secret": {"secretName": "hf"}}]}},
    )
    with pytest.raises(InvalidPodError, match=r"SageMaker cannot mount volumes .* hf-token \(secret\)"):
        await provider.create_pod(request)
    assert moto.client().list_models()["Models"] == []


async def test_create_resumes_after_a_crash_between_the_model_and_the_config(
    moto: MotoSageMaker, layer: SageMakerLayer, tmp_path: Path, clock: ManualClock
) -> None:
    request = pod_request("resumed")
    first = make_provider(moto, tmp_path, layer=layer, clock=clock, sleep=RecordedSleep())
    # The config cannot be made: the model is there, the daemon "crashes" (gives up) before the rest.
    layer.fail(
        "CreateEndpointConfig", code="InternalFailure", message="We encountered an internal error", times=4
    )
    with pytest.raises(TemporaryProviderError, match="InternalFailure"):
        await first.create_pod(request)
    await first.aclose()
    name = first.resource_name(request.ref)
    assert resources(moto, name) == {"model": True, "config": False, "endpoint": False}

    restarted = make_provider(moto, tmp_path, layer=layer, clock=clock)
    try:
        await restarted.create_pod(request)
        assert resources(moto, name) == ALL
        assert layer.calls["CreateModel"] == 1  # found, not made again
        assert layer.calls["CreateEndpoint"] == 1
        state = await restarted.get_pod_state(request.ref)
        assert state is not None
        assert state.phase == "Running"
    finally:
        await restarted.aclose()


async def test_create_resumes_when_only_the_endpoint_is_missing(
    provider: SageMakerProvider, moto: MotoSageMaker, layer: SageMakerLayer
) -> None:
    request = pod_request("half-done")
    await provider.create_pod(request)
    name = provider.resource_name(request.ref)
    moto.client().delete_endpoint(EndpointName=name)
    assert await provider.get_pod_state(request.ref) is None
    await provider.create_pod(request)
    assert resources(moto, name) == ALL
    assert (
        layer.calls["CreateModel"],
        layer.calls["CreateEndpointConfig"],
        layer.calls["CreateEndpoint"],
    ) == (
        1,
        1,
        2,
    )


@pytest.mark.parametrize("operation", ["CreateModel", "CreateEndpointConfig", "CreateEndpoint"])
async def test_a_create_whose_answer_was_lost_is_not_made_twice(
    provider: SageMakerProvider,
    moto: MotoSageMaker,
    layer: SageMakerLayer,
    sleep: RecordedSleep,
    operation: str,
) -> None:
    # The request reaches SageMaker, the answer does not (a read timeout); the retry finds the resource
    # made ("Cannot create already existing ...") and takes that as done.
    layer.lose_answer(operation)
    request = pod_request("lost-answer")
    await provider.create_pod(request)
    assert layer.calls[operation] == 2
    assert len(sleep.waits) == 1
    assert resources(moto, provider.resource_name(request.ref)) == ALL
    assert len(moto.client().list_endpoints()["Endpoints"]) == 1


async def test_creating_an_existing_pod_again_makes_nothing(
    provider: SageMakerProvider, layer: SageMakerLayer
) -> None:
    request = pod_request("twice")
    await provider.create_pod(request)
    await provider.create_pod(request)
    assert (
        layer.calls["CreateModel"],
        layer.calls["CreateEndpointConfig"],
        layer.calls["CreateEndpoint"],
    ) == (
        1,
        1,
        1,
    )


async def test_delete_removes_the_endpoint_its_config_and_its_model(
    moto: MotoSageMaker, tmp_path: Path, clock: ManualClock
) -> None:
    layer = SageMakerLayer(moto, deleting_seconds=60, clock=clock)
    provider = make_provider(moto, tmp_path, layer=layer, clock=clock)
    try:
        request = pod_request("deleted")
        await provider.create_pod(request)
        name = provider.resource_name(request.ref)
        await provider.delete_pod(request.ref, grace_period_seconds=30)
        # The config and the model go at once; the endpoint takes SageMaker a while.
        assert resources(moto, name) == {"model": False, "config": False, "endpoint": True}
        state = await provider.get_pod_state(request.ref)
        assert state is not None
        assert (state.phase, state.terminated, state.traffic_address) == ("Running", False, None)
        assert state.message == f"SageMaker is deleting endpoint {name}"
        assert await provider.list_pods() == []  # nothing left to do for it
        await provider.delete_pod(
            request.ref, grace_period_seconds=0
        )  # again: no DeleteEndpoint while Deleting
        assert layer.calls["DeleteEndpoint"] == 1
        clock.advance(60)
        assert await provider.get_pod_state(request.ref) is None
        assert resources(moto, name) == NONE
    finally:
        await provider.aclose()


async def test_an_endpoint_deleted_between_its_description_and_its_tags_is_gone(
    moto: MotoSageMaker, tmp_path: Path, clock: ManualClock
) -> None:
    # SageMaker ends the deletion right after DescribeEndpoint showed the endpoint Deleting: ListTags then
    # finds no endpoint (a ValidationException), and the pod is gone; that is not an error.
    layer = SageMakerLayer(moto, deleting_seconds=60, clock=clock)

    def install(client: Any) -> None:
        layer.install(client)
        client.meta.events.register("after-call.sagemaker.DescribeEndpoint", finish_deleting)

    def finish_deleting(**_: Any) -> None:
        clock.advance(60)  # the next call to the layer carries the deletion out

    provider = make_provider(moto, tmp_path, layer=layer, clock=clock, client_hook=install)
    try:
        request = pod_request("vanishing")
        await provider.create_pod(request)
        await provider.delete_pod(request.ref, grace_period_seconds=0)
        tag_reads = layer.calls["ListTags"]
        assert await provider.get_pod_state(request.ref) is None
        assert layer.calls["ListTags"] == tag_reads + 1  # asked once, and told the endpoint is gone
        assert await provider.list_pods() == []
    finally:
        await provider.aclose()


async def test_deleting_a_pod_that_never_was_succeeds(
    provider: SageMakerProvider, layer: SageMakerLayer
) -> None:
    ref = PodRef("default", "never", "5b0c1d4e-0000-4000-8000-000000000000")
    await provider.delete_pod(ref, grace_period_seconds=30)
    assert layer.calls["DeleteEndpoint"] == 0  # described first: nothing to delete
    assert (layer.calls["DeleteEndpointConfig"], layer.calls["DeleteModel"]) == (1, 1)  # both missing: fine


async def test_delete_of_a_half_made_pod_removes_what_there_is(
    provider: SageMakerProvider, moto: MotoSageMaker, layer: SageMakerLayer
) -> None:
    layer.fail("CreateEndpointConfig", code="InternalFailure", message="internal error", times=None)
    request = pod_request("half-made")
    with pytest.raises(TemporaryProviderError):
        await provider.create_pod(request)
    layer.clear_faults()
    name = provider.resource_name(request.ref)
    assert resources(moto, name)["model"]
    await provider.delete_pod(request.ref, grace_period_seconds=0)
    assert resources(moto, name) == NONE


async def test_a_pod_deleted_while_creating_is_deleted_once_sagemaker_allows_it(
    moto: MotoSageMaker, tmp_path: Path, clock: ManualClock
) -> None:
    # SageMaker refuses DeleteEndpoint while the endpoint is Creating, and removing the model under it
    # would leave it stuck: the provider records the deletion and carries it out later.
    layer = SageMakerLayer(moto, creating_seconds=600, clock=clock)
    provider = make_provider(moto, tmp_path, layer=layer, clock=clock, deletion_poll_seconds=0.01)
    try:
        request = pod_request("early-delete")
        name = provider.resource_name(request.ref)
        await provider.create_pod(request)
        await provider.delete_pod(request.ref, grace_period_seconds=30)
        assert resources(moto, name) == ALL  # nothing removed yet
        state = await provider.get_pod_state(request.ref)
        assert state is not None
        assert state.phase == "Pending"
        assert state.message is not None
        assert state.message.startswith("deletion requested")
        assert await provider.list_pods() == []
        layer.finish_creating(name)  # InService now: SageMaker lets it be deleted
        await eventually(lambda: resources_now(moto, name), lambda found: found == NONE, what="the deletion")
        assert await provider.get_pod_state(request.ref) is None
    finally:
        await provider.aclose()


async def test_a_refused_in_progress_deletion_is_retried_later(
    provider: SageMakerProvider, moto: MotoSageMaker, layer: SageMakerLayer
) -> None:
    # The endpoint reads InService when described, but SageMaker refuses its deletion as in progress
    # (an update started in between): the deletion is deferred, not failed.
    request = pod_request("raced")
    await provider.create_pod(request)
    name = provider.resource_name(request.ref)
    layer.fail(
        "DeleteEndpoint", code="ValidationException", message=f'Cannot update in-progress endpoint "{name}".'
    )
    await provider.delete_pod(request.ref, grace_period_seconds=0)
    await eventually(
        lambda: resources_now(moto, name), lambda found: found == NONE, what="the deferred deletion"
    )
    assert layer.calls["DeleteEndpoint"] == 2


async def test_creating_again_while_the_old_endpoint_is_deleting_waits(
    moto: MotoSageMaker, tmp_path: Path, clock: ManualClock
) -> None:
    layer = SageMakerLayer(moto, deleting_seconds=60, clock=clock)
    provider = make_provider(moto, tmp_path, layer=layer, clock=clock)
    try:
        request = pod_request("reborn")
        await provider.create_pod(request)
        await provider.delete_pod(request.ref, grace_period_seconds=0)
        with pytest.raises(TemporaryProviderError, match="still deleting") as raised:
            await provider.create_pod(request)
        assert raised.value.retry_after_seconds is not None
        clock.advance(60)
        await provider.create_pod(request)
        assert resources(moto, provider.resource_name(request.ref)) == ALL
    finally:
        await provider.aclose()


async def test_list_finds_this_nodes_endpoints_by_their_tags(
    provider: SageMakerProvider,
    moto: MotoSageMaker,
    layer: SageMakerLayer,
    tmp_path: Path,
    clock: ManualClock,
) -> None:
    mine = [pod_request("mine-1", namespace="a"), pod_request("mine-2", namespace="b")]
    for request in mine:
        await provider.create_pod(request)
    other = make_provider(moto, tmp_path, layer=layer, clock=clock, node_name="other-node")
    try:
        await other.create_pod(pod_request("theirs", node_name="other-node"))
    finally:
        await other.aclose()
    # Endpoints that are not ours: our prefix without our tags, and another name altogether.
    for name in ("vk-not-from-a-pod", "someone-elses"):
        create_untagged(moto, name)

    listed = await provider.list_pods()
    assert {state.ref for state in listed} == {request.ref for request in mine}
    assert all(state.phase == "Running" and state.traffic_address for state in listed)
    # After a restart, with nothing remembered, the tags alone give the same answer.
    restarted = make_provider(moto, tmp_path, layer=layer, clock=clock)
    try:
        assert {state.ref for state in await restarted.list_pods()} == {request.ref for request in mine}
        tag_reads = layer.calls["ListTags"]
        await restarted.list_pods()
        assert layer.calls["ListTags"] == tag_reads  # read once per endpoint
    finally:
        await restarted.aclose()


async def test_a_failed_endpoint_is_listed_with_its_reason(
    provider: SageMakerProvider, layer: SageMakerLayer
) -> None:
    request = pod_request("listed-failure")
    await provider.create_pod(request)
    layer.force(
        provider.resource_name(request.ref),
        "Failed",
        "The primary container for production variant AllTraffic did not pass the ping health check.",
    )
    [state] = await provider.list_pods()
    assert state.phase == "Failed"
    assert state.message is not None
    assert "did not pass the ping health check" in state.message


async def test_an_endpoint_with_our_name_but_not_our_pod_is_refused(
    provider: SageMakerProvider, moto: MotoSageMaker
) -> None:
    request = pod_request("clash")
    create_untagged(moto, provider.resource_name(request.ref))
    assert await provider.get_pod_state(request.ref) is None
    with pytest.raises(InvalidPodError, match="was not made for pod"):
        await provider.create_pod(request)
