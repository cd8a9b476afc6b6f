"""Whether a home GPU node is healthy enough to take work: a pure judgement, and the memory it needs.

A node is unhealthy, with the first of these reasons that applies (`detail` lists every one):
- `Xid`: a GPU raised an Xid outside the ignored (application) ones within the lookback window;
- `RowRemapFailure`: a GPU could not remap a failing memory row;
- `DevicePluginUnhealthy`: allocatable of the pool's resource below capacity (the NVIDIA device plugin
  takes a GPU it finds broken out of allocatable, leaving capacity as is);
- `Temperature`: a GPU hotter than the maximum (strictly above it);
- `ExternalTaint`: a taint whose key starts with one of the configured prefixes (NVSentinel's
  `nvidia.com/gpu-xid-error`, ...), not one the policy itself put on;
- `ExternalCondition`: a configured node condition type (`GpuThermalWatch`, `GPUXIDErrors`, ...) True.

`HealthMemory` adds the time: when an Xid appeared (the exporter's Xid field keeps the last value for
good, so "within the lookback" counts from its appearance), and since when a node has been healthy, so
that a node counts again only after `healthyForSeconds`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity
from vk_provider.policy.dcgm import ExporterSettings, GpuSample
from vk_provider.policy.names import DEFAULT_GPU_RESOURCE, POLICY_TAINTS_ANNOTATION, UNHEALTHY_TAINT_KEY

XID = "Xid"
ROW_REMAP_FAILURE = "RowRemapFailure"
DEVICE_PLUGIN_UNHEALTHY = "DevicePluginUnhealthy"
TEMPERATURE = "Temperature"
EXTERNAL_TAINT = "ExternalTaint"
EXTERNAL_CONDITION = "ExternalCondition"
REASONS = (XID, ROW_REMAP_FAILURE, DEVICE_PLUGIN_UNHEALTHY, TEMPERATURE, EXTERNAL_TAINT, EXTERNAL_CONDITION)
"""Every reason, in the order `judge_node` picks the one it reports."""

DEFAULT_IGNORED_XIDS = frozenset({13, 31, 43, 45, 68, 109})
"""Application errors (the NVIDIA device plugin's list): the program's fault, not the GPU's."""
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
WHERE = "spec.health"


class HealthSettingsError(ValueError):
    """A field of spec.health that cannot be used; the message names it."""


@dataclasses.dataclass(frozen=True, slots=True)
class HealthSettings:
    """spec.health of an OffloadPolicy, with the contract's defaults (`from_spec` parses it)."""

    resource: str = DEFAULT_GPU_RESOURCE
    """The pool's GPU resource (spec.homePool.resource), whose allocatable is compared to capacity."""
    exporter: ExporterSettings | None = None
    max_temperature_celsius: float = 78.0
    xid_lookback_seconds: float = 3600.0
    ignored_xids: frozenset[int] = DEFAULT_IGNORED_XIDS
    row_remap_failure: bool = True
    allocatable_below_capacity: bool = True
    external_taint_prefixes: tuple[str, ...] = ()
    external_conditions: tuple[str, ...] = ()
    healthy_for_seconds: float = 120.0
    taint_key: str = UNHEALTHY_TAINT_KEY
    taint_effect: str = "NoSchedule"

    @classmethod
    def from_spec(
        cls, spec_health: Mapping[str, Any] | None, *, resource: str = DEFAULT_GPU_RESOURCE
    ) -> HealthSettings:
        """Parse spec.health (None or {} = every default). Raises HealthSettingsError naming the field."""
        spec = {} if spec_health is None else spec_health
        if not isinstance(spec, Mapping):
            raise HealthSettingsError(f"{WHERE} must be a mapping, not {spec!r}")
        known = {
            "dcgmExporter", "maxTemperatureCelsius", "xidLookbackSeconds", "ignoredXids", "rowRemapFailure",
            "allocatableBelowCapacity", "externalTaintPrefixes", "externalConditions", "healthyForSeconds",
            "taint",
        }  # fmt: skip
        unknown = sorted(set(spec) - known)
        if unknown:
            raise HealthSettingsError(f"{WHERE} has unknown fields {unknown} (known: {sorted(known)})")
        exporter = None
        if spec.get("dcgmExporter") is not None:
            try:
                exporter = ExporterSettings.from_spec(spec["dcgmExporter"], where=f"{WHERE}.dcgmExporter")
            except ValueError as error:
                raise HealthSettingsError(str(error)) from None
        defaults = cls()
        taint_key, taint_effect = _taint(spec.get("taint"))
        return cls(
            resource=resource,
            exporter=exporter,
            max_temperature_celsius=_number(spec, "maxTemperatureCelsius", defaults.max_temperature_celsius),
            xid_lookback_seconds=_number(spec, "xidLookbackSeconds", defaults.xid_lookback_seconds),
            ignored_xids=_xids(spec.get("ignoredXids", sorted(defaults.ignored_xids))),
            row_remap_failure=_flag(spec, "rowRemapFailure", defaults.row_remap_failure),
            allocatable_below_capacity=_flag(
                spec, "allocatableBelowCapacity", defaults.allocatable_below_capacity
            ),
            external_taint_prefixes=_strings(spec, "externalTaintPrefixes"),
            external_conditions=_strings(spec, "externalConditions"),
            healthy_for_seconds=_number(spec, "healthyForSeconds", defaults.healthy_for_seconds),
            taint_key=taint_key,
            taint_effect=taint_effect,
        )


def _number(spec: Mapping[str, Any], key: str, default: float) -> float:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise HealthSettingsError(f"{WHERE}.{key} must be a number >= 0, not {value!r}")
    return float(value)


def _flag(spec: Mapping[str, Any], key: str, default: bool) -> bool:
    value = spec.get(key, default)
    if not isinstance(value, bool):
        raise HealthSettingsError(f"{WHERE}.{key} must be true or false, not {value!r}")
    return value


def _strings(spec: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = spec.get(key, [])
    if (
        isinstance(value, str)
        or not isinstance(value, list)
        or not all(isinstance(item, str) and item for item in value)
    ):
        raise HealthSettingsError(f"{WHERE}.{key} must be a list of non-empty strings, not {value!r}")
    return tuple(value)


def _xids(value: Any) -> frozenset[int]:
    if not isinstance(value, list) or not all(
        isinstance(item, int) and not isinstance(item, bool) and item > 0 for item in value
    ):
        raise HealthSettingsError(f"{WHERE}.ignoredXids must be a list of Xid numbers (> 0), not {value!r}")
    return frozenset(value)


def _taint(value: Any) -> tuple[str, str]:
    if value is None:
        return UNHEALTHY_TAINT_KEY, "NoSchedule"
    if not isinstance(value, Mapping) or set(value) - {"key", "effect"}:
        raise HealthSettingsError(
            f"{WHERE}.taint must be {{key, effect}} (its value is the reason), not {value!r}"
        )
    key = value.get("key", UNHEALTHY_TAINT_KEY)
    effect = value.get("effect", "NoSchedule")
    if not isinstance(key, str) or not key:
        raise HealthSettingsError(f"{WHERE}.taint.key must be a taint key, not {key!r}")
    if effect not in TAINT_EFFECTS:
        raise HealthSettingsError(
            f"{WHERE}.taint.effect must be one of {list(TAINT_EFFECTS)}, not {effect!r}"
        )
    return key, effect


@dataclasses.dataclass(frozen=True, slots=True)
class NodeHealth:
    healthy: bool
    reason: str | None = None
    """One of REASONS when unhealthy (the first that applies), None when healthy."""
    detail: str = ""
    """Every problem found, for a person ("GPU 2 at 85 °C > 78 °C; ..."), or what was looked at."""


def judge_node(
    now: datetime,
    node: Mapping[str, Any],
    samples: Sequence[GpuSample] | None,
    xid_seen: Mapping[int, datetime],
    settings: HealthSettings,
) -> NodeHealth:
    """The node's health from its Node object, its exporter's samples (None: no exporter data, then only
    the node's own signals count) and when each Xid appeared (`HealthMemory.xid_seen`). Pure."""
    problems = _sample_problems(now, samples or (), xid_seen, settings) + _node_problems(node, settings)
    if not problems:
        return NodeHealth(
            True, None, "no exporter data; node signals healthy" if samples is None else "healthy"
        )
    problems.sort(key=lambda problem: REASONS.index(problem[0]))
    return NodeHealth(False, problems[0][0], "; ".join(detail for _, detail in problems))


def _sample_problems(
    now: datetime, samples: Sequence[GpuSample], xid_seen: Mapping[int, datetime], settings: HealthSettings
) -> list[tuple[str, str]]:
    """The GPUs' problems, and the Xids of the lookback that no GPU reports any more."""
    problems = []
    lookback = timedelta(seconds=settings.xid_lookback_seconds)
    recent = {
        xid for xid, seen in xid_seen.items() if xid not in settings.ignored_xids and now - seen <= lookback
    }
    for sample in samples:
        xid = sample.xid
        # An Xid the memory has not seen yet is new, so within the lookback.
        if xid and xid not in settings.ignored_xids and (xid in recent or xid not in xid_seen):
            problems.append((XID, f"GPU {sample.gpu} raised Xid {xid}"))
        if settings.row_remap_failure and sample.row_remap_failure:
            problems.append((ROW_REMAP_FAILURE, f"GPU {sample.gpu} has a row-remap failure"))
        temperature = sample.temperature_celsius
        if temperature is not None and temperature > settings.max_temperature_celsius:
            problems.append(
                (
                    TEMPERATURE,
                    f"GPU {sample.gpu} at {temperature:g} °C > {settings.max_temperature_celsius:g} °C",
                )
            )
    reported = {sample.xid for sample in samples}
    problems += [
        (XID, f"Xid {xid} seen {int((now - xid_seen[xid]).total_seconds())} s ago")
        for xid in sorted(recent - reported)
    ]
    return problems


def _node_problems(node: Mapping[str, Any], settings: HealthSettings) -> list[tuple[str, str]]:
    problems = []
    status = node.get("status") or {}
    if settings.allocatable_below_capacity:
        below = _allocatable_below_capacity(status, settings.resource)
        if below is not None:
            problems.append((DEVICE_PLUGIN_UNHEALTHY, below))
    if settings.external_taint_prefixes:
        ours = _policy_taints(node) | {settings.taint_key}
        for taint in (node.get("spec") or {}).get("taints") or ():
            key = str(taint.get("key", ""))
            if key not in ours and key.startswith(settings.external_taint_prefixes):
                value = f"={taint['value']}" if taint.get("value") else ""
                problems.append((EXTERNAL_TAINT, f"taint {key}{value}:{taint.get('effect', '')}"))
    for condition in status.get("conditions") or ():
        kind = condition.get("type")
        if kind in settings.external_conditions and condition.get("status") == "True":
            because = condition.get("reason") or condition.get("message") or "True"
            problems.append((EXTERNAL_CONDITION, f"condition {kind} is True ({because})"))
    return problems


def _allocatable_below_capacity(status: Mapping[str, Any], resource: str) -> str | None:
    capacity = (status.get("capacity") or {}).get(resource)
    if capacity is None:
        return None  # no GPUs of this kind: the pool's problem, not this node's health
    allocatable = (status.get("allocatable") or {}).get(resource, "0")
    try:
        below = parse_quantity(str(allocatable)) < parse_quantity(str(capacity))
    except InvalidQuantityError:
        return None  # the apiserver validates quantities; nothing to judge by
    return f"{resource} allocatable {allocatable} < capacity {capacity}" if below else None


def _policy_taints(node: Mapping[str, Any]) -> set[str]:
    annotation = ((node.get("metadata") or {}).get("annotations") or {}).get(POLICY_TAINTS_ANNOTATION)
    try:
        keys = json.loads(annotation) if annotation else []
    except ValueError:
        return set()
    return {key for key in keys if isinstance(key, str)} if isinstance(keys, list) else set()


@dataclasses.dataclass(frozen=True, slots=True)
class NodeHealthState:
    """A node's health with its history: whether it counts as healthy capacity."""

    healthy: bool
    counts: bool
    """Healthy, and for at least healthyForSeconds (or healthy since it was first seen)."""
    since: datetime
    """When the node last turned healthy or unhealthy (or was first seen)."""
    reason: str | None
    detail: str
    changed: bool
    """True when this observation turned it healthy or unhealthy (the moment for an Event)."""


@dataclasses.dataclass(slots=True)
class _Remembered:
    healthy: bool
    since: datetime
    counted: bool


class HealthMemory:
    """Per node: when each Xid appeared and since when the node has been healthy or unhealthy.

    In memory only: a new leader starts afresh, so `observe` takes whether the node still carries the
    policy's unhealthy taint, and then makes a healthy node wait out healthyForSeconds again rather
    than trust it at once.
    """

    def __init__(self, settings: HealthSettings) -> None:
        self.settings = settings
        """Replaceable when the policy's spec changes; the memory stays."""
        self._xid_values: dict[tuple[str, str], int] = {}
        self._xid_seen: dict[str, dict[int, datetime]] = {}
        self._states: dict[str, _Remembered] = {}

    def note_samples(self, now: datetime, node_name: str, samples: Iterable[GpuSample]) -> None:
        """Record the Xids that appeared since the last samples of the node (a GPU's Xid field
        changing to a non-ignored value, or holding one the first time it is seen)."""
        seen = self._xid_seen.setdefault(node_name, {})
        for sample in samples:
            key = (node_name, sample.uuid or sample.gpu)
            if sample.xid is None:
                continue
            before = self._xid_values.get(key)
            self._xid_values[key] = sample.xid
            if sample.xid and sample.xid != before and sample.xid not in self.settings.ignored_xids:
                seen[sample.xid] = now

    def xid_seen(self, node_name: str) -> Mapping[int, datetime]:
        return dict(self._xid_seen.get(node_name, {}))

    def judge(
        self,
        now: datetime,
        node: Mapping[str, Any],
        samples: Sequence[GpuSample] | None,
        *,
        previously_unhealthy: bool = False,
    ) -> NodeHealthState:
        """`note_samples`, `judge_node` and `observe` in one, for a node object with a name."""
        name = str((node.get("metadata") or {}).get("name", ""))
        if samples is not None:
            self.note_samples(now, name, samples)
        health = judge_node(now, node, samples, self.xid_seen(name), self.settings)
        return self.observe(now, name, health, previously_unhealthy=previously_unhealthy)

    def observe(
        self, now: datetime, node_name: str, health: NodeHealth, *, previously_unhealthy: bool = False
    ) -> NodeHealthState:
        """Fold in one judgement. A node first seen healthy counts at once (nothing says it was ill),
        unless `previously_unhealthy` (it carries the policy's unhealthy taint from before)."""
        remembered = self._states.get(node_name)
        changed = remembered is None or remembered.healthy != health.healthy
        if remembered is None:
            counted = health.healthy and not previously_unhealthy
            remembered = _Remembered(health.healthy, now, counted)
            changed = previously_unhealthy == health.healthy  # a first look changes only a taint's truth
            self._states[node_name] = remembered
        elif changed:
            remembered.healthy, remembered.since, remembered.counted = health.healthy, now, False
        healthy_for = (now - remembered.since).total_seconds()
        if health.healthy and healthy_for >= self.settings.healthy_for_seconds:
            remembered.counted = True
        return NodeHealthState(
            healthy=health.healthy,
            counts=health.healthy and remembered.counted,
            since=remembered.since,
            reason=health.reason,
            detail=health.detail,
            changed=changed,
        )

    def retain(self, node_names: Iterable[str]) -> None:
        """Forget every node not named (left the pool, deleted)."""
        keep = set(node_names)
        for name in [name for name in self._states if name not in keep]:
            del self._states[name]
        for name in [name for name in self._xid_seen if name not in keep]:
            del self._xid_seen[name]
        for key in [key for key in self._xid_values if key[0] not in keep]:
            del self._xid_values[key]
