"""What a pod asks of the pool: its GPUs, whether it is placed, and which gang it belongs to."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from vk_provider.kit.kube import RawObject
from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity

ZERO = Fraction(0)
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""Set by the Job controller on each pod of a Job."""


def quantity(value: Any) -> Fraction:
    """A resource quantity, 0 for anything that is not one (the apiserver validated it already)."""
    return _parsed(str(value))


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> Fraction:
    # A pass reads every pod's GPUs, and a cluster spells them in a handful of ways ("1", "8"):
    # parsing each once, not 10,000 times a pass, is most of what a pass costs.
    try:
        return parse_quantity(text)
    except InvalidQuantityError:
        return Fraction(0)


def whole(value: Fraction) -> int:
    """GPUs are counted whole: a fraction of one is not a GPU the pool can hand out."""
    return int(value)


def _requested(container: Mapping[str, Any], resource: str) -> Fraction:
    resources = container.get("resources") or {}
    # An extended resource's request equals its limit; a limit alone defaults the request to it.
    value = (resources.get("requests") or {}).get(resource, (resources.get("limits") or {}).get(resource))
    return ZERO if value is None else quantity(value)


def template_gpus(pod_spec: Mapping[str, Any], resource: str) -> int:
    """The GPUs a pod with this spec requests (the scheduler's rule: the larger of the containers'
    sum and any one init container)."""
    requested = [_requested(c, resource) for c in pod_spec.get("containers") or ()]
    inits = [_requested(c, resource) for c in pod_spec.get("initContainers") or ()]
    if not any(requested) and not any(inits):
        return 0  # most pods: no GPU, no arithmetic
    total = requested[0] if len(requested) == 1 else sum(requested, ZERO)
    return whole(max([total, *inits]))


def pod_gpus(pod: RawObject, resource: str) -> int:
    return template_gpus(pod.get("spec") or {}, resource)


def finished(pod: RawObject) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def unschedulable(pod: RawObject) -> bool:
    """The scheduler tried and could not place it (PodScheduled=False, reason Unschedulable)."""
    if (pod.get("spec") or {}).get("nodeName"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in conditions
    )


def priority(pod: RawObject) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def pod_group_name(pod: RawObject) -> str | None:
    """The native PodGroup the pod belongs to (spec.schedulingGroup.podGroupName, v1.36+)."""
    group = (pod.get("spec") or {}).get("schedulingGroup") or {}
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return name if isinstance(name, str) and name else None


def gang_name(pod: RawObject, group_by: str, group_label: str | None) -> str:
    """The gang a training pod counts in; a pod that names none is a gang of its own."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    name: str | None = None
    if group_by == "podGroup":
        name = pod_group_name(pod) or labels.get(JOB_NAME_LABEL)
    elif group_by == "job":
        name = labels.get(JOB_NAME_LABEL)
    elif group_label:
        name = labels.get(group_label)
    return name or f"pod/{metadata.get('name', '')}"
