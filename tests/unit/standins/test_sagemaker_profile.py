"""The SageMaker stand-in's profiles: Creating for minutes, capacity and quotas per instance type, a
container that fails `/ping`; and the fast default, unchanged. Every test runs on a manual clock."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from botocore.exceptions import ClientError

from vk_devtools.standins.sagemaker import (
    CAPACITY_FAILURE_REASON,
    FAST,
    GPU_INSTANCE_TYPE,
    REALISTIC,
    REALISTIC_CACHED,
    TEST_ROLE_ARN,
    Container,
    MotoSageMaker,
    Profile,
    SageMakerLayer,
)

from .sagemaker_support import ManualClock

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-server:1"
BROKEN_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-server:broken"
NO_CAPACITY = "ml.g5.xlarge"
WITH_CAPACITY = "ml.g6.xlarge"


def layered(layer: SageMakerLayer) -> SageMakerClient:
    client = layer.moto.client()
    layer.install(client)
    return client


def create_endpoint(
    client: SageMakerClient,
    name: str,
    *,
    instance_type: str = GPU_INSTANCE_TYPE,
    count: int = 1,
    image: str = IMAGE,
    health_check_timeout: int | None = None,
) -> None:
    client.create_model(ModelName=name, PrimaryContainer={"Image": image}, ExecutionRoleArn=TEST_ROLE_ARN)
    variant: dict[str, object] = {
        "VariantName": "AllTraffic",
        "ModelName": name,
        "InitialInstanceCount": count,
        "InstanceType": instance_type,
    }
    if health_check_timeout is not None:
        variant["ContainerStartupHealthCheckTimeoutInSeconds"] = health_check_timeout
    client.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])  # type: ignore[list-item]
    client.create_endpoint(EndpointName=name, EndpointConfigName=name)


def described(client: SageMakerClient, name: str) -> tuple[str, str | None]:
    endpoint = client.describe_endpoint(EndpointName=name)
    return endpoint["EndpointStatus"], endpoint.get("FailureReason")


def status_at(client: SageMakerClient, clock: ManualClock, name: str, seconds: float) -> str:
    """The endpoint's status `seconds` after `clock`'s present, the clock moved there."""
    clock.advance(seconds)
    return described(client, name)[0]


# -- the default ---------------------------------------------------------------------------------


def test_the_default_profile_is_fast_and_an_endpoint_is_in_service_at_once(
    moto: MotoSageMaker, clock: ManualClock
) -> None:
    layer = SageMakerLayer(moto, clock=clock)
    assert layer.profile is FAST
    assert (layer.creating_seconds, layer.updating_seconds, layer.deleting_seconds) == (0, 0, 0)
    client = layered(layer)
    create_endpoint(client, "at-once")
    assert described(client, "at-once") == ("InService", None)
    client.delete_endpoint(EndpointName="at-once")
    with pytest.raises(ClientError, match="Could not find endpoint"):
        client.describe_endpoint(EndpointName="at-once")


def test_explicit_times_still_replace_the_profiles(moto: MotoSageMaker, clock: ManualClock) -> None:
    # As the provider's tests use the layer: 300 s of Creating is all provisioning, which no health-check
    # timeout (240 s) cuts short.
    layer = SageMakerLayer(moto, creating_seconds=300, clock=clock)
    client = layered(layer)
    create_endpoint(client, "given")
    assert status_at(client, clock, "given", 299) == "Creating"
    assert status_at(client, clock, "given", 1) == "InService"
    layer.creating_seconds = 50
    create_endpoint(client, "set-later")
    assert status_at(client, clock, "set-later", 49.5) == "Creating"
    assert status_at(client, clock, "set-later", 0.5) == "InService"


# -- Creating for minutes ------------------------------------------------------------------------


@pytest.mark.parametrize(("profile", "total"), [(REALISTIC, 525.0), (REALISTIC_CACHED, 258.0)])
def test_a_realistic_endpoint_is_creating_for_the_measured_startup(
    moto: MotoSageMaker, clock: ManualClock, profile: Profile, total: float
) -> None:
    layer = SageMakerLayer(moto, profile=profile, clock=clock)
    assert layer.creating_seconds == total  # the blog's end-to-end startup (see `profile`)
    client = layered(layer)
    create_endpoint(client, "llm", instance_type="ml.g6.2xlarge")
    assert status_at(client, clock, "llm", total - 1) == "Creating"
    listed = client.list_endpoints()["Endpoints"]
    assert [(summary["EndpointName"], summary["EndpointStatus"]) for summary in listed] == [
        ("llm", "Creating")
    ]
    assert status_at(client, clock, "llm", 1) == "InService"


def test_a_container_that_loads_slowly_is_creating_longer(moto: MotoSageMaker, clock: ManualClock) -> None:
    layer = SageMakerLayer(moto, profile=REALISTIC, clock=clock)
    layer.script_container(IMAGE, Container(loading_seconds=30))
    client = layered(layer)
    create_endpoint(client, "quick")
    assert status_at(client, clock, "quick", REALISTIC.provisioning_seconds + 29) == "Creating"
    assert status_at(client, clock, "quick", 1) == "InService"


# -- instance types: capacity and quotas ---------------------------------------------------------


def test_capacity_is_scripted_per_instance_type(moto: MotoSageMaker, clock: ManualClock) -> None:
    layer = SageMakerLayer(moto, profile=REALISTIC, clock=clock)
    layer.set_capacity(NO_CAPACITY, 0)
    client = layered(layer)
    create_endpoint(client, "on-g5", instance_type=NO_CAPACITY)  # accepted: no API error
    create_endpoint(client, "on-g6", instance_type=WITH_CAPACITY)
    # moto does not know these types; SageMaker's answers still name them.
    config = client.describe_endpoint_config(EndpointConfigName="on-g5")
    assert config["ProductionVariants"][0]["InstanceType"] == NO_CAPACITY
    assert status_at(client, clock, "on-g5", REALISTIC.capacity_failure_seconds - 1) == "Creating"
    clock.advance(1)
    assert described(client, "on-g5") == ("Failed", CAPACITY_FAILURE_REASON)
    assert "InsufficientInstanceCapacity" in CAPACITY_FAILURE_REASON
    assert status_at(client, clock, "on-g6", REALISTIC.creating_seconds) == "InService"
    # Capacity comes back: the next endpoint on that type is created.
    layer.set_capacity(NO_CAPACITY, None)
    create_endpoint(client, "on-g5-again", instance_type=NO_CAPACITY)
    assert status_at(client, clock, "on-g5-again", REALISTIC.creating_seconds) == "InService"


def test_capacity_counts_the_instances_held(moto: MotoSageMaker, clock: ManualClock) -> None:
    layer = SageMakerLayer(moto, clock=clock)
    layer.set_capacity(NO_CAPACITY, 2)
    client = layered(layer)
    create_endpoint(client, "first", instance_type=NO_CAPACITY, count=2)
    create_endpoint(client, "second", instance_type=NO_CAPACITY)
    assert described(client, "first") == ("InService", None)
    assert described(client, "second") == ("Failed", CAPACITY_FAILURE_REASON)
    # A Failed endpoint holds nothing; deleting the first frees its two instances.
    client.delete_endpoint(EndpointName="first")
    create_endpoint(client, "third", instance_type=NO_CAPACITY, count=2)
    assert described(client, "third") == ("InService", None)


def test_a_quota_of_zero_refuses_create_endpoint(moto: MotoSageMaker, clock: ManualClock) -> None:
    layer = SageMakerLayer(moto, profile=REALISTIC, clock=clock)
    layer.set_quota("ml.g6e.xlarge", 0)
    client = layered(layer)
    with pytest.raises(ClientError) as refused:
        create_endpoint(client, "over-quota", instance_type="ml.g6e.xlarge")
    error = refused.value.response
    assert error["Error"]["Code"] == "ResourceLimitExceeded"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Error"]["Message"].startswith(
        "The account-level service limit 'ml.g6e.xlarge for endpoint usage' is 0 Instances, with current "
        "utilization of 0 Instances and a request delta of 1 Instances."
    )
    with pytest.raises(ClientError, match="Could not find endpoint"):
        client.describe_endpoint(EndpointName="over-quota")
    # Other types are not limited.
    create_endpoint(client, "elsewhere", instance_type=WITH_CAPACITY)
    assert described(client, "elsewhere")[0] == "Creating"


def test_a_quota_counts_the_instances_in_use(moto: MotoSageMaker, clock: ManualClock) -> None:
    layer = SageMakerLayer(moto, clock=clock)
    layer.set_quota(GPU_INSTANCE_TYPE, 1)
    client = layered(layer)
    create_endpoint(client, "within")
    with pytest.raises(ClientError, match="current utilization of 1 Instances and a request delta of 1"):
        create_endpoint(client, "beyond")
    client.delete_endpoint(EndpointName="within")
    create_endpoint(client, "beyond-later")
    assert described(client, "beyond-later") == ("InService", None)
    with pytest.raises(ValueError, match="-1 instances"):
        layer.set_quota(GPU_INSTANCE_TYPE, -1)


def test_a_type_neither_knows_is_still_refused(moto: MotoSageMaker, clock: ManualClock) -> None:
    client = layered(SageMakerLayer(moto, clock=clock))
    with pytest.raises(ClientError, match=re.escape("Value 'ml.nonexistent.xlarge' at 'instanceType'")):
        create_endpoint(client, "bad-type", instance_type="ml.nonexistent.xlarge")


# -- a container that fails /ping ----------------------------------------------------------------


def test_a_container_that_never_answers_ping_fails_after_the_health_check_timeout(
    moto: MotoSageMaker, clock: ManualClock
) -> None:
    layer = SageMakerLayer(moto, profile=REALISTIC, clock=clock)
    layer.script_container(BROKEN_IMAGE, Container(answers_ping=False))
    client = layered(layer)
    create_endpoint(client, "broken", image=BROKEN_IMAGE)
    create_endpoint(client, "healthy")
    # The health check counts from the container's start, four minutes by default.
    assert status_at(client, clock, "broken", REALISTIC.provisioning_seconds + 239) == "Creating"
    clock.advance(1)
    status, reason = described(client, "broken")
    assert status == "Failed"
    assert reason == (
        "The primary container for production variant AllTraffic did not pass the ping health check. "
        "Please check CloudWatch logs for this endpoint."
    )
    assert status_at(client, clock, "healthy", REALISTIC.loading_seconds) == "InService"
    # A Failed endpoint can be deleted, and is.
    client.delete_endpoint(EndpointName="broken")
    assert status_at(client, clock, "broken", 0) == "Deleting"
    clock.advance(REALISTIC.deleting_seconds)
    with pytest.raises(ClientError, match="Could not find endpoint"):
        client.describe_endpoint(EndpointName="broken")


def test_the_variants_health_check_timeout_replaces_the_default(
    moto: MotoSageMaker, clock: ManualClock
) -> None:
    layer = SageMakerLayer(moto, profile=REALISTIC, clock=clock)
    layer.script_container(BROKEN_IMAGE, Container(answers_ping=False))
    layer.script_container(IMAGE, Container(loading_seconds=500))  # ten minutes' model, minus a bit
    client = layered(layer)
    create_endpoint(client, "patient-broken", image=BROKEN_IMAGE, health_check_timeout=600)
    create_endpoint(client, "patient-slow", health_check_timeout=600)
    create_endpoint(client, "impatient-slow")
    start = REALISTIC.provisioning_seconds
    # Loading 500 s is beyond the default 240 s: that endpoint fails as a broken one would.
    assert status_at(client, clock, "impatient-slow", start + 240) == "Failed"
    assert described(client, "patient-slow")[0] == "Creating"
    assert status_at(client, clock, "patient-slow", 260) == "InService"
    assert described(client, "patient-broken")[0] == "Creating"
    assert status_at(client, clock, "patient-broken", 100) == "Failed"


def test_the_fast_profile_keeps_sagemakers_health_check_timeout(
    moto: MotoSageMaker, clock: ManualClock
) -> None:
    layer = SageMakerLayer(moto, clock=clock)
    layer.script_container(BROKEN_IMAGE, Container(answers_ping=False))
    client = layered(layer)
    create_endpoint(client, "broken-fast", image=BROKEN_IMAGE)
    assert status_at(client, clock, "broken-fast", 239) == "Creating"
    assert status_at(client, clock, "broken-fast", 1) == "Failed"
    # Scripted ends can be hurried, as a healthy Creating can.
    create_endpoint(client, "hurried", image=BROKEN_IMAGE)
    layer.finish_creating("hurried")
    assert described(client, "hurried")[0] == "Failed"


def test_the_same_script_gives_the_same_course(moto: MotoSageMaker) -> None:
    def course() -> list[tuple[str, str]]:
        moto.reset()
        clock = ManualClock()
        layer = SageMakerLayer(moto, profile=REALISTIC, clock=clock)
        layer.set_capacity(NO_CAPACITY, 1)
        layer.script_container(BROKEN_IMAGE, Container(answers_ping=False))
        client = layered(layer)
        for name, instance_type, image in (
            ("a", NO_CAPACITY, IMAGE),
            ("b", NO_CAPACITY, IMAGE),
            ("c", WITH_CAPACITY, BROKEN_IMAGE),
        ):
            create_endpoint(client, name, instance_type=instance_type, image=image)
        seen = []
        for _ in range(12):
            clock.advance(60)
            seen.extend((name, described(client, name)[0]) for name in "abc")
        return seen

    first = course()
    assert first == course()
    assert ("b", "Failed") in first
    assert ("c", "Failed") in first
    assert first[-3:] == [("a", "InService"), ("b", "Failed"), ("c", "Failed")]


# -- updates ---------------------------------------------------------------------------------------


def add_config(client: SageMakerClient, name: str, model: str, instance_type: str) -> None:
    client.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": model,
                "InitialInstanceCount": 1,
                "InstanceType": instance_type,  # type: ignore[typeddict-item]
            }
        ],
    )


def test_an_update_onto_a_type_without_capacity_is_rolled_back(
    moto: MotoSageMaker, clock: ManualClock
) -> None:
    layer = SageMakerLayer(moto, profile=REALISTIC, clock=clock)
    client = layered(layer)
    create_endpoint(client, "moving", instance_type=WITH_CAPACITY)
    clock.advance(REALISTIC.creating_seconds)
    layer.set_capacity(NO_CAPACITY, 0)
    add_config(client, "moving-g5", "moving", NO_CAPACITY)
    client.update_endpoint(EndpointName="moving", EndpointConfigName="moving-g5")
    assert status_at(client, clock, "moving", REALISTIC.capacity_failure_seconds - 1) == "Updating"
    clock.advance(1)
    endpoint = client.describe_endpoint(EndpointName="moving")
    assert (endpoint["EndpointStatus"], endpoint["EndpointConfigName"]) == ("InService", "moving")
    assert endpoint.get("FailureReason") == CAPACITY_FAILURE_REASON


def test_an_update_needs_quota_for_the_new_fleet_beside_the_old(
    moto: MotoSageMaker, clock: ManualClock
) -> None:
    layer = SageMakerLayer(moto, clock=clock)
    layer.set_quota(WITH_CAPACITY, 1)
    client = layered(layer)
    create_endpoint(client, "blue", instance_type=WITH_CAPACITY)
    add_config(client, "green", "blue", WITH_CAPACITY)
    with pytest.raises(ClientError, match="ResourceLimitExceeded") as refused:
        client.update_endpoint(EndpointName="blue", EndpointConfigName="green")
    assert "current utilization of 1 Instances and a request delta of 1 Instances" in str(refused.value)
    layer.set_quota(WITH_CAPACITY, 2)
    client.update_endpoint(EndpointName="blue", EndpointConfigName="green")
    assert client.describe_endpoint(EndpointName="blue")["EndpointConfigName"] == "green"
