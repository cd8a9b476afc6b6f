"""The demo's training gang as the API records it: its PodGroup's state and when its pods were bound.

kube-scheduler binds the pods of a PodGroup (`spec.schedulingPolicy.gang.minCount`) all together or not
at all. The PodGroup's condition PodGroupInitiallyScheduled says which: False (Unschedulable) while the
gang waits for room, True once it is placed. Each pod's PodScheduled condition says when that pod was
bound. The API writes both in whole seconds (metav1.Time), so binding times here are whole seconds: a
gang placed at once shows a spread of 0 or 1 s, where a Job that is no gang shows the seconds between
the pods that started on the GPUs already free and the ones that waited for the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.policy.podgroups import INITIALLY_SCHEDULED, UNSCHEDULABLE


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return dict(condition)
    return {}


def waiting(group: Mapping[str, Any]) -> str | None:
    """The scheduler's message while the PodGroup's gang cannot be placed whole; None otherwise."""
    condition = _condition(group, INITIALLY_SCHEDULED)
    if condition.get("status") == "False" and condition.get("reason") == UNSCHEDULABLE:
        return str(condition.get("message") or UNSCHEDULABLE)
    return None


def admitted(group: Mapping[str, Any]) -> bool:
    """Whether the scheduler has placed the PodGroup's gang (it never goes back)."""
    return _condition(group, INITIALLY_SCHEDULED).get("status") == "True"


def bound_at(pod: Mapping[str, Any]) -> datetime | None:
    """When the pod was bound to its node (PodScheduled turned True); None while it is not."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return None
    condition = _condition(pod, "PodScheduled")
    return parse_timestamp(condition.get("lastTransitionTime")) if condition.get("status") == "True" else None


@dataclasses.dataclass(frozen=True, slots=True)
class Bindings:
    """The binding times of a gang's bound pods, in whole seconds after a moment (the Job's creation)."""

    seconds: tuple[int, ...]
    """Sorted."""

    def describe(self) -> str:
        if not self.seconds:
            return "no pod bound"
        first, last = self.seconds[0], self.seconds[-1]
        when = f"{first} s" if first == last else f"{first}-{last} s"
        return (
            f"{len(self.seconds)} pods bound {when} after the Job's creation "
            f"(spread {last - first} s; PodScheduled times, whole seconds)"
        )


def bindings(pods: Iterable[Mapping[str, Any]], since: datetime) -> Bindings:
    """When each bound pod of `pods` was bound, in seconds after `since` (both as the API wrote them)."""
    moments = [moment for moment in map(bound_at, pods) if moment is not None]
    return Bindings(tuple(sorted(int((moment - since).total_seconds()) for moment in moments)))
