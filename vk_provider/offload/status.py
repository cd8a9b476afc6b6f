"""An Offload's status as a typed value: read from the API's JSON, and written back as a merge patch.

The controller is the only writer; the router, the CLI and the controller itself read it. Field names
are the Python spellings of the CRD's status keys (`away_weight` is `awayWeight`), so a typo is a
TypeError at the first test instead of a key nobody reads. Reading checks the types it relies on and
raises InvalidStatus naming the field; the CRD's schema keeps such values out of a real cluster, but
an object restored past the apiserver must still give a clear answer, not a crash.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from vk_provider.kit.timestamps import format_timestamp, parse_timestamp


class Phase(enum.StrEnum):
    IDLE = "Idle"
    PREPARING = "Preparing"
    SHIFTING = "Shifting"
    PAUSED = "Paused"
    FINALIZING = "Finalizing"
    SUCCEEDED = "Succeeded"
    ROLLED_BACK = "RolledBack"
    FAILED = "Failed"


RUNNING_PHASES = frozenset({Phase.PREPARING, Phase.SHIFTING, Phase.PAUSED, Phase.FINALIZING})
"""A migration is under way: its weight may change at any moment."""
TERMINAL_PHASES = frozenset({Phase.SUCCEEDED, Phase.ROLLED_BACK, Phase.FAILED})
"""The last migration has ended, with this outcome."""


class InvalidStatus(ValueError):
    """A status field holds a value of the wrong type; the message names the field."""


@dataclasses.dataclass(frozen=True)
class OffloadStatus:
    """What the controller records about an Offload (every field is optional in the API)."""

    phase: Phase | None = None
    target_placement: str | None = None
    """Where the current (or last) migration goes: home or away."""
    away_weight: int | None = None
    """Percentage of requests routed away."""
    step_index: int | None = None
    last_good_weight: int | None = None
    steps: tuple[int, ...] = ()
    """The current migration's steps, as they were when it started."""
    step_interval_seconds: int | None = None
    """The current migration's step interval, as it was when it started (absent: the spec's, as
    written by a controller that did not record it)."""
    consecutive_failures: int = 0
    home_replicas: int | None = None
    """The home Deployment's replicas before it was scaled to 0, restored on the way home."""
    migration_started_at: datetime | None = None
    progress_at: datetime | None = None
    step_started_at: datetime | None = None
    outcome: str | None = None
    outcome_reason: str | None = None
    last_check: Mapping[str, Any] | None = None
    """The gates' judgement of the last step interval (verdict, side, requests, errorRatePercent, ...)."""
    handled_promotion: str | None = None
    handled_retry: str | None = None
    """The value of the retry annotation the last migration was started for."""
    handled_flip_strategy: str | None = None
    """The value of the flip-strategy annotation last handled: run by a migration, or dropped when
    its flip started none."""
    observed_generation: int | None = None
    message: str | None = None
    conditions: tuple[Mapping[str, Any], ...] = ()
    replicas: int | None = None
    """A spill-over Offload's replicas, home and away (its scale subresource's status)."""
    selector: str | None = None
    """The label selector of both sides' pods of a spill-over Offload, for an autoscaler."""
    spill_over: Mapping[str, Any] | None = None
    """Where a spill-over Offload's replicas run and what the away ones cost (`spillover.SpillStatus`)."""
    warm: Mapping[str, Any] | None = None
    """The away replicas kept warm while home serves: replicas, ready, until, reason
    (`vk_provider.controller.warming`); absent while a migration runs or traffic is away."""

    @property
    def running(self) -> bool:
        return self.phase in RUNNING_PHASES

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None) -> OffloadStatus:
        """The typed status of `.status` (None or {} is the empty status)."""
        if not raw:
            return cls()
        if not isinstance(raw, Mapping):
            raise InvalidStatus("status must be an object")
        values: dict[str, Any] = {}
        for field in _FIELDS:
            value = raw.get(_key(field.name))
            if value is not None:
                values[field.name] = _READERS[field.name](value, f"status.{_key(field.name)}")
        return cls(**values)


def status_patch(**changes: Any) -> dict[str, Any]:
    """A merge patch of `.status` setting these fields (None removes one), in the API's spelling."""
    patch: dict[str, Any] = {}
    for name, value in changes.items():
        if name not in _READERS:
            raise TypeError(f"an Offload's status has no field {name!r}")
        patch[_key(name)] = _to_json(value)
    return patch


def with_patch(raw: Mapping[str, Any], patch: Mapping[str, Any]) -> OffloadStatus:
    """The status as it will read once a merge patch made by `status_patch` is applied."""
    merged = {**raw, **patch}
    return OffloadStatus.from_raw({key: value for key, value in merged.items() if value is not None})


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    kind: str,
    status: str,
    reason: str,
    message: str,
    *,
    now: datetime,
    generation: int,
) -> list[dict[str, Any]]:
    """The conditions with `kind` set, in its place (a new one last); its transition time moves only
    when its status changes. Kept in place, setting a condition to what it was changes nothing, so a
    pass that sets every condition it owns writes nothing when none changed."""
    previous = next((item for item in conditions if item.get("type") == kind), None)
    changed = previous is None or previous.get("status") != status
    condition = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message[:32768],
        "lastTransitionTime": format_timestamp(now) if changed else previous["lastTransitionTime"],  # type: ignore[index]
        "observedGeneration": generation,
    }
    if previous is None:
        return [*(dict(item) for item in conditions), condition]
    return [condition if item.get("type") == kind else dict(item) for item in conditions]


@functools.cache
def _key(name: str) -> str:
    """`away_weight` -> `awayWeight`: the CRD spells every status key in lower camel case."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _to_json(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, tuple):
        return [_to_json(item) for item in value]
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _integer(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidStatus(f"{field} must be an integer, not {value!r}")
    return value


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise InvalidStatus(f"{field} must be a string, not {value!r}")
    return value


def _phase(value: Any, field: str) -> Phase:
    try:
        return Phase(_text(value, field))
    except ValueError:
        raise InvalidStatus(f"{field} {value!r} is not a phase") from None


def _time(value: Any, field: str) -> datetime:
    moment = parse_timestamp(value)
    if moment is None:
        raise InvalidStatus(f"{field} must be an RFC 3339 time, not {value!r}")
    return moment


def _steps(value: Any, field: str) -> tuple[int, ...]:
    if not isinstance(value, list | tuple):
        raise InvalidStatus(f"{field} must be a list, not {value!r}")
    return tuple(_integer(item, field) for item in value)


def _object(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidStatus(f"{field} must be an object, not {value!r}")
    return value


def _conditions(value: Any, field: str) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(value, list | tuple):
        raise InvalidStatus(f"{field} must be a list, not {value!r}")
    return tuple(_object(item, field) for item in value)


_FIELDS = dataclasses.fields(OffloadStatus)
_READERS = {
    "phase": _phase,
    "target_placement": _text,
    "away_weight": _integer,
    "step_index": _integer,
    "last_good_weight": _integer,
    "steps": _steps,
    "step_interval_seconds": _integer,
    "consecutive_failures": _integer,
    "home_replicas": _integer,
    "migration_started_at": _time,
    "progress_at": _time,
    "step_started_at": _time,
    "outcome": _text,
    "outcome_reason": _text,
    "last_check": _object,
    "handled_promotion": _text,
    "handled_retry": _text,
    "handled_flip_strategy": _text,
    "observed_generation": _integer,
    "message": _text,
    "conditions": _conditions,
    "replicas": _integer,
    "selector": _text,
    "spill_over": _object,
    "warm": _object,
}
