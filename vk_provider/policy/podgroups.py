"""Training demand from the native gang scheduler: `scheduling.k8s.io/v1beta1` PodGroups that cannot fit.

Since 1.37 kube-scheduler schedules a PodGroup (`spec.schedulingPolicy.gang.minCount`) all or nothing:
its pods (`spec.schedulingGroup.podGroupName`) wait until `minCount` of them fit at once. When they do
not, the scheduler sets the PodGroup's condition `PodGroupInitiallyScheduled=False`, reason
`Unschedulable`; once the gang is placed it turns True, for good (it never goes back to False, even if
pods are later lost). So an Unschedulable PodGroup is a whole gang waiting for GPUs, and the GPUs its
unplaced pods request are what must be freed, not some of them.

The API is beta and off by default in 1.37 (the `GenericWorkload` feature gate and
`--runtime-config=scheduling.k8s.io/v1beta1=true` on the apiserver, the gate on the scheduler too); a
cluster without it has no PodGroups, which is no demand and no error, only a reason to report.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from fractions import Fraction
from typing import Any

from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity
from vk_provider.kit.timestamps import parse_timestamp

API_VERSION = "scheduling.k8s.io/v1beta1"
PLURAL = "podgroups"
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
UNSCHEDULABLE = "Unschedulable"
NOT_SERVED = (
    f"{API_VERSION} PodGroups are not served by this cluster (the apiserver needs the GenericWorkload "
    f"feature gate and --runtime-config={API_VERSION}=true, the scheduler the gate)"
)


@dataclasses.dataclass(frozen=True, slots=True)
class PodGroupDemand:
    """A gang the scheduler could not place, and the GPUs its unplaced pods request."""

    namespace: str
    name: str
    min_count: int
    gpus: int
    """GPUs (of the pool's resource) requested by its pods that are not on a node."""
    since: datetime | None
    """When the scheduler found it unschedulable (the condition's lastTransitionTime)."""
    pods: int = 0
    """Its pods that exist (not finished, not being deleted)."""
    unplaced: int = 0
    """Of those, the ones on no node."""
    message: str = ""
    """The scheduler's message ("minCount (6) cannot be satisfied: ...")."""

    @property
    def missing_gpus(self) -> int:
        """GPUs the members it still lacks (minCount less the pods that exist) will request, counted
        at what its unplaced pods request each: demand foreseen before those pods are created."""
        if self.unplaced <= 0 or self.pods >= self.min_count:
            return 0
        return (self.min_count - self.pods) * (self.gpus // self.unplaced)


class PodGroupDemands(list[PodGroupDemand]):
    """The unschedulable PodGroups (a list), and why there are none to read when the API is missing."""

    def __init__(self, demands: Iterable[PodGroupDemand] = (), *, unavailable: str | None = None) -> None:
        super().__init__(demands)
        self.unavailable = unavailable
        """None when PodGroups could be read; else why not (not served, forbidden)."""


async def unschedulable_pod_groups(
    api: KubeApi, resource: str, *, namespace: str | None = None
) -> PodGroupDemands:
    """Every PodGroup (of `namespace`, or all) whose gang the scheduler could not place, with the
    `resource` its unplaced pods request, sorted by namespace and name. A cluster that does not serve
    PodGroups, or forbids listing them, gives no demands and the reason; other API errors raise."""
    try:
        listing = await api.get(resource_path(API_VERSION, PLURAL, namespace=namespace))
    except KubeApiError as error:
        if error.not_found:
            return PodGroupDemands(unavailable=NOT_SERVED)
        if error.status == 403:
            return PodGroupDemands(unavailable=f"cannot list {API_VERSION} PodGroups: {error.message}")
        raise
    waiting = [group for group in listing.get("items") or () if _unschedulable(group) is not None]
    pods_by_namespace: dict[str, list[RawObject]] = {}
    for space in sorted({str(group["metadata"].get("namespace", "")) for group in waiting}):
        pods = await api.get(resource_path("v1", "pods", namespace=space))
        pods_by_namespace[space] = list(pods.get("items") or ())
    demands = [
        _demand(group, pods_by_namespace.get(str(group["metadata"].get("namespace", "")), []), resource)
        for group in waiting
    ]
    return PodGroupDemands(sorted(demands, key=lambda demand: (demand.namespace, demand.name)))


def _unschedulable(group: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in (group.get("status") or {}).get("conditions") or ():
        if (
            condition.get("type") == INITIALLY_SCHEDULED
            and condition.get("status") == "False"
            and condition.get("reason") == UNSCHEDULABLE
        ):
            return dict(condition)
    return None


def _demand(group: RawObject, pods: Iterable[RawObject], resource: str) -> PodGroupDemand:
    metadata = group.get("metadata") or {}
    name = str(metadata.get("name", ""))
    gang = ((group.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}
    members = [pod for pod in pods if _member_of(pod, name) and _alive(pod)]
    unplaced = [pod for pod in members if not (pod.get("spec") or {}).get("nodeName")]
    condition = _unschedulable(group) or {}
    return PodGroupDemand(
        namespace=str(metadata.get("namespace", "")),
        name=name,
        min_count=int(gang.get("minCount") or 0),
        gpus=sum(pod_gpu_request(pod, resource) for pod in unplaced),
        since=parse_timestamp(condition.get("lastTransitionTime")),
        pods=len(members),
        unplaced=len(unplaced),
        message=str(condition.get("message", "")),
    )


def _member_of(pod: Mapping[str, Any], group_name: str) -> bool:
    scheduling_group = (pod.get("spec") or {}).get("schedulingGroup") or {}
    return bool(scheduling_group.get("podGroupName") == group_name)


def _alive(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not (pod.get("metadata") or {}).get("deletionTimestamp")


def pod_gpu_request(pod: Mapping[str, Any], resource: str) -> int:
    """How much of `resource` the pod requests, as the scheduler counts it: its containers added up, or
    its largest init container (with the sidecars started before it) if that is more, plus overhead.
    A limit without a request requests the limit. Extended resources are whole, so rounded up."""
    spec = pod.get("spec") or {}
    total = sum(
        (_container_request(container, resource) for container in spec.get("containers") or ()), Fraction(0)
    )
    sidecars = Fraction(0)
    init_peak = Fraction(0)
    for container in spec.get("initContainers") or ():
        request = _container_request(container, resource)
        if container.get("restartPolicy") == "Always":  # a sidecar runs alongside the containers
            total += request
            sidecars += request
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + request)
    total = max(total, init_peak) + _quantity((spec.get("overhead") or {}).get(resource))
    return math.ceil(total)


def _container_request(container: Mapping[str, Any], resource: str) -> Fraction:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    value = requests.get(resource, (resources.get("limits") or {}).get(resource))
    return _quantity(value)


def _quantity(value: Any) -> Fraction:
    if value is None:
        return Fraction(0)
    try:
        return parse_quantity(str(value).strip())
    except InvalidQuantityError:
        return Fraction(0)  # the API validated it; nothing sensible to count
