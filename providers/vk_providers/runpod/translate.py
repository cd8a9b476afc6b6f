"""Pods to RunPod create bodies, and RunPod pods back to pod states. Pure, no I/O.

Identity: a RunPod pod is ours when its environment names this node and a pod UID (`ENV_NODE_NAME`,
`ENV_POD_UID`); the pod's namespace, name and container name travel with them, so `list_pods` can give
full references after a restart without any other bookkeeping. The RunPod pod is named
`<name_prefix>-<pod UID>` for people looking at the console. These variables are set last, over any of
the pod's own with the same names.

States (RunPod's `PodStatus`):

| RunPod       | phase   | container                          | pod reason / message                     |
|--------------|---------|------------------------------------|------------------------------------------|
| PROVISIONING | Pending | waiting: Provisioning              |                                          |
| STARTING     | Pending | waiting: ContainerCreating         |                                          |
| RUNNING      | Running | running since startedAt; ready     |                                          |
| RUNNING *    | Running | running, not ready: LoadingModel   |                                          |
| EXITED       | Failed  | terminated: Exited                 | Exited: no exit code is reported         |
| ERROR        | Failed  | terminated: Error                  | RunPodError: its system log's last lines |
| TERMINATED   | none: treated as gone, like a 404                                             |
| other        | Unknown | waiting: the status                | the status                               |

(* its readiness probe does not answer yet. RunPod's STARTING covers pulling the image and starting the
container: it tells no finer stage.)

A RUNNING container is ready when its HTTP readiness probe answers through the proxy (see `readiness`);
until then it is running, not ready, with the reason LoadingModel (what an inference server does for the
minutes after RunPod says RUNNING: research notes, section 1), which the node shows in the pod's
ContainersReady and Ready conditions, as the kubelet shows a container that is not ready.
RunPod reports no exit code; a stopped container is recorded with exit code 1 (`UNREPORTED_EXIT_CODE`),
matching the Failed phase, and the message says so.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from vk_provider.errors import InvalidPodError
from vk_provider.kit.podvolumes import refuse_volumes_beyond_own_disk
from vk_provider.provider import (
    ContainerSpec,
    ContainerState,
    ContainerStateKind,
    ContainerTermination,
    GpuOffer,
    PodRef,
    PodRequest,
    PodState,
)
from vk_providers.runpod.api import RunPodPod
from vk_providers.runpod.config import CLOUDS, Cloud, RunPodSettings
from vk_providers.runpod.readiness import ENV_READINESS, ReadinessTarget, readiness_target

ENV_POD_UID = "VK_PROVIDER_POD_UID"
ENV_POD_NAMESPACE = "VK_PROVIDER_POD_NAMESPACE"
ENV_POD_NAME = "VK_PROVIDER_POD_NAME"
ENV_NODE_NAME = "VK_PROVIDER_NODE_NAME"
ENV_CONTAINER_NAME = "VK_PROVIDER_CONTAINER_NAME"

ANNOTATION_PREFIX = "runpod.vk-provider.dev/"
GPU_TYPE_ANNOTATION = ANNOTATION_PREFIX + "gpu-type"
"""A GPU type id, or several, comma-separated, in order of preference: the later ones are tried when
RunPod has no capacity for the earlier (see `candidates`)."""
CLOUD_ANNOTATION = ANNOTATION_PREFIX + "cloud"
DATA_CENTERS_ANNOTATION = ANNOTATION_PREFIX + "data-centers"
"""Comma-separated data center ids, in order of preference."""
MAX_PRICE_ANNOTATION = ANNOTATION_PREFIX + "max-price-per-hour"
GPU_RESOURCE = "nvidia.com/gpu"
MAX_HTTP_PORTS = 10
"""The proxy serves at most 10 HTTP ports per pod (docs: expose-ports)."""
UNREPORTED_EXIT_CODE = 1
LOADING_REASON = "LoadingModel"
"""A RUNNING container whose readiness probe does not answer yet."""
TRAFFIC_PORT_NAME = "http"
"""A container port with this name carries the pod's traffic; otherwise the first port does."""


@dataclasses.dataclass(frozen=True, slots=True)
class Placement:
    gpu_type: str
    gpu_count: int
    cloud: Cloud
    data_center_ids: tuple[str, ...]
    max_price_per_hour: float | None
    alternative_gpu_types: tuple[str, ...] = ()
    """The GPU types to try after `gpu_type` when RunPod has no capacity for it, in order."""

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return (self.gpu_type, *self.alternative_gpu_types)


@dataclasses.dataclass(frozen=True, slots=True)
class CreateRequest:
    """A pod turned into what RunPod needs: the create body, and the placement it encodes."""

    body: Mapping[str, Any]
    placement: Placement
    image: str


def pod_name(settings: RunPodSettings, uid: str) -> str:
    return f"{settings.name_prefix}-{uid}"


def create_request(pod: PodRequest, settings: RunPodSettings, node_name: str) -> CreateRequest:
    """The create body for `pod` on the node `node_name`; InvalidPodError for what RunPod cannot run."""
    container = _single_container(pod)
    refuse_volumes_beyond_own_disk(pod.raw.get("spec") or {}, "RunPod")
    placement = placement_for(pod, container, settings)
    env = dict(container.env)
    env.update(
        {
            ENV_POD_UID: pod.ref.uid,
            ENV_POD_NAMESPACE: pod.ref.namespace,
            ENV_POD_NAME: pod.ref.name,
            ENV_NODE_NAME: node_name,
            ENV_CONTAINER_NAME: container.name,
        }
    )
    ports = _http_ports(container)
    readiness = readiness_target(container, ports)
    if readiness is not None:
        env[ENV_READINESS] = readiness.encode()
    body: dict[str, Any] = {
        "name": pod_name(settings, pod.ref.uid),
        "image": container.image,
        "gpu": {"id": placement.gpu_type, "count": placement.gpu_count},
        "cloud": placement.cloud,
        "env": env,
        "ports": [f"{port}/http" for port in ports],
    }
    if container.args:
        body["args"] = shlex.join(container.args)
    if placement.data_center_ids:
        body["dataCenterIds"] = list(placement.data_center_ids)
    if settings.disk_gb is not None:
        body["disk"] = settings.disk_gb
    return CreateRequest(body=body, placement=placement, image=container.image)


def _single_container(pod: PodRequest) -> ContainerSpec:
    if pod.init_containers:
        raise InvalidPodError("RunPod runs one container per pod: init containers are not supported")
    if len(pod.containers) != 1:
        raise InvalidPodError(f"RunPod runs one container per pod, and this pod has {len(pod.containers)}")
    container = pod.containers[0]
    if container.command:
        raise InvalidPodError(
            f"container {container.name!r} sets command: RunPod always runs the image's entrypoint "
            "(only args can be passed); build the command into the image or pass it as args"
        )
    if container.working_dir:
        raise InvalidPodError(f"container {container.name!r} sets workingDir, which RunPod pods cannot")
    return container


def _http_ports(container: ContainerSpec) -> list[int]:
    """The container's ports, the traffic port first; each is exposed through RunPod's HTTPS proxy."""
    ports: list[int] = []
    for port in container.ports:
        if port.protocol.upper() != "TCP":
            raise InvalidPodError(f"port {port.container_port}/{port.protocol}: RunPod pods take TCP only")
        if port.container_port not in ports:
            if port.name == TRAFFIC_PORT_NAME:
                ports.insert(0, port.container_port)
            else:
                ports.append(port.container_port)
    if len(ports) > MAX_HTTP_PORTS:
        raise InvalidPodError(
            f"RunPod exposes at most {MAX_HTTP_PORTS} HTTP ports, and this pod has {len(ports)}"
        )
    return ports


def placement_for(pod: PodRequest, container: ContainerSpec, settings: RunPodSettings) -> Placement:
    """GPU type, count, cloud, data centers and price cap: the pod's annotations over the settings."""
    annotations = pod.annotations
    named = [name.strip() for name in annotations.get(GPU_TYPE_ANNOTATION, "").split(",") if name.strip()]
    gpu_types = list(dict.fromkeys(named)) or ([settings.gpu_type] if settings.gpu_type else [])
    if not gpu_types:
        raise InvalidPodError(
            f"no GPU type: set the provider's gpu_type or annotate the pod with {GPU_TYPE_ANNOTATION}"
        )
    gpu_type, *alternatives = gpu_types
    cloud = annotations.get(CLOUD_ANNOTATION, settings.cloud).upper()
    if cloud not in CLOUDS:
        raise InvalidPodError(f"{CLOUD_ANNOTATION} must be one of {', '.join(CLOUDS)}, not {cloud!r}")
    centers = settings.data_center_ids
    if DATA_CENTERS_ANNOTATION in annotations:
        centers = tuple(
            name.strip() for name in annotations[DATA_CENTERS_ANNOTATION].split(",") if name.strip()
        )
    price = settings.max_price_per_hour
    if MAX_PRICE_ANNOTATION in annotations:
        text = annotations[MAX_PRICE_ANNOTATION]
        try:
            price = float(text)
        except ValueError:
            price = -1.0
        if not price > 0:
            raise InvalidPodError(f"{MAX_PRICE_ANNOTATION} must be a positive number of USD, not {text!r}")
    return Placement(gpu_type, _gpu_count(container, settings), cloud, centers, price, tuple(alternatives))


def request_for_offer(
    pod: PodRequest, offer: GpuOffer, locations: Sequence[str], max_price_per_hour: float | None
) -> PodRequest:
    """`pod` with its placement set to one of RunPod's offers, in the terms `placement_for` reads: the
    annotations for the GPU type, cloud, data centers and price cap, the container's GPU limit for the
    count."""
    annotations = dict(pod.annotations)
    annotations[GPU_TYPE_ANNOTATION] = offer.gpu_type
    if offer.tier in CLOUDS:
        annotations[CLOUD_ANNOTATION] = offer.tier
    if locations:
        annotations[DATA_CENTERS_ANNOTATION] = ",".join(locations)
    if max_price_per_hour is not None:
        annotations[MAX_PRICE_ANNOTATION] = repr(max_price_per_hour)
    containers = pod.containers
    if len(containers) == 1:  # RunPod refuses any other shape, with its own message
        [container] = containers
        limits = {**container.limits, GPU_RESOURCE: str(offer.gpu_count)}
        containers = (dataclasses.replace(container, limits=limits),)
    return dataclasses.replace(pod, annotations=annotations, containers=containers)


def _gpu_count(container: ContainerSpec, settings: RunPodSettings) -> int:
    quantity = container.limits.get(GPU_RESOURCE) or container.requests.get(GPU_RESOURCE)
    if quantity is None:
        return settings.gpu_count
    if not quantity.isdigit() or int(quantity) < 1:
        raise InvalidPodError(
            f"{GPU_RESOURCE} must be a whole number of GPUs >= 1 on RunPod, not {quantity!r}"
        )
    return int(quantity)


# -- RunPod pods to pod states ---------------------------------------------------------------------


def owner_uid(pod: RunPodPod, node_name: str) -> str | None:
    """The pod UID a RunPod pod was created for, if this node created it."""
    if pod.env.get(ENV_NODE_NAME) != node_name:
        return None
    return pod.env.get(ENV_POD_UID) or None


def ref_of(pod: RunPodPod) -> PodRef:
    env = pod.env
    return PodRef(env.get(ENV_POD_NAMESPACE, ""), env.get(ENV_POD_NAME, ""), env.get(ENV_POD_UID, ""))


def is_gone(pod: RunPodPod) -> bool:
    return pod.status == "TERMINATED"


def traffic_port(pod: RunPodPod) -> int | None:
    for port in pod.ports:
        number, _, protocol = port.partition("/")
        if protocol == "http" and number.isdigit():
            return int(number)
    return None


def traffic_address(pod: RunPodPod, template: str) -> str | None:
    port = traffic_port(pod)
    return None if port is None else template.format(pod_id=pod.id, port=port)


def readiness_url(pod: RunPodPod, template: str) -> str | None:
    """Where to check the RUNNING pod's readiness (see `readiness`); None when it has no HTTP probe."""
    target = ReadinessTarget.decode(pod.env.get(ENV_READINESS))
    return None if target is None else template.format(pod_id=pod.id, port=target.port) + target.path


def pod_state(
    ref: PodRef,
    pod: RunPodPod,
    *,
    proxy_url_template: str,
    error_message: str | None,
    ready: bool = True,
) -> PodState:
    """The state to report for `ref`, held by RunPod as `pod` (not TERMINATED); `ready` is the
    readiness check's last answer, for a RUNNING pod."""
    container = pod.env.get(ENV_CONTAINER_NAME, "main")
    base = ContainerState(
        name=container, image=pod.image, state=ContainerStateKind.WAITING, container_id=f"runpod://{pod.id}"
    )
    state = PodState(
        ref=ref,
        phase="Pending",
        started_at=pod.created_at,
        traffic_address=traffic_address(pod, proxy_url_template),
    )
    gpus = f"{pod.gpu_count} x {pod.gpu_type}" if pod.gpu_type else "its GPUs"
    if pod.status == "PROVISIONING":
        waiting = dataclasses.replace(
            base, reason="Provisioning", message=f"RunPod is finding a machine with {gpus}"
        )
        return dataclasses.replace(state, containers=(waiting,))
    if pod.status == "STARTING":
        waiting = dataclasses.replace(
            base,
            reason="ContainerCreating",
            message=f"RunPod is starting the container from {pod.image}",
        )
        return dataclasses.replace(state, containers=(waiting,))
    if pod.status == "RUNNING":
        running = dataclasses.replace(
            base,
            state=ContainerStateKind.RUNNING,
            ready=ready,
            started=True,
            started_at=pod.started_at,
            reason=None if ready else LOADING_REASON,
            message=None if ready else "its readiness probe does not answer yet (loading)",
        )
        return dataclasses.replace(state, phase="Running", containers=(running,))
    if pod.status in ("EXITED", "ERROR"):
        exited = pod.status == "EXITED"
        reason = "Exited" if exited else "RunPodError"
        message = (
            "the container exited (RunPod reports no exit code)"
            if exited
            else error_message or "RunPod reports the container in an unrecoverable error state"
        )
        ended = ContainerTermination(
            exit_code=UNREPORTED_EXIT_CODE,
            reason="Exited" if exited else "Error",
            message=message,
            started_at=pod.started_at,
        )
        terminated = dataclasses.replace(
            base, state=ContainerStateKind.TERMINATED, reason=ended.reason, message=message, termination=ended
        )
        return dataclasses.replace(
            state, phase="Failed", containers=(terminated,), reason=reason, message=message
        )
    waiting = dataclasses.replace(
        base, reason=pod.status.title() or "Unknown", message=f"RunPod status {pod.status!r}"
    )
    return dataclasses.replace(
        state,
        phase="Unknown",
        containers=(waiting,),
        message=f"RunPod reports the unknown status {pod.status!r}",
    )
