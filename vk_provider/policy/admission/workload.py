"""A Kueue Workload as plain values: where our checks stand, and how many GPUs its pod sets need.

A Workload's GPU demand is, over its pod sets, `count` x what one pod of the set's template requests
(as the scheduler counts it: `policy.podgroups.pod_gpu_request`). Kueue's webhook validates pod sets,
but a Workload written past it (or by a newer Kueue) may not parse: that is reported as the
Workload's `problem`, in words, and never raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from fractions import Fraction
from typing import Any

from vk_provider.kit.kube import RawObject
from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.policy.podgroups import pod_gpu_request


@dataclasses.dataclass(frozen=True)
class CheckState:
    """One entry of status.admissionChecks."""

    name: str
    state: str
    message: str = ""
    since: datetime | None = None
    """Its lastTransitionTime: since when it has been in `state` (survives our restarts)."""


@dataclasses.dataclass(frozen=True)
class WorkloadView:
    namespace: str
    name: str
    uid: str
    gpus: int
    """GPUs all its pods need (0 when `problem` is set)."""
    pod_sets: tuple[str, ...]
    quota_reserved: bool
    admitted: bool
    finished: bool
    checks: Mapping[str, CheckState]
    problem: str | None = None
    """Why its pod sets cannot be read (then it is no demand, and its checks are rejected)."""
    created: datetime | None = None
    job: str | None = None
    """The batch Job that owns it, if one does (its pods carry the Job's name as a label)."""
    queue: str | None = None
    """`spec.queueName`: the LocalQueue (of its namespace) it is queued in."""
    active: bool = True
    """`spec.active`: false once deactivated (it will not be admitted)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def state_of(self, check: str) -> str | None:
        entry = self.checks.get(check)
        return entry.state if entry is not None else None


def _condition_true(status: Mapping[str, Any], kind: str) -> bool:
    return any(
        isinstance(condition, Mapping) and condition.get("type") == kind and condition.get("status") == "True"
        for condition in status.get("conditions") or ()
    )


def _checks(status: Mapping[str, Any]) -> dict[str, CheckState]:
    checks: dict[str, CheckState] = {}
    for entry in status.get("admissionChecks") or ():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        checks[entry["name"]] = CheckState(
            name=entry["name"],
            state=str(entry.get("state", "")),
            message=str(entry.get("message", "")),
            since=parse_timestamp(entry.get("lastTransitionTime")),
        )
    return checks


class MalformedPodSet(ValueError):
    """A pod set that cannot be counted; the message names it and the field."""


def _strict_quantities(pod_spec: Mapping[str, Any], resource: str, where: str) -> None:
    """Refuse what `pod_gpu_request` would quietly count as 0 or round: an unreadable or fractional
    request of the resource (extended resources are whole)."""
    for group in ("initContainers", "containers"):
        for container in pod_spec.get(group) or ():
            if not isinstance(container, Mapping):
                raise MalformedPodSet(f"{where}: {group} holds {container!r}, not a container")
            resources = container.get("resources") or {}
            for kind in ("requests", "limits"):
                value = (resources.get(kind) or {}).get(resource)
                if value is None:
                    continue
                name = container.get("name", "?")
                try:
                    amount = parse_quantity(str(value).strip())
                except InvalidQuantityError:
                    raise MalformedPodSet(
                        f"{where}: container {name} {kind} {resource} {value!r}, not a quantity"
                    ) from None
                if amount < 0 or amount != Fraction(int(amount)):
                    raise MalformedPodSet(
                        f"{where}: container {name} {kind} {resource} {value!r}, not a whole number"
                    )


def pod_set_gpus(pod_set: Any, index: int, resource: str) -> tuple[str, int]:
    """The name of one pod set and the GPUs all its pods need, or MalformedPodSet."""
    if not isinstance(pod_set, Mapping):
        raise MalformedPodSet(f"spec.podSets[{index}] is {pod_set!r}, not an object")
    name = pod_set.get("name")
    where = f"pod set {name!r}" if isinstance(name, str) and name else f"spec.podSets[{index}]"
    if not isinstance(name, str) or not name:
        raise MalformedPodSet(f"{where} has no name")
    count = pod_set.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise MalformedPodSet(f"{where}: count {count!r} is not a whole number of pods")
    template = pod_set.get("template")
    spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(spec, Mapping):
        raise MalformedPodSet(f"{where} has no pod template (template.spec)")
    _strict_quantities(spec, resource, where)
    return name, count * pod_gpu_request({"spec": spec}, resource)


def read_workload(raw: RawObject, resource: str) -> WorkloadView:
    metadata = raw.get("metadata") or {}
    status = raw.get("status") or {}
    spec = raw.get("spec") or {}
    names: list[str] = []
    gpus = 0
    problem: str | None = None
    pod_sets = spec.get("podSets") if isinstance(spec, Mapping) else None
    try:
        if not isinstance(pod_sets, list) or not pod_sets:
            raise MalformedPodSet("spec.podSets is missing or empty")
        for index, pod_set in enumerate(pod_sets):
            name, count = pod_set_gpus(pod_set, index, resource)
            names.append(name)
            gpus += count
    except MalformedPodSet as error:
        problem, gpus = str(error), 0
    return WorkloadView(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
        gpus=gpus,
        pod_sets=tuple(names),
        quota_reserved=_condition_true(status, "QuotaReserved"),
        admitted=_condition_true(status, "Admitted"),
        finished=_condition_true(status, "Finished"),
        checks=_checks(status),
        problem=problem,
        created=parse_timestamp(metadata.get("creationTimestamp")),
        queue=str(spec["queueName"]) if isinstance(spec, Mapping) and spec.get("queueName") else None,
        active=not (isinstance(spec, Mapping) and spec.get("active") is False),
        job=next(
            (
                str(owner.get("name"))
                for owner in metadata.get("ownerReferences") or ()
                if isinstance(owner, Mapping) and owner.get("kind") == "Job"
            ),
            None,
        ),
    )
