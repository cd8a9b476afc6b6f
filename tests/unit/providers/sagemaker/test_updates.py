"""A changed pod, applied to its endpoint: new versions, UpdateEndpoint, what is removed after, failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from vk_devtools.standins.sagemaker import MotoSageMaker, SageMakerLayer
from vk_provider.errors import InvalidPodError, TemporaryProviderError
from vk_provider.provider import PodRequest
from vk_provider.testing.contract import eventually
from vk_providers.sagemaker import SageMakerProvider
from vk_providers.sagemaker.translate import INSTANCE_COUNT_ANNOTATION, INSTANCE_TYPE_ANNOTATION, TAG_POD_UID
from vk_providers.sagemaker.versions import version_stem

from .support import IMAGE, NODE, ManualClock, make_provider, pod_request

NEW_IMAGE = IMAGE.replace(":1", ":2")
UPDATE_SECONDS = 60.0
ROLLBACK_REASON = (
    "The primary container for production variant AllTraffic did not pass the ping health check."
)
READ_OPERATIONS = frozenset({"DescribeEndpoint", "DescribeEndpointConfig", "DescribeModel", "ListTags"})


def changed(request: PodRequest, **changes: Any) -> PodRequest:
    """The same pod (same UID) as `pod_request` makes it with `changes`."""
    return pod_request(request.ref.name, uid=request.ref.uid, **changes)


def versions(moto: MotoSageMaker, base: str) -> tuple[set[str], set[str]]:
    """The names of the pod's endpoint configurations and models that moto holds."""
    client = moto.client()
    stem = version_stem(base)
    configs = {
        c["EndpointConfigName"] for c in client.list_endpoint_configs(NameContains=stem)["EndpointConfigs"]
    }
    models = {m["ModelName"] for m in client.list_models()["Models"] if m["ModelName"].startswith(stem)}
    return configs, models


async def versions_now(moto: MotoSageMaker, base: str) -> tuple[set[str], set[str]]:
    """`versions` for `eventually`."""
    return versions(moto, base)


async def created(
    provider: SageMakerProvider, layer: SageMakerLayer, name: str = "llm"
) -> tuple[PodRequest, str]:
    """A pod made into an endpoint, whose updates take `UPDATE_SECONDS` on the test's clock."""
    layer.updating_seconds = UPDATE_SECONDS
    request = pod_request(name)
    await provider.create_pod(request)
    return request, provider.resource_name(request.ref)


async def test_an_image_change_moves_the_endpoint_onto_a_new_model_and_config(
    provider: SageMakerProvider, moto: MotoSageMaker, layer: SageMakerLayer, clock: ManualClock
) -> None:
    request, name = await created(provider, layer)
    await provider.update_pod(changed(request, image=NEW_IMAGE))

    assert layer.calls["UpdateEndpoint"] == 1
    configs, models = versions(moto, name)
    [new_config] = configs - {name}
    [new_model] = models - {name}
    assert new_config.startswith(f"{name}-")
    assert len(new_config) <= 63
    client = moto.client()
    assert client.describe_model(ModelName=new_model)["PrimaryContainer"]["Image"] == NEW_IMAGE
    [variant] = client.describe_endpoint_config(EndpointConfigName=new_config)["ProductionVariants"]
    assert variant["ModelName"] == new_model
    for arn in (
        client.describe_model(ModelName=new_model)["ModelArn"],
        client.describe_endpoint_config(EndpointConfigName=new_config)["EndpointConfigArn"],
    ):
        tags = {tag["Key"]: tag["Value"] for tag in client.list_tags(ResourceArn=arn)["Tags"]}
        assert (tags[TAG_POD_UID], tags["vk-provider.dev/node"]) == (request.ref.uid, NODE)

    # Updating: the old version keeps serving, the pod stays Running and ready.
    state = await provider.get_pod_state(request.ref)
    assert state is not None
    assert (state.phase, state.containers[0].ready, state.containers[0].image) == ("Running", True, IMAGE)
    assert state.traffic_address is not None
    assert state.message is not None
    assert "updating" in state.message
    assert layer.serving_config(name) == name

    clock.advance(UPDATE_SECONDS)
    # InService on the new version; the superseded model and configuration are removed.
    await eventually(
        lambda: versions_now(moto, name),
        lambda found: found == ({new_config}, {new_model}),
        what="the old version's removal",
    )
    assert layer.serving_config(name) == new_config
    [listed] = await provider.list_pods()  # one pod, whatever its versions
    assert listed.ref == request.ref
    state = await provider.get_pod_state(request.ref)
    assert state is not None
    assert (state.phase, state.message, state.containers[0].image) == ("Running", None, NEW_IMAGE)


async def test_an_instance_change_makes_a_new_config_on_the_same_model(
    provider: SageMakerProvider, moto: MotoSageMaker, layer: SageMakerLayer, clock: ManualClock
) -> None:
    request, name = await created(provider, layer)
    await provider.update_pod(changed(request, annotations={INSTANCE_COUNT_ANNOTATION: "3"}))
    assert layer.calls["CreateModel"] == 1  # the pod's creation only
    configs, _ = versions(moto, name)
    [new_config] = configs - {name}
    [variant] = moto.client().describe_endpoint_config(EndpointConfigName=new_config)["ProductionVariants"]
    assert (variant["ModelName"], variant["InitialInstanceCount"]) == (name, 3)
    layer.finish_updating(name)
    await eventually(
        lambda: versions_now(moto, name),
        lambda found: found == ({new_config}, {name}),  # the model is still the one in use
        what="the old configuration's removal",
    )


async def test_a_change_while_the_endpoint_updates_waits(
    provider: SageMakerProvider, layer: SageMakerLayer
) -> None:
    request, _ = await created(provider, layer)
    await provider.update_pod(changed(request, image=NEW_IMAGE))
    with pytest.raises(TemporaryProviderError, match="is Updating") as raised:
        await provider.update_pod(changed(request, image=NEW_IMAGE + "-again"))
    assert raised.value.retry_after_seconds is not None
    assert layer.calls["UpdateEndpoint"] == 1


async def test_a_change_while_the_endpoint_is_created_waits(
    provider: SageMakerProvider, layer: SageMakerLayer
) -> None:
    layer.creating_seconds = 600
    request, _ = await created(provider, layer)
    with pytest.raises(TemporaryProviderError, match="is Creating"):
        await provider.update_pod(changed(request, image=NEW_IMAGE))
    assert (layer.calls["UpdateEndpoint"], layer.calls["CreateModel"]) == (0, 1)


async def test_an_unchanged_pod_makes_no_call(
    provider: SageMakerProvider,
    moto: MotoSageMaker,
    layer: SageMakerLayer,
    tmp_path: Path,
    clock: ManualClock,
) -> None:
    request, _ = await created(provider, layer)
    relabelled = changed(request, annotations={"team": "search"})  # what the node calls update_pod for
    before = sum(layer.calls.values())
    await provider.update_pod(relabelled)
    assert sum(layer.calls.values()) == before

    # After a restart nothing is remembered: the endpoint is read, and nothing changed.
    restarted = make_provider(moto, tmp_path, layer=layer, clock=clock)
    try:
        before_restart = layer.calls.copy()
        await restarted.update_pod(relabelled)
        made = layer.calls - before_restart
        assert set(made) <= READ_OPERATIONS
        before = sum(layer.calls.values())
        await restarted.update_pod(relabelled)
        assert sum(layer.calls.values()) == before  # known now
    finally:
        await restarted.aclose()


async def test_deleting_a_pod_removes_every_version(
    provider: SageMakerProvider, moto: MotoSageMaker, layer: SageMakerLayer, clock: ManualClock
) -> None:
    request, name = await created(provider, layer)
    other, other_name = await created(provider, layer, "other")
    for pod in (request, other):
        await provider.update_pod(changed(pod, image=NEW_IMAGE))
    # Deleted while Updating: the old and the new version exist, and SageMaker refuses DeleteEndpoint.
    await provider.delete_pod(request.ref, grace_period_seconds=0)
    assert versions(moto, name) != (set(), set())
    clock.advance(UPDATE_SECONDS)
    await eventually(
        lambda: versions_now(moto, name),
        lambda found: found == (set(), set()),
        what="every version's removal",
    )
    assert await provider.get_pod_state(request.ref) is None
    # The other pod's versions are its own.
    await eventually(
        lambda: versions_now(moto, other_name),
        lambda found: len(found[0]) == 1 and len(found[1]) == 1 and other_name not in found[0],
        what="the other pod's old version's removal",
    )
    await provider.delete_pod(other.ref, grace_period_seconds=0)
    assert versions(moto, other_name) == (set(), set())


async def test_a_failed_update_is_reported_and_its_version_removed(
    provider: SageMakerProvider, moto: MotoSageMaker, layer: SageMakerLayer
) -> None:
    request, name = await created(provider, layer)
    layer.fail_next_update(ROLLBACK_REASON)
    await provider.update_pod(changed(request, image=NEW_IMAGE))
    layer.finish_updating(name)

    state = await provider.get_pod_state(request.ref)
    assert state is not None
    assert (state.phase, state.containers[0].ready, state.containers[0].image) == ("Running", True, IMAGE)
    assert state.traffic_address is not None
    assert state.message is not None
    assert "rolled back" in state.message
    assert ROLLBACK_REASON in state.message
    assert layer.serving_config(name) == name
    await eventually(
        lambda: versions_now(moto, name),
        lambda found: found == ({name}, {name}),
        what="the unused new version's removal",
    )
    # A later change tries again.
    await provider.update_pod(changed(request, image=NEW_IMAGE + "-fixed"))
    assert layer.calls["UpdateEndpoint"] == 2


async def test_an_update_cut_short_resumes_without_making_twice(
    moto: MotoSageMaker, layer: SageMakerLayer, tmp_path: Path, clock: ManualClock
) -> None:
    first = make_provider(moto, tmp_path, layer=layer, clock=clock)
    request, name = await created(first, layer)
    layer.fail("UpdateEndpoint", code="InternalFailure", message="We encountered an internal error", times=4)
    with pytest.raises(TemporaryProviderError, match="InternalFailure"):
        await first.update_pod(changed(request, image=NEW_IMAGE))
    await first.aclose()

    restarted = make_provider(moto, tmp_path, layer=layer, clock=clock)
    try:
        await restarted.update_pod(changed(request, image=NEW_IMAGE))
        configs, models = versions(moto, name)
        assert (len(configs), len(models)) == (2, 2)  # the first and one new version, made once each
        assert layer.calls["UpdateEndpoint"] == 5
    finally:
        await restarted.aclose()


async def test_a_refused_update_leaves_nothing_behind(
    provider: SageMakerProvider, moto: MotoSageMaker, layer: SageMakerLayer
) -> None:
    request, name = await created(provider, layer)
    with pytest.raises(InvalidPodError, match="instanceType"):
        await provider.update_pod(
            changed(request, image=NEW_IMAGE, annotations={INSTANCE_TYPE_ANNOTATION: "ml.nonexistent.xlarge"})
        )
    assert versions(moto, name) == ({name}, {name})
    assert layer.calls["UpdateEndpoint"] == 0


async def test_the_layer_refuses_updates_as_sagemaker_does(
    provider: SageMakerProvider, moto: MotoSageMaker, layer: SageMakerLayer
) -> None:
    # moto 5.2.5 has no UpdateEndpoint: the layer answers it, with SageMaker's refusals.
    _, name = await created(provider, layer)
    client = moto.client()
    layer.install(client)
    with pytest.raises(ClientError, match="Could not find endpoint configuration"):
        client.update_endpoint(EndpointName=name, EndpointConfigName="vk-missing")
    with pytest.raises(ClientError, match="Could not find endpoint"):
        client.update_endpoint(EndpointName="vk-missing", EndpointConfigName=name)
    client.update_endpoint(EndpointName=name, EndpointConfigName=name)
    assert client.describe_endpoint(EndpointName=name)["EndpointStatus"] == "Updating"
    with pytest.raises(ClientError, match="Cannot update in-progress endpoint"):
        client.update_endpoint(EndpointName=name, EndpointConfigName=name)
    with pytest.raises(ClientError, match="Cannot update in-progress endpoint"):
        client.delete_endpoint(EndpointName=name)
    layer.finish_updating(name)
    assert client.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService"
