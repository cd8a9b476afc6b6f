"""Pods to SageMaker deployments, and SageMaker endpoints back to pod states. Pure, no I/O.

Names: a pod's model, endpoint configuration and endpoint share one name, `<name_prefix>-<pod UID>`
(SageMaker keeps the three kinds apart), e.g. `vk-0b6f2c8e-5d7a-4d0e-9c1b-6a2f1e3d4c5b`: 39 characters of
the 63 allowed, matching `[a-zA-Z0-9](-*[a-zA-Z0-9])*`. A UID that does not fit is replaced by its
SHA-256, cut to fit. An update's model and configuration add a digest of their content (`versions`).

Identity: all three carry the tags `vk-provider.dev/pod-uid`, `vk-provider.dev/node` and
`vk-provider.dev/pod` (`<namespace>/<name>`), plus `vk-provider.dev/container` and, when it fits a tag,
`vk-provider.dev/image`, so `list_pods` gives full references after a restart without other
bookkeeping.

States (EndpointStatus; "serving" means the container is ready and the traffic address is published):

| EndpointStatus       | phase   | container                  | serving | pod message                    |
|----------------------|---------|----------------------------|---------|--------------------------------|
| Creating             | Pending | waiting: ContainerCreating | no      |                                |
| InService            | Running | running                    | yes     |                                |
| InService + reason   | Running | running                    | yes     | the update failed: the reason  |
| Updating             | Running | running                    | yes     | SageMaker is updating it       |
| SystemUpdating       | Running | running                    | yes     | SageMaker is updating it       |
| RollingBack          | Running | running                    | yes     | an update is being rolled back |
| UpdateRollbackFailed | Running | running                    | yes     | the FailureReason              |
| OutOfService         | Running | running                    | no      | out of service                 |
| Deleting             | Running | running                    | no      | being deleted                  |
| Failed               | Failed  | terminated: Error, exit 1  | no      | the FailureReason              |
| Failed: no capacity  | Pending | waiting: NoCapacity        | no      | the type, and the replacement  |
| other                | Unknown | waiting: the status        | no      | the status                     |

A Failed pod has the reason EndpointFailed, an unknown status is its own reason. An endpoint Failed for
want of capacity (InsufficientInstanceCapacity in its FailureReason) does not fail the pod: the provider
deletes it and creates the pod again on its next instance type (`shortages`); until then, and while that
endpoint is Deleting, the pod is Pending (`short_of_capacity_state`). Endpoints keep serving
while they update or roll back (SageMaker swaps instances behind the name), so those count as ready.
An endpoint whose update failed is back InService on its previous configuration with a FailureReason
("InService + reason"): the pod stays Running and ready, its message says why the update failed.
SageMaker reports no exit code; a failed endpoint is recorded with exit code 1.
The traffic address is the runtime's invocation URL, `<runtime>/endpoints/<name>/invocations`; requests
to it must be signed with SigV4 (`vk_provider.kit.signing`), which the pod state says in `traffic_auth`
(the router reads it from the pod's `vk-provider.dev/TrafficAuth` status condition).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from datetime import datetime

from vk_provider.errors import InvalidPodError
from vk_provider.kit.podvolumes import refuse_volumes_beyond_own_disk
from vk_provider.kit.traffic_auth import SAGEMAKER_SERVICE, AwsSigV4
from vk_provider.provider import (
    ContainerSpec,
    ContainerState,
    ContainerStateKind,
    ContainerTermination,
    PodPhase,
    PodRef,
    PodRequest,
    PodState,
)
from vk_providers.sagemaker.config import NAME_PATTERN, SageMakerSettings

MAX_NAME = 63
MAX_TAG_VALUE = 256

ANNOTATION_PREFIX = "sagemaker.vk-provider.dev/"
INSTANCE_TYPE_ANNOTATION = ANNOTATION_PREFIX + "instance-type"
"""An instance type, or several, comma-separated, in order of preference (as
`runpod.vk-provider.dev/gpu-type` lists GPU types): the later ones are tried when SageMaker has no
capacity (InsufficientInstanceCapacity) or no quota (ResourceLimitExceeded) for the earlier."""
INSTANCE_COUNT_ANNOTATION = ANNOTATION_PREFIX + "instance-count"

TAG_PREFIX = "vk-provider.dev/"
TAG_POD_UID = TAG_PREFIX + "pod-uid"
TAG_NODE = TAG_PREFIX + "node"
TAG_POD = TAG_PREFIX + "pod"
TAG_CONTAINER = TAG_PREFIX + "container"
TAG_IMAGE = TAG_PREFIX + "image"

VARIANT_NAME = "AllTraffic"
FAILED_EXIT_CODE = 1

IN_PROGRESS = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
"""Statuses in which SageMaker refuses DeleteEndpoint ("Cannot update in-progress endpoint")."""
SERVING = frozenset({"InService", "Updating", "SystemUpdating", "RollingBack", "UpdateRollbackFailed"})
"""Statuses in which the endpoint answers invocations."""


def resource_name(prefix: str, uid: str) -> str:
    """The name of the pod's model, endpoint configuration and endpoint."""
    name = f"{prefix}-{uid}"
    if len(name) <= MAX_NAME and NAME_PATTERN.fullmatch(name):
        return name
    digest = hashlib.sha256(uid.encode()).hexdigest()
    return f"{prefix}-{digest}"[:MAX_NAME]


def runtime_base_url(settings: SageMakerSettings, region: str) -> str:
    if settings.runtime_url is not None:
        return settings.runtime_url
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://runtime.sagemaker.{region}.{domain}"


def invocation_url(base_url: str, name: str) -> str:
    return f"{base_url}/endpoints/{name}/invocations"


def traffic_auth_marker(region: str) -> str:
    """What the router must do to reach an invocation URL: sign for `sagemaker` in the region.

    The region is named even though AWS's own runtime host says it, because a `runtime_url` (a VPC
    endpoint, a stand-in) does not.
    """
    return AwsSigV4(region=region, service=SAGEMAKER_SERVICE).marker()


@dataclasses.dataclass(frozen=True, slots=True)
class Deployment:
    """A pod as SageMaker needs it: its endpoint's name, and those of the model and configuration to make.

    `deployment_for` gives the first version, where all three share the endpoint's name; an update names
    a new model and configuration (`versions.next_version`).
    """

    name: str
    model_name: str
    config_name: str
    image: str
    environment: Mapping[str, str]
    instance_type: str
    instance_count: int
    tags: tuple[tuple[str, str], ...]
    startup_timeout_seconds: int | None = None


def deployment_for(pod: PodRequest, settings: SageMakerSettings, node_name: str) -> Deployment:
    """What to create for `pod` on the node `node_name`; InvalidPodError for what SageMaker cannot run."""
    container = _single_container(pod)
    refuse_volumes_beyond_own_disk(pod.raw.get("spec") or {}, "SageMaker")
    name = resource_name(settings.name_prefix, pod.ref.uid)
    return Deployment(
        name=name,
        model_name=name,
        config_name=name,
        image=container.image,
        environment=dict(container.env),
        instance_type=instance_type_of(pod.annotations, settings),
        instance_count=instance_count_of(pod.annotations, settings),
        tags=tags_for(pod.ref, node_name, container),
        startup_timeout_seconds=settings.container_startup_timeout_seconds,
    )


def tags_for(ref: PodRef, node_name: str, container: ContainerSpec) -> tuple[tuple[str, str], ...]:
    pod = f"{ref.namespace}/{ref.name}"
    if len(pod) > MAX_TAG_VALUE:
        raise InvalidPodError(
            f"SageMaker tag values hold at most {MAX_TAG_VALUE} characters, and {pod!r} has {len(pod)}"
        )
    tags = [(TAG_POD_UID, ref.uid), (TAG_NODE, node_name), (TAG_POD, pod), (TAG_CONTAINER, container.name)]
    if len(container.image) <= MAX_TAG_VALUE:
        tags.append((TAG_IMAGE, container.image))
    return tuple(tags)


def _single_container(pod: PodRequest) -> ContainerSpec:
    if pod.init_containers:
        raise InvalidPodError("SageMaker runs one container per endpoint: init containers are not supported")
    if len(pod.containers) != 1:
        raise InvalidPodError(
            f"SageMaker runs one container per endpoint, and this pod has {len(pod.containers)}"
        )
    container = pod.containers[0]
    for field, value in (("command", container.command), ("args", container.args)):
        if value:
            raise InvalidPodError(
                f"container {container.name!r} sets {field}: SageMaker always starts the image as "
                "`<entrypoint> serve`; build the command into the image"
            )
    if container.working_dir:
        raise InvalidPodError(f"container {container.name!r} sets workingDir, which SageMaker cannot")
    return container


def instance_types_of(annotations: Mapping[str, str], settings: SageMakerSettings) -> tuple[str, ...]:
    """The instance types the pod accepts, most preferred first (see `INSTANCE_TYPE_ANNOTATION`)."""
    named = [name.strip() for name in annotations.get(INSTANCE_TYPE_ANNOTATION, "").split(",")]
    chosen = tuple(dict.fromkeys(name for name in named if name))
    if not chosen and settings.instance_type:
        chosen = (settings.instance_type,)
    if not chosen:
        raise InvalidPodError(
            f"no SageMaker instance type: annotate the pod with {INSTANCE_TYPE_ANNOTATION} "
            "(e.g. ml.g5.xlarge) or set the provider's instance_type"
        )
    return chosen


def instance_type_of(annotations: Mapping[str, str], settings: SageMakerSettings) -> str:
    return instance_types_of(annotations, settings)[0]


def instance_count_of(annotations: Mapping[str, str], settings: SageMakerSettings) -> int:
    text = annotations.get(INSTANCE_COUNT_ANNOTATION)
    if text is None:
        return settings.instance_count
    try:
        count = int(text.strip())
    except ValueError:
        count = 0
    if count < 1:
        raise InvalidPodError(f"{INSTANCE_COUNT_ANNOTATION} must be a whole number >= 1, not {text!r}")
    return count


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    """What DescribeEndpoint or ListEndpoints says of an endpoint."""

    name: str
    arn: str
    status: str
    creation_time: datetime | None = None
    last_modified_time: datetime | None = None
    failure_reason: str | None = None
    config_name: str | None = None
    """The endpoint configuration it serves (DescribeEndpoint says; ListEndpoints does not)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Owner:
    """Whose an endpoint is, from its tags."""

    ref: PodRef
    node_name: str
    container: str
    image: str


def owner_from_tags(tags: Mapping[str, str]) -> Owner | None:
    """The pod an endpoint was made for; None if its tags are not (all) ours."""
    uid, node, pod, container = (tags.get(key) for key in (TAG_POD_UID, TAG_NODE, TAG_POD, TAG_CONTAINER))
    if not uid or not node or not pod or not container or "/" not in pod:
        return None
    namespace, name = pod.split("/", 1)
    return Owner(PodRef(namespace, name, uid), node, container, tags.get(TAG_IMAGE, ""))


def endpoint_state(
    ref: PodRef,
    endpoint: Endpoint,
    owner: Owner,
    *,
    traffic_address: str,
    traffic_auth: str | None = None,
    deletion_requested: bool = False,
) -> PodState:
    """The pod state an endpoint stands for (see the module's table).

    `traffic_auth` (see `traffic_auth_marker`) goes out with the traffic address, only while serving.

    `deletion_requested`: the provider asked for the endpoint's deletion and SageMaker will allow it
    only once the endpoint leaves an in-progress status; it is reported as stopping, without traffic.
    """
    status = endpoint.status
    started = endpoint.creation_time
    running = ContainerState(
        owner.container,
        owner.image,
        ContainerStateKind.RUNNING,
        ready=status in SERVING,
        started=True,
        started_at=started,
    )
    phase: PodPhase = "Running"
    reason: str | None = None
    message: str | None = None
    container = running
    if status == "Creating":
        phase = "Pending"
        container = ContainerState(
            owner.container,
            owner.image,
            ContainerStateKind.WAITING,
            reason="ContainerCreating",
            message=f"SageMaker is creating endpoint {endpoint.name}",
        )
    elif status == "InService" and endpoint.failure_reason:
        message = (
            f"an update of endpoint {endpoint.name} failed and was rolled back (it serves its previous "
            f"configuration): {endpoint.failure_reason}"
        )
    elif status in ("Updating", "SystemUpdating"):
        message = f"SageMaker is updating endpoint {endpoint.name} ({status}); it keeps serving"
    elif status == "RollingBack":
        message = f"SageMaker is rolling back an update of endpoint {endpoint.name}; it keeps serving"
    elif status == "UpdateRollbackFailed":
        message = _with_reason(f"an update of endpoint {endpoint.name} and its rollback failed", endpoint)
    elif status == "OutOfService":
        message = f"SageMaker endpoint {endpoint.name} is out of service"
    elif status == "Deleting":
        message = f"SageMaker is deleting endpoint {endpoint.name}"
    elif status == "Failed":
        phase = "Failed"
        reason = "EndpointFailed"
        message = _with_reason(f"SageMaker endpoint {endpoint.name} failed", endpoint)
        container = ContainerState(
            owner.container,
            owner.image,
            ContainerStateKind.TERMINATED,
            reason="Error",
            message=endpoint.failure_reason,
            started_at=started,
            termination=ContainerTermination(
                exit_code=FAILED_EXIT_CODE,
                reason="Error",
                message=endpoint.failure_reason,
                started_at=started,
                finished_at=endpoint.last_modified_time,
            ),
        )
    elif status != "InService":
        phase = "Unknown"
        reason = status or None
        message = f"SageMaker reports endpoint {endpoint.name} as {status!r}"
        container = ContainerState(owner.container, owner.image, ContainerStateKind.WAITING, reason=status)
    deletion_requested = deletion_requested and status in IN_PROGRESS
    serving = status in SERVING and not deletion_requested
    if deletion_requested:
        message = (
            f"deletion requested: SageMaker deletes endpoint {endpoint.name} once it is no longer {status}"
        )
        if container.state is ContainerStateKind.RUNNING:
            container = dataclasses.replace(container, ready=False)
    return PodState(
        ref=ref,
        phase=phase,
        containers=(container,),
        started_at=started,
        reason=reason,
        message=message,
        traffic_address=traffic_address if serving else None,
        traffic_auth=traffic_auth if serving else None,
    )


NO_CAPACITY_REASON = "NoCapacity"
"""The waiting reason of a pod whose endpoint failed for want of capacity, while it is replaced."""


def short_of_capacity_state(ref: PodRef, endpoint: Endpoint, owner: Owner, instance_type: str) -> PodState:
    """A pod whose endpoint SageMaker failed for want of `instance_type` capacity ("" when not known),
    while the provider removes it to create the pod again: Pending, waiting, never Failed."""
    what = f"{instance_type} capacity" if instance_type else "capacity"
    why = endpoint.failure_reason or "no reason given"
    message = (
        f"SageMaker had no {what} for endpoint {endpoint.name} ({why}); "
        "it is removed and the pod created again, on its next instance type if it has one"
    )
    container = ContainerState(
        owner.container, owner.image, ContainerStateKind.WAITING, reason=NO_CAPACITY_REASON, message=message
    )
    return PodState(ref=ref, phase="Pending", containers=(container,), message=message)


def _with_reason(text: str, endpoint: Endpoint) -> str:
    return f"{text}: {endpoint.failure_reason}" if endpoint.failure_reason else text
