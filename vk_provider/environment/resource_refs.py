"""`valueFrom.resourceFieldRef`: a container's requests and limits as variables (the downward API).

Resources: `requests.` or `limits.` followed by `cpu`, `memory`, `ephemeral-storage` or
`hugepages-<size>`. The value is the quantity divided by `divisor` (absent or zero means 1) and
rounded up, as the kubelet rounds: CPU in whole thousandths first (250m / 1 -> "1", 250m / 1m ->
"250"), everything else in whole units first. The arithmetic is exact, where the kubelet goes
through floating point and can be off by one for values near 2**53.

A missing or zero limit of cpu, memory or ephemeral-storage means "as much as there is", so it is
reported as the pod-level limit when the pod sets one (cpu and memory only) and as the node's
allocatable otherwise; hugepages are never overcommitted and have no such fallback. The kubelet
applies this fallback to the app containers of the pod but not to init containers reached through
`containerName`, an accident this module does not copy: every container gets the same fallback.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from vk_provider.environment.model import SelectorError
from vk_provider.kit.quantity import parse_quantity

_BUCKETS = frozenset({"requests", "limits"})
_PLAIN_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_HUGEPAGES_PREFIX = "hugepages-"
_UNLIMITED_MEANS_AVAILABLE = ("cpu", "memory", "ephemeral-storage")
_POD_LEVEL_RESOURCES = ("cpu", "memory")


def resource_field_value(
    selector: Mapping[str, Any],
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    node_allocatable: Mapping[str, str],
) -> str:
    """The value a `resourceFieldRef` selector points at, for `container` or its `containerName`."""
    resource = str(selector.get("resource") or "")
    bucket, _, name = resource.partition(".")
    if bucket not in _BUCKETS or not (name in _PLAIN_RESOURCES or name.startswith(_HUGEPAGES_PREFIX)):
        raise SelectorError(f'unsupported container resource "{resource}"')
    target = _target_container(pod, container, str(selector.get("containerName") or ""))
    amount = _declared_amount(target, bucket, name)
    if bucket == "limits" and amount == 0 and name in _UNLIMITED_MEANS_AVAILABLE:
        amount = _available_amount(pod, node_allocatable, name)
    divisor = _divisor(selector.get("divisor"))
    if name == "cpu":
        return str(math.ceil(Fraction(_ceil_thousandths(amount), _ceil_thousandths(divisor))))
    return str(math.ceil(Fraction(math.ceil(amount), math.ceil(divisor))))


def _target_container(
    pod: Mapping[str, Any], container: Mapping[str, Any], container_name: str
) -> Mapping[str, Any]:
    if not container_name:
        return container
    spec = pod.get("spec") or {}
    # App containers first, then init containers, the kubelet's search order.
    candidates: list[Mapping[str, Any]] = [
        *(spec.get("containers") or ()),
        *(spec.get("initContainers") or ()),
    ]
    for candidate in candidates:
        if candidate.get("name") == container_name:
            return candidate
    raise SelectorError(f'resourceFieldRef names container "{container_name}", which the pod does not have')


def _declared_amount(container: Mapping[str, Any], bucket: str, name: str) -> Fraction:
    declared = ((container.get("resources") or {}).get(bucket) or {}).get(name)
    return Fraction(0) if declared is None else _quantity(declared)


def _available_amount(pod: Mapping[str, Any], node_allocatable: Mapping[str, str], name: str) -> Fraction:
    """What an unlimited container may use: the pod's limit if it sets one, else the node's allocatable."""
    if name not in node_allocatable:
        return Fraction(0)
    if name in _POD_LEVEL_RESOURCES:
        pod_limits = ((pod.get("spec") or {}).get("resources") or {}).get("limits") or {}
        pod_limit = _quantity(pod_limits[name]) if name in pod_limits else Fraction(0)
        if pod_limit != 0:
            return pod_limit
    return _quantity(node_allocatable[name])


def _divisor(declared: Any) -> Fraction:
    divisor = Fraction(0) if declared is None else _quantity(declared)
    if divisor < 0:
        raise SelectorError(f'divisor "{declared}" is negative')
    return divisor or Fraction(1)


def _ceil_thousandths(amount: Fraction) -> int:
    return math.ceil(amount * 1000)


def _quantity(value: Any) -> Fraction:
    # The API always sends quantities as strings; a bare number (hand-written JSON) is read the same way.
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise SelectorError(f"{value!r} is not a quantity")
    return parse_quantity(value)
