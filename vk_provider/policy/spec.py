"""An OffloadPolicy's spec as typed values, read from the raw JSON the apiserver returns.

The CRD (manifests/crds/offloadpolicy.yaml) fills the defaults and refuses most bad input; this module
checks again what the policy relies on, because a policy written before a schema change or restored
past the apiserver must end in a `Ready=False` condition naming the field, never in a crash. The
defaults here are the CRD's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from vk_provider.policy.health import HealthSettings, HealthSettingsError
from vk_provider.policy.names import DEFAULT_GPU_RESOURCE, RESERVED_TAINT_KEY, RESERVED_TAINT_VALUE
from vk_provider.policy.schedule import InvalidSchedule, ScheduledRun, check_cron
from vk_provider.policy.selectors import InvalidSelector, LabelSelector, parse_selector

DEFAULT_MIN_PRIORITY = 100000
GROUP_BY = ("podGroup", "job", "label")
# A resource name as the API accepts it: an optional DNS prefix and a name (nvidia.com/gpu, amd.com/gpu).
_RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class InvalidPolicy(ValueError):
    """The policy cannot be acted on as written; the message says which field and why."""


@dataclasses.dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclasses.dataclass(frozen=True)
class Timing:
    flip_out_after_seconds: int = 30
    flip_back_after_seconds: int = 600
    min_away_seconds: int = 300
    min_home_seconds: int = 300
    max_flips_per_hour: int = 4
    admission_retry_after_seconds: int = 300
    """How long a Kueue Workload waits on our AdmissionCheck for GPUs before it gets `Retry`."""


@dataclasses.dataclass(frozen=True)
class DemandSpec:
    min_priority: int = DEFAULT_MIN_PRIORITY
    group_by: str = "job"
    group_label: str | None = None
    pod_groups: bool = True


@dataclasses.dataclass(frozen=True)
class WarmUpSpec:
    """`spec.warmUp`: warming the away side of the Offloads a flip would choose, before it is due."""

    enabled: bool = True
    hold_seconds: int = 600
    """How long a warm-up lasts after the last sign of demand (warm-until = now + this)."""
    schedule: tuple[ScheduledRun, ...] = ()


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    name: str
    uid: str
    generation: int
    offload_selector: LabelSelector
    namespace_selector: LabelSelector
    pool_selector: LabelSelector
    resource: str = DEFAULT_GPU_RESOURCE
    demand: DemandSpec = DemandSpec()
    reservation: Taint = Taint(RESERVED_TAINT_KEY, RESERVED_TAINT_VALUE, "NoSchedule")
    health: HealthSettings = dataclasses.field(default_factory=HealthSettings)
    timing: Timing = Timing()
    paused: bool = False
    admission_checks: tuple[str, ...] = ()
    """Kueue AdmissionChecks this policy serves (`vk_provider.policy.admission`)."""
    warm_up: WarmUpSpec = WarmUpSpec()


def parse_policy(raw: Mapping[str, Any]) -> PolicySpec:
    """The typed spec of an OffloadPolicy object, or InvalidPolicy naming the first bad field."""
    metadata = raw.get("metadata") or {}
    spec = raw.get("spec")
    if not isinstance(spec, Mapping):
        raise InvalidPolicy("spec is missing")
    try:
        offloads = _object(spec, "offloads", required=True)
        if "selector" not in offloads:
            raise InvalidPolicy("spec.offloads.selector is required (which Offloads this policy may move)")
        pool = _object(spec, "homePool", required=True)
        if "nodeSelector" not in pool:
            raise InvalidPolicy("spec.homePool.nodeSelector is required (which nodes are the home GPU pool)")
        pool_selector = parse_selector(pool["nodeSelector"], "spec.homePool.nodeSelector")
        if pool_selector.empty:
            raise InvalidPolicy("spec.homePool.nodeSelector must not be empty: it would make every node home")
        return PolicySpec(
            name=str(metadata.get("name", "")),
            uid=str(metadata.get("uid", "")),
            generation=int(metadata.get("generation") or 0),
            offload_selector=parse_selector(offloads["selector"], "spec.offloads.selector"),
            namespace_selector=parse_selector(
                offloads.get("namespaceSelector"), "spec.offloads.namespaceSelector"
            ),
            pool_selector=pool_selector,
            resource=_resource(pool.get("resource", DEFAULT_GPU_RESOURCE)),
            demand=_demand(_object(spec, "demand")),
            reservation=_reservation(
                _object(_object(spec, "reservation"), "taint", where="spec.reservation")
            ),
            health=_health(_object(spec, "health"), _resource(pool.get("resource", DEFAULT_GPU_RESOURCE))),
            timing=_timing(_object(spec, "timing")),
            paused=_boolean(spec.get("paused", False), "spec.paused"),
            admission_checks=_names(spec.get("admissionChecks"), "spec.admissionChecks"),
            warm_up=_warm_up(_object(spec, "warmUp")),
        )
    except InvalidSelector as error:
        raise InvalidPolicy(str(error)) from None


def _object(
    parent: Mapping[str, Any], key: str, *, required: bool = False, where: str = "spec"
) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        if required:
            raise InvalidPolicy(f"{where}.{key} is required")
        return {}
    if not isinstance(value, Mapping):
        raise InvalidPolicy(f"{where}.{key} must be an object")
    return value


def _resource(value: Any) -> str:
    if not isinstance(value, str) or not _RESOURCE.match(value) or value.count("/") > 1:
        raise InvalidPolicy(f"spec.homePool.resource {value!r} is not a resource name (like nvidia.com/gpu)")
    return value


def _integer(value: Any, field: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPolicy(f"{field} must be an integer, not {value!r}")
    if value < minimum:
        raise InvalidPolicy(f"{field} must be at least {minimum}, not {value}")
    return value


def _boolean(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidPolicy(f"{field} must be true or false, not {value!r}")
    return value


def _demand(raw: Mapping[str, Any]) -> DemandSpec:
    pods = _object(raw, "pods", where="spec.demand")
    group_by = pods.get("groupBy", "job")
    if group_by not in GROUP_BY:
        raise InvalidPolicy(
            f"spec.demand.pods.groupBy must be one of {', '.join(GROUP_BY)}, not {group_by!r}"
        )
    label = pods.get("groupLabel")
    if group_by == "label" and (not isinstance(label, str) or not label):
        raise InvalidPolicy("spec.demand.pods.groupBy label needs spec.demand.pods.groupLabel (a label key)")
    priority = pods.get("minPriority", DEFAULT_MIN_PRIORITY)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidPolicy(f"spec.demand.pods.minPriority must be an integer, not {priority!r}")
    groups = _object(raw, "podGroups", where="spec.demand")
    return DemandSpec(
        min_priority=priority,
        group_by=group_by,
        group_label=label if isinstance(label, str) and label else None,
        pod_groups=_boolean(groups.get("enabled", True), "spec.demand.podGroups.enabled"),
    )


def _reservation(raw: Mapping[str, Any]) -> Taint:
    key = raw.get("key", RESERVED_TAINT_KEY)
    effect = raw.get("effect", "NoSchedule")
    if not isinstance(key, str) or not key:
        raise InvalidPolicy("spec.reservation.taint.key must be a taint key")
    if effect not in ("NoSchedule", "PreferNoSchedule"):
        # NoExecute would evict the inference pods the migration is still moving traffic off.
        raise InvalidPolicy(
            f"spec.reservation.taint.effect must be NoSchedule or PreferNoSchedule, not {effect!r}"
        )
    return Taint(key, str(raw.get("value", RESERVED_TAINT_VALUE)), effect)


def _health(raw: Mapping[str, Any], resource: str) -> HealthSettings:
    try:
        return HealthSettings.from_spec(raw, resource=resource)
    except HealthSettingsError as error:
        raise InvalidPolicy(str(error)) from None


def _timing(raw: Mapping[str, Any]) -> Timing:
    defaults = Timing()
    values = {
        field.name: _integer(
            raw.get(_camel(field.name), getattr(defaults, field.name)),
            f"spec.timing.{_camel(field.name)}",
            minimum=1 if field.name == "max_flips_per_hour" else 0,
        )
        for field in dataclasses.fields(Timing)
    }
    timing = Timing(**values)
    if timing.flip_back_after_seconds < timing.flip_out_after_seconds:
        raise InvalidPolicy(
            "spec.timing.flipBackAfterSeconds must not be shorter than flipOutAfterSeconds "
            f"({timing.flip_back_after_seconds} < {timing.flip_out_after_seconds}): the policy would flap"
        )
    return timing


def _warm_up(raw: Mapping[str, Any]) -> WarmUpSpec:
    defaults = WarmUpSpec()
    schedule = raw.get("schedule")
    if schedule is None:
        schedule = []
    if not isinstance(schedule, list):
        raise InvalidPolicy(f"spec.warmUp.schedule must be a list of runs, not {schedule!r}")
    return WarmUpSpec(
        enabled=_boolean(raw.get("enabled", defaults.enabled), "spec.warmUp.enabled"),
        hold_seconds=_integer(
            raw.get("holdSeconds", defaults.hold_seconds), "spec.warmUp.holdSeconds", minimum=1
        ),
        schedule=tuple(
            _scheduled_run(item, f"spec.warmUp.schedule[{index}]") for index, item in enumerate(schedule)
        ),
    )


def _scheduled_run(raw: Any, where: str) -> ScheduledRun:
    if not isinstance(raw, Mapping):
        raise InvalidPolicy(f"{where} must be an object with cron and gpus, not {raw!r}")
    cron = raw.get("cron")
    if not isinstance(cron, str):
        raise InvalidPolicy(f'{where}.cron is required: a 5-field cron expression in UTC (like "0 2 * * *")')
    try:
        check_cron(cron)
    except InvalidSchedule as error:
        raise InvalidPolicy(f"{where}.cron {error}") from None
    if "gpus" not in raw:
        raise InvalidPolicy(f"{where}.gpus is required: the home GPUs the scheduled run will need")
    defaults = ScheduledRun(cron="", gpus=0)
    return ScheduledRun(
        cron=cron,
        gpus=_integer(raw["gpus"], f"{where}.gpus", minimum=1),
        lead_seconds=_integer(raw.get("leadSeconds", defaults.lead_seconds), f"{where}.leadSeconds"),
        duration_seconds=_integer(
            raw.get("durationSeconds", defaults.duration_seconds), f"{where}.durationSeconds"
        ),
    )


def _names(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise InvalidPolicy(f"{field} must be a list of AdmissionCheck names, not {value!r}")
    return tuple(dict.fromkeys(value))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)
