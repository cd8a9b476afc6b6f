"""Whether a home GPU node is healthy enough to take work: the findings of each signal with their
severity, the persistence of degrading ones, and the memory that needs.

Signals (`severity` has each one's default severity and where it comes from):
- `Xid`: a GPU raised an Xid within the lookback window; its severity is per Xid (`fatalXids`,
  `ignoredXids` the informational ones, any other `severity.Xid`);
- `RowRemapFailure`: a GPU could not remap a failing memory row;
- `RowRemapPending`: a GPU has a row remap waiting for the next GPU reset;
- `DevicePluginUnhealthy`: allocatable of the pool's resource below capacity (the NVIDIA device plugin
  takes a GPU it finds broken out of allocatable, leaving capacity as is);
- `Temperature`: a GPU hotter than the maximum (strictly above it);
- `ExternalTaint`: a taint whose key starts with one of the configured prefixes (NVSentinel's
  `nvidia.com/gpu-xid-error`, ...), not one the policy itself put on;
- `ExternalCondition`: a configured node condition type (`GpuThermalWatch`, `GPUXIDErrors`, ...) True;
- `Interconnect`: an InfiniBand or NVLink error rate above its threshold (`interconnect`).

A node with a fatal finding is unhealthy at once. A degrading finding makes it unhealthy once it has
lasted `degradingForSeconds` without a break, within the pool's cap on non-fatal taints (`healthcap`,
applied by `signals.GpuHealth`); a node the policy already tainted stays so while any fatal or
degrading finding lasts. Informational findings are reported, never acted on. The rule that judged a
node (its `rule`) is the first signal, in `severity.SIGNALS` order, of its gravest finding.

`HealthMemory` adds the time: when an Xid appeared (the exporter's Xid field keeps the last value for
good, so "within the lookback" counts from its appearance), since when each signal has lasted, and since
when a node has been healthy, so that a node counts again only after `healthyForSeconds`. It lives in
memory: a new leader starts the persistence clocks afresh (a node it finds tainted stays tainted while a
finding lasts, so nothing flaps over a change of leader).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity
from vk_provider.kit.timestamps import format_timestamp
from vk_provider.policy.dcgm import ExporterSettings, GpuSample
from vk_provider.policy.interconnect import InterconnectSettings, LinkRate, faulty_links
from vk_provider.policy.names import DEFAULT_GPU_RESOURCE, POLICY_TAINTS_ANNOTATION, UNHEALTHY_TAINT_KEY
from vk_provider.policy.severity import (
    DEFAULT_SEVERITIES,
    DEVICE_PLUGIN_UNHEALTHY,
    EXTERNAL_CONDITION,
    EXTERNAL_TAINT,
    FATAL_XIDS,
    INFORMATIONAL_XIDS,
    INTERCONNECT,
    ROW_REMAP_FAILURE,
    ROW_REMAP_PENDING,
    SIGNALS,
    TEMPERATURE,
    XID,
    Finding,
    Severity,
    describe_xid,
    strongest,
)

__all__ = [
    "DEVICE_PLUGIN_UNHEALTHY",
    "EXTERNAL_CONDITION",
    "EXTERNAL_TAINT",
    "INTERCONNECT",
    "ROW_REMAP_FAILURE",
    "ROW_REMAP_PENDING",
    "TEMPERATURE",
    "XID",
    "HealthMemory",
    "HealthSettings",
    "HealthSettingsError",
    "NodeHealth",
    "NodeHealthState",
    "Verdict",
    "find",
    "judge",
]

DEFAULT_IGNORED_XIDS = INFORMATIONAL_XIDS
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
WHERE = "spec.health"
SEVERITY_NAMES = {severity.value: severity for severity in Severity}
DEPRECATED_FLAGS = {"rowRemapFailure": ROW_REMAP_FAILURE, "allocatableBelowCapacity": DEVICE_PLUGIN_UNHEALTHY}
"""Boolean fields of before severities: `false` now reads as severity Informational for their signal."""


class HealthSettingsError(ValueError):
    """A field of spec.health that cannot be used; the message names it."""


@dataclasses.dataclass(frozen=True, slots=True)
class HealthSettings:
    """spec.health of an OffloadPolicy, with the contract's defaults (`from_spec` parses it)."""

    resource: str = DEFAULT_GPU_RESOURCE
    """The pool's GPU resource (spec.homePool.resource), whose allocatable is compared to capacity."""
    exporter: ExporterSettings | None = None
    interconnect: InterconnectSettings | None = None
    max_temperature_celsius: float = 78.0
    xid_lookback_seconds: float = 3600.0
    ignored_xids: frozenset[int] = DEFAULT_IGNORED_XIDS
    """Informational Xids: reported, never tainted."""
    fatal_xids: frozenset[int] = FATAL_XIDS
    severities: Mapping[str, Severity] = dataclasses.field(default_factory=lambda: dict(DEFAULT_SEVERITIES))
    """Per signal (for Xid: an Xid in neither list)."""
    degrading_for_seconds: float = 600.0
    """How long a degrading finding must last before it taints (EKS's node repair waits 10 minutes)."""
    max_non_fatal_share: float = 0.2
    """At most floor(this x pool nodes) nodes tainted for non-fatal reasons at once (EKS: 20%)."""
    row_remap_failure: bool = True
    """Deprecated: false reads as severity RowRemapFailure Informational."""
    allocatable_below_capacity: bool = True
    """Deprecated: false reads as severity DevicePluginUnhealthy Informational."""
    external_taint_prefixes: tuple[str, ...] = ()
    external_conditions: tuple[str, ...] = ()
    healthy_for_seconds: float = 120.0
    taint_key: str = UNHEALTHY_TAINT_KEY
    taint_effect: str = "NoSchedule"

    def severity_of(self, signal: str) -> Severity:
        if (signal == ROW_REMAP_FAILURE and not self.row_remap_failure) or (
            signal == DEVICE_PLUGIN_UNHEALTHY and not self.allocatable_below_capacity
        ):
            return Severity.INFORMATIONAL
        return self.severities.get(signal, DEFAULT_SEVERITIES[signal])

    def xid_severity(self, xid: int) -> Severity:
        if xid in self.fatal_xids:
            return Severity.FATAL
        if xid in self.ignored_xids:
            return Severity.INFORMATIONAL
        return self.severity_of(XID)

    @classmethod
    def from_spec(
        cls, spec_health: Mapping[str, Any] | None, *, resource: str = DEFAULT_GPU_RESOURCE
    ) -> HealthSettings:
        """Parse spec.health (None or {} = every default). Raises HealthSettingsError naming the field."""
        spec = {} if spec_health is None else spec_health
        if not isinstance(spec, Mapping):
            raise HealthSettingsError(f"{WHERE} must be a mapping, not {spec!r}")
        known = {
            "dcgmExporter", "interconnect", "maxTemperatureCelsius", "xidLookbackSeconds", "ignoredXids",
            "fatalXids", "severity", "degradingForSeconds", "maxNonFatalShare", "rowRemapFailure",
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
        interconnect = None
        if spec.get("interconnect") is not None:
            try:
                interconnect = InterconnectSettings.from_spec(spec["interconnect"])
            except ValueError as error:
                raise HealthSettingsError(str(error)) from None
        defaults = cls()
        taint_key, taint_effect = _taint(spec.get("taint"))
        severities = _severities(spec.get("severity"))
        flags = {field: _flag(spec, field, True) for field in DEPRECATED_FLAGS}
        for field, signal in DEPRECATED_FLAGS.items():
            if not flags[field] and signal in (spec.get("severity") or {}):
                raise HealthSettingsError(
                    f"{WHERE}.{field}: false says what {WHERE}.severity.{signal} says: drop {field} "
                    f"(it is replaced by severity.{signal}: Informational)"
                )
        ignored = _xids(spec, "ignoredXids", defaults.ignored_xids)
        fatal = _xids(spec, "fatalXids", defaults.fatal_xids)
        if both := sorted(ignored & fatal):
            raise HealthSettingsError(
                f"{WHERE}.fatalXids and {WHERE}.ignoredXids both name Xids {both}: each Xid has one severity"
            )
        share = _number(spec, "maxNonFatalShare", defaults.max_non_fatal_share)
        if share > 1:
            raise HealthSettingsError(
                f"{WHERE}.maxNonFatalShare must be a share of the pool, 0..1, not {share!r}"
            )
        return cls(
            resource=resource,
            exporter=exporter,
            interconnect=interconnect,
            max_temperature_celsius=_number(spec, "maxTemperatureCelsius", defaults.max_temperature_celsius),
            xid_lookback_seconds=_number(spec, "xidLookbackSeconds", defaults.xid_lookback_seconds),
            ignored_xids=ignored,
            fatal_xids=fatal,
            severities=severities,
            degrading_for_seconds=_number(spec, "degradingForSeconds", defaults.degrading_for_seconds),
            max_non_fatal_share=share,
            row_remap_failure=flags["rowRemapFailure"],
            allocatable_below_capacity=flags["allocatableBelowCapacity"],
            external_taint_prefixes=_strings(spec, "externalTaintPrefixes"),
            external_conditions=_strings(spec, "externalConditions"),
            healthy_for_seconds=_number(spec, "healthyForSeconds", defaults.healthy_for_seconds),
            taint_key=taint_key,
            taint_effect=taint_effect,
        )


def _severities(value: Any) -> dict[str, Severity]:
    severities = dict(DEFAULT_SEVERITIES)
    if value is None:
        return severities
    if not isinstance(value, Mapping):
        raise HealthSettingsError(
            f"{WHERE}.severity must map signals to Fatal, Degrading or Informational, not {value!r}"
        )
    for signal, name in value.items():
        if signal not in DEFAULT_SEVERITIES:
            raise HealthSettingsError(
                f"{WHERE}.severity.{signal} is no signal (known: {', '.join(sorted(DEFAULT_SEVERITIES))})"
            )
        if name not in SEVERITY_NAMES:
            raise HealthSettingsError(
                f"{WHERE}.severity.{signal} must be Fatal, Degrading or Informational, not {name!r}"
            )
        severities[signal] = SEVERITY_NAMES[name]
    return severities


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


def _xids(spec: Mapping[str, Any], key: str, default: frozenset[int]) -> frozenset[int]:
    value = spec.get(key, sorted(default))
    if not isinstance(value, list) or not all(
        isinstance(item, int) and not isinstance(item, bool) and item > 0 for item in value
    ):
        raise HealthSettingsError(f"{WHERE}.{key} must be a list of Xid numbers (> 0), not {value!r}")
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


def find(
    now: datetime,
    node: Mapping[str, Any],
    samples: Sequence[GpuSample] | None,
    xid_seen: Mapping[int, datetime],
    settings: HealthSettings,
    *,
    links: Sequence[LinkRate] | None = None,
) -> list[Finding]:
    """Every finding of the node, from its Node object, its dcgm-exporter samples (None: no exporter
    data, then only the node's own signals count), when each Xid appeared (`HealthMemory.xid_seen`)
    and its interconnect rates (None: none read). Pure; `since` is left to `HealthMemory`."""
    findings = _sample_findings(now, samples or (), xid_seen, settings) + _node_findings(node, settings)
    if links and settings.interconnect is not None:
        faulty = faulty_links(links, settings.interconnect)
        if faulty:
            findings.append(_finding(settings, INTERCONNECT, "; ".join(faulty)))
    return findings


def _finding(settings: HealthSettings, signal: str, text: str) -> Finding:
    severity = settings.severity_of(signal)
    return Finding(signal, severity, f"{text} ({severity.value.lower()})")


def _sample_findings(
    now: datetime, samples: Sequence[GpuSample], xid_seen: Mapping[int, datetime], settings: HealthSettings
) -> list[Finding]:
    """The GPUs' findings, and the Xids of the lookback that no GPU reports any more."""
    findings = []
    lookback = timedelta(seconds=settings.xid_lookback_seconds)
    recent = {xid for xid, seen in xid_seen.items() if now - seen <= lookback}
    for sample in samples:
        xid = sample.xid
        # An Xid the memory has not seen yet is new, so within the lookback.
        if xid and (xid in recent or xid not in xid_seen):
            severity = settings.xid_severity(xid)
            findings.append(Finding(XID, severity, f"GPU {sample.gpu} raised {describe_xid(xid, severity)}"))
        if sample.row_remap_failure:
            findings.append(
                _finding(settings, ROW_REMAP_FAILURE, f"GPU {sample.gpu} has a row-remap failure")
            )
        if sample.row_remap_pending:
            findings.append(
                _finding(
                    settings,
                    ROW_REMAP_PENDING,
                    f"GPU {sample.gpu} has a row remap pending until its next reset",
                )
            )
        temperature = sample.temperature_celsius
        if temperature is not None and temperature > settings.max_temperature_celsius:
            findings.append(
                _finding(
                    settings,
                    TEMPERATURE,
                    f"GPU {sample.gpu} at {temperature:g} °C > {settings.max_temperature_celsius:g} °C",
                )
            )
    reported = {sample.xid for sample in samples}
    for xid in sorted(recent - reported):
        severity = settings.xid_severity(xid)
        # When, not how long ago: a detail that changed every pass would rewrite the status every pass.
        seen = format_timestamp(xid_seen[xid])
        findings.append(Finding(XID, severity, f"{describe_xid(xid, severity)} seen at {seen}"))
    return findings


def _node_findings(node: Mapping[str, Any], settings: HealthSettings) -> list[Finding]:
    findings = []
    status = node.get("status") or {}
    below = _allocatable_below_capacity(status, settings.resource)
    if below is not None:
        findings.append(_finding(settings, DEVICE_PLUGIN_UNHEALTHY, below))
    if settings.external_taint_prefixes:
        ours = _policy_taints(node) | {settings.taint_key}
        for taint in (node.get("spec") or {}).get("taints") or ():
            key = str(taint.get("key", ""))
            if key not in ours and key.startswith(settings.external_taint_prefixes):
                value = f"={taint['value']}" if taint.get("value") else ""
                findings.append(
                    _finding(settings, EXTERNAL_TAINT, f"taint {key}{value}:{taint.get('effect', '')}")
                )
    for condition in status.get("conditions") or ():
        kind = condition.get("type")
        if kind in settings.external_conditions and condition.get("status") == "True":
            because = condition.get("reason") or condition.get("message") or "True"
            findings.append(_finding(settings, EXTERNAL_CONDITION, f"condition {kind} is True ({because})"))
    return findings


class Verdict(enum.StrEnum):
    """What the findings call for, before the pool's cap."""

    FATAL = "Fatal"
    """A fatal finding: unhealthy now, whatever the cap."""
    KEPT = "Kept"
    """Already tainted (or judged unhealthy) and a degrading finding lasts: stays unhealthy."""
    DUE = "Due"
    """A degrading finding has lasted degradingForSeconds: unhealthy, if the cap has a slot."""
    PENDING = "Pending"
    """A degrading finding, not yet for degradingForSeconds."""
    CLEAR = "Clear"
    """Nothing to act on (informational findings at most)."""


UNHEALTHY_VERDICTS = frozenset({Verdict.FATAL, Verdict.KEPT, Verdict.DUE})


def judge(
    now: datetime, findings: Sequence[Finding], settings: HealthSettings, *, tainted: bool = False
) -> tuple[Verdict, Finding | None]:
    """The verdict on a node's findings (their `since` set; None counts as now) and the rule that
    judged it: the gravest finding, the one that has lasted longest among degrading ones. Pure."""
    found = list(findings)
    fatal = strongest(found, Severity.FATAL)
    if fatal is not None:
        return Verdict.FATAL, fatal
    degrading = [finding for finding in found if finding.severity is Severity.DEGRADING]
    if not degrading:
        return Verdict.CLEAR, strongest(found, Severity.INFORMATIONAL)
    oldest = min(degrading, key=lambda finding: (finding.since or now, SIGNALS.index(finding.signal)))
    if tainted:
        return Verdict.KEPT, oldest
    lasted = (now - (oldest.since or now)).total_seconds()
    return (Verdict.DUE if lasted >= settings.degrading_for_seconds else Verdict.PENDING), oldest


@dataclasses.dataclass(frozen=True, slots=True)
class NodeHealth:
    healthy: bool
    reason: str | None = None
    """The signal of the rule that judged it unhealthy, None when healthy."""
    detail: str = ""
    """Every finding, the rule's first, for a person; or `healthy`."""
    findings: tuple[Finding, ...] = ()
    rule: Finding | None = None
    """The finding that judged the node (also when it is held back, pending or only informational)."""
    verdict: Verdict = Verdict.CLEAR
    held_back: bool = False
    """Due, but the pool's cap on non-fatal taints had no slot for it: left in service."""


def node_health(
    verdict: Verdict, rule: Finding | None, findings: Sequence[Finding], *, held_back: bool = False
) -> NodeHealth:
    unhealthy = verdict in UNHEALTHY_VERDICTS and not held_back
    ordered = sorted(findings, key=lambda finding: finding != rule)
    detail = "; ".join(finding.detail for finding in ordered) or "healthy"
    return NodeHealth(
        healthy=not unhealthy,
        reason=rule.signal if unhealthy and rule is not None else None,
        detail=detail,
        findings=tuple(findings),
        rule=rule,
        verdict=verdict,
        held_back=held_back,
    )


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
    findings: tuple[Finding, ...] = ()
    rule: Finding | None = None
    verdict: Verdict = Verdict.CLEAR
    held_back: bool = False


@dataclasses.dataclass(slots=True)
class _Remembered:
    healthy: bool
    since: datetime
    counted: bool


class HealthMemory:
    """Per node: when each Xid appeared, since when each signal has lasted, and since when the node
    has been healthy or unhealthy.

    In memory only: a new leader starts afresh, so `observe` takes whether the node still carries the
    policy's unhealthy taint, and then makes a healthy node wait out healthyForSeconds again rather
    than trust it at once.
    """

    def __init__(self, settings: HealthSettings) -> None:
        self.settings = settings
        """Replaceable when the policy's spec changes; the memory stays."""
        self._xid_values: dict[tuple[str, str], int] = {}
        self._xid_seen: dict[str, dict[int, datetime]] = {}
        self._signals: dict[str, dict[tuple[str, Severity], datetime]] = {}
        self._states: dict[str, _Remembered] = {}

    def note_samples(self, now: datetime, node_name: str, samples: Iterable[GpuSample]) -> None:
        """Record the Xids that appeared since the last samples of the node (a GPU's Xid field
        changing to another value than 0, or holding one the first time it is seen)."""
        seen = self._xid_seen.setdefault(node_name, {})
        for sample in samples:
            key = (node_name, sample.uuid or sample.gpu)
            if sample.xid is None:
                continue
            before = self._xid_values.get(key)
            self._xid_values[key] = sample.xid
            if sample.xid and sample.xid != before:
                seen[sample.xid] = now

    def xid_seen(self, node_name: str) -> Mapping[int, datetime]:
        return dict(self._xid_seen.get(node_name, {}))

    def findings(
        self,
        now: datetime,
        node: Mapping[str, Any],
        samples: Sequence[GpuSample] | None,
        *,
        links: Sequence[LinkRate] | None = None,
    ) -> list[Finding]:
        """`note_samples` and `find`, each finding dated: since when its signal (at its severity) has
        shown without a break; a signal that is gone for one observation starts again."""
        name = _name(node)
        if samples is not None:
            self.note_samples(now, name, samples)
        found = find(now, node, samples, self.xid_seen(name), self.settings, links=links)
        before = self._signals.get(name, {})
        lasting = {(f.signal, f.severity): before.get((f.signal, f.severity), now) for f in found}
        self._signals[name] = lasting
        return [dataclasses.replace(f, since=lasting[(f.signal, f.severity)]) for f in found]

    def unhealthy(self, node_name: str) -> bool:
        """Whether the last observation of the node judged it unhealthy."""
        remembered = self._states.get(node_name)
        return remembered is not None and not remembered.healthy

    def judge(
        self,
        now: datetime,
        node: Mapping[str, Any],
        samples: Sequence[GpuSample] | None,
        *,
        previously_unhealthy: bool = False,
        links: Sequence[LinkRate] | None = None,
    ) -> NodeHealthState:
        """One node on its own, without the pool's cap: `findings`, `judge` and `observe` in one.
        `previously_unhealthy`: it carries the policy's unhealthy taint."""
        name = _name(node)
        found = self.findings(now, node, samples, links=links)
        verdict, rule = judge(now, found, self.settings, tainted=previously_unhealthy or self.unhealthy(name))
        health = node_health(verdict, rule, found)
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
            findings=health.findings,
            rule=health.rule,
            verdict=health.verdict,
            held_back=health.held_back,
        )

    def retain(self, node_names: Iterable[str]) -> None:
        """Forget every node not named (left the pool, deleted)."""
        keep = set(node_names)
        for table in (self._states, self._xid_seen, self._signals):
            for name in [name for name in table if name not in keep]:
                del table[name]
        for key in [key for key in self._xid_values if key[0] not in keep]:
            del self._xid_values[key]


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name", ""))
