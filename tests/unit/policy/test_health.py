"""Judging a home GPU node's health: each signal's finding and severity, the persistence of degrading
ones, the memory of Xids and healthy time, and spec.health parsing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from vk_provider.policy import health
from vk_provider.policy.dcgm import GpuSample
from vk_provider.policy.health import (
    HealthMemory,
    HealthSettings,
    HealthSettingsError,
    NodeHealth,
    Verdict,
    find,
    judge,
    node_health,
)
from vk_provider.policy.interconnect import THRESHOLD_FIELDS
from vk_provider.policy.names import POLICY_TAINTS_ANNOTATION, RESERVED_TAINT_KEY, UNHEALTHY_TAINT_KEY
from vk_provider.policy.severity import DEFAULT_SEVERITIES, FATAL_XIDS, INFORMATIONAL_XIDS, Finding, Severity

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 3, 16, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"


def node(
    *,
    capacity: str = "4",
    allocatable: str | None = "4",
    taints: list[dict[str, str]] | None = None,
    conditions: list[dict[str, str]] | None = None,
    policy_taints: list[str] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"capacity": {"cpu": "16", GPU: capacity}, "allocatable": {"cpu": "16"}}
    if allocatable is not None:
        status["allocatable"][GPU] = allocatable
    status["conditions"] = [{"type": "Ready", "status": "True"}, *(conditions or [])]
    metadata: dict[str, Any] = {"name": "gpu-a"}
    if policy_taints is not None:
        metadata["annotations"] = {POLICY_TAINTS_ANNOTATION: json.dumps(policy_taints)}
    return {"metadata": metadata, "spec": {"taints": taints or []}, "status": status}


def gpus(*changes: dict[str, Any], count: int = 4) -> list[GpuSample]:
    """`count` cool, idle GPUs; change i applies to GPU i."""
    samples = [GpuSample(gpu=str(i), uuid=f"GPU-{i}", temperature_celsius=45.0, xid=0) for i in range(count)]
    for i, change in enumerate(changes):
        fields = {
            "gpu": samples[i].gpu,
            "uuid": samples[i].uuid,
            "temperature_celsius": samples[i].temperature_celsius,
            "xid": samples[i].xid,
            **change,
        }
        samples[i] = GpuSample(**fields)
    return samples


DEFAULTS = HealthSettings()
FATAL, DEGRADING, INFO = Severity.FATAL, Severity.DEGRADING, Severity.INFORMATIONAL


def found(
    node_object: dict[str, Any],
    samples: list[GpuSample] | None,
    settings: HealthSettings = DEFAULTS,
    xid_seen: dict[int, datetime] | None = None,
) -> list[tuple[str, Severity]]:
    return [(f.signal, f.severity) for f in find(NOW, node_object, samples, xid_seen or {}, settings)]


@pytest.mark.parametrize(
    ("node_object", "samples", "xid_seen", "settings", "expected"),
    [
        (node(), gpus(), {}, DEFAULTS, []),
        (node(), None, {}, DEFAULTS, []),
        (node(), gpus({"temperature_celsius": 85.0}), {}, DEFAULTS, [(health.TEMPERATURE, DEGRADING)]),
        (node(), gpus({"temperature_celsius": 78.0}), {}, DEFAULTS, []),  # the line itself is fine
        (node(), gpus({"xid": 79}), {}, DEFAULTS, [(health.XID, FATAL)]),  # not remembered yet: new
        (node(), gpus({"xid": 79}), {79: NOW - timedelta(minutes=59)}, DEFAULTS, [(health.XID, FATAL)]),
        (node(), gpus({"xid": 79}), {79: NOW - timedelta(minutes=61)}, DEFAULTS, []),  # outside lookback
        (node(), gpus(), {48: NOW - timedelta(minutes=5)}, DEFAULTS, [(health.XID, FATAL)]),  # reset since
        (node(), None, {48: NOW - timedelta(minutes=5)}, DEFAULTS, [(health.XID, FATAL)]),  # exporter down
        (node(), gpus({"xid": 13}), {}, DEFAULTS, [(health.XID, INFO)]),  # application error, reported
        (node(), gpus({}, {"xid": 43}), {}, DEFAULTS, [(health.XID, INFO)]),
        (node(), gpus({"xid": 63}), {}, DEFAULTS, [(health.XID, INFO)]),  # a remap event: see pending
        (node(), gpus({"xid": 94}), {}, DEFAULTS, [(health.XID, DEGRADING)]),  # contained: neither list
        (node(), gpus({"xid": 13}), {}, HealthSettings(ignored_xids=frozenset()), [(health.XID, DEGRADING)]),
        (node(), gpus({"row_remap_failure": True}), {}, DEFAULTS, [(health.ROW_REMAP_FAILURE, FATAL)]),
        (node(), gpus({"row_remap_pending": True}), {}, DEFAULTS, [(health.ROW_REMAP_PENDING, INFO)]),
        (
            node(),
            gpus({"row_remap_failure": True}),
            {},
            HealthSettings(row_remap_failure=False),  # the deprecated flag: reported, never tainted
            [(health.ROW_REMAP_FAILURE, INFO)],
        ),
        (node(allocatable="3"), gpus(), {}, DEFAULTS, [(health.DEVICE_PLUGIN_UNHEALTHY, FATAL)]),
        (node(allocatable=None), None, {}, DEFAULTS, [(health.DEVICE_PLUGIN_UNHEALTHY, FATAL)]),
        (
            node(allocatable="3"),
            gpus(),
            {},
            HealthSettings(allocatable_below_capacity=False),
            [(health.DEVICE_PLUGIN_UNHEALTHY, INFO)],
        ),
        (node(allocatable="3"), gpus(), {}, HealthSettings(resource="amd.com/gpu"), []),  # not the pool's
        (
            node(taints=[{"key": "nvidia.com/gpu-xid-error", "value": "true", "effect": "NoSchedule"}]),
            gpus(),
            {},
            HealthSettings(external_taint_prefixes=("nvidia.com/",)),
            [(health.EXTERNAL_TAINT, FATAL)],
        ),
        (
            node(taints=[{"key": "nvidia.com/gpu-xid-error", "value": "true", "effect": "NoSchedule"}]),
            gpus(),
            {},
            DEFAULTS,
            [],
        ),
        (
            node(conditions=[{"type": "GpuThermalWatch", "status": "True", "reason": "Hot"}]),
            gpus(),
            {},
            HealthSettings(external_conditions=("GpuThermalWatch",)),
            [(health.EXTERNAL_CONDITION, FATAL)],
        ),
        (
            node(conditions=[{"type": "GpuThermalWatch", "status": "False"}]),
            gpus(),
            {},
            HealthSettings(external_conditions=("GpuThermalWatch",)),
            [],
        ),
    ],
)
def test_each_signal_is_found_with_its_default_severity(
    node_object: dict[str, Any],
    samples: list[GpuSample] | None,
    xid_seen: dict[int, datetime],
    settings: HealthSettings,
    expected: list[tuple[str, Severity]],
) -> None:
    assert found(node_object, samples, settings, xid_seen) == expected


def test_the_xid_defaults_follow_the_catalogue_and_the_device_plugin() -> None:
    # NVIDIA's device plugin and DRA driver skip these as the application's fault.
    assert {13, 31, 43, 45, 68, 109} <= INFORMATIONAL_XIDS
    # Hardware the catalogue says to reset the GPU or restart the machine for.
    assert {48, 64, 74, 79, 95, 119, 120, 140} <= FATAL_XIDS
    assert not INFORMATIONAL_XIDS & FATAL_XIDS
    severities = {xid: DEFAULTS.xid_severity(xid) for xid in (13, 63, 79, 92, 94, 95, 999)}
    assert severities == {
        13: INFO,
        63: INFO,
        79: FATAL,
        92: DEGRADING,
        94: DEGRADING,
        95: FATAL,
        999: DEGRADING,
    }


def test_a_finding_says_its_severity_and_the_xid_its_name() -> None:
    (xid,) = find(NOW, node(), gpus({}, {"xid": 79}), {}, DEFAULTS)
    assert xid.detail == "GPU 1 raised Xid 79 (fatal: GPU fallen off the bus)"
    (pending,) = find(NOW, node(), gpus({"row_remap_pending": True}), {}, DEFAULTS)
    assert pending.detail == "GPU 0 has a row remap pending until its next reset (informational)"
    (hot,) = find(NOW, node(), gpus({}, {}, {"temperature_celsius": 85.0}), {}, DEFAULTS)
    assert hot.detail == "GPU 2 at 85 °C > 78 °C (degrading)"


def test_the_policys_own_taints_are_not_external() -> None:
    """A prefix that covers the policy's own taints must not make its unhealthy taint self-sustaining."""
    taints = [
        {"key": UNHEALTHY_TAINT_KEY, "value": "Temperature", "effect": "NoSchedule"},
        {"key": RESERVED_TAINT_KEY, "value": "training", "effect": "NoSchedule"},
    ]
    settings = HealthSettings(external_taint_prefixes=("gpu.vk-provider.dev/",))
    tainted = node(taints=taints, policy_taints=[RESERVED_TAINT_KEY])
    assert find(NOW, tainted, gpus(), {}, settings) == []
    foreign = node(taints=[{"key": "gpu.vk-provider.dev/drained", "effect": "NoSchedule"}])
    assert found(foreign, gpus(), settings) == [(health.EXTERNAL_TAINT, FATAL)]


def finding(signal: str, severity: Severity, *, since: datetime | None = NOW) -> Finding:
    return Finding(signal, severity, f"{signal} detail", since)


@pytest.mark.parametrize(
    ("findings", "tainted", "verdict", "rule"),
    [
        ([], False, Verdict.CLEAR, None),
        ([finding(health.ROW_REMAP_PENDING, INFO)], False, Verdict.CLEAR, health.ROW_REMAP_PENDING),
        ([finding(health.XID, FATAL)], False, Verdict.FATAL, health.XID),
        # Fatal wins over a degrading signal that has lasted longer.
        (
            [
                finding(health.TEMPERATURE, DEGRADING, since=NOW - timedelta(hours=1)),
                finding(health.XID, FATAL),
            ],
            False,
            Verdict.FATAL,
            health.XID,
        ),
        ([finding(health.TEMPERATURE, DEGRADING)], False, Verdict.PENDING, health.TEMPERATURE),
        (
            [finding(health.TEMPERATURE, DEGRADING, since=NOW - timedelta(seconds=599))],
            False,
            Verdict.PENDING,
            health.TEMPERATURE,
        ),
        (
            [finding(health.TEMPERATURE, DEGRADING, since=NOW - timedelta(seconds=600))],
            False,
            Verdict.DUE,
            health.TEMPERATURE,
        ),
        # The degrading signal that has lasted longest is the rule.
        (
            [
                finding(health.TEMPERATURE, DEGRADING, since=NOW - timedelta(seconds=10)),
                finding(health.INTERCONNECT, DEGRADING, since=NOW - timedelta(seconds=700)),
            ],
            False,
            Verdict.DUE,
            health.INTERCONNECT,
        ),
        # Tainted already: it stays so while a degrading signal lasts, however short.
        ([finding(health.TEMPERATURE, DEGRADING)], True, Verdict.KEPT, health.TEMPERATURE),
        ([], True, Verdict.CLEAR, None),
    ],
)
def test_the_verdict_and_the_rule_that_judged(
    findings: list[Finding], tainted: bool, verdict: Verdict, rule: str | None
) -> None:
    judged, chosen = judge(NOW, findings, DEFAULTS, tainted=tainted)
    assert judged is verdict
    assert (chosen.signal if chosen is not None else None) == rule


def test_node_health_puts_the_rule_first_and_only_taints_unheld_verdicts() -> None:
    hot = finding(health.TEMPERATURE, DEGRADING)
    pending = finding(health.ROW_REMAP_PENDING, INFO)
    due = node_health(Verdict.DUE, hot, [pending, hot])
    assert (due.healthy, due.reason) == (False, health.TEMPERATURE)
    assert due.detail == "Temperature detail; RowRemapPending detail"
    held = node_health(Verdict.DUE, hot, [pending, hot], held_back=True)
    assert (held.healthy, held.reason, held.held_back, held.rule) == (True, None, True, hot)
    reported = node_health(Verdict.CLEAR, pending, [pending])
    assert (reported.healthy, reported.rule) == (True, pending)
    assert node_health(Verdict.CLEAR, None, []).detail == "healthy"


def test_a_degrading_signal_taints_only_once_it_has_lasted_without_a_break() -> None:
    memory = HealthMemory(HealthSettings(degrading_for_seconds=60, healthy_for_seconds=30))
    hot = gpus({"temperature_celsius": 85.0})
    first = memory.judge(NOW, node(), hot)
    assert (first.healthy, first.verdict) == (True, Verdict.PENDING)
    assert first.rule is not None
    assert first.rule.since == NOW
    assert memory.judge(NOW + timedelta(seconds=59), node(), hot).healthy
    # One cool observation restarts the clock.
    memory.judge(NOW + timedelta(seconds=62), node(), gpus())
    assert memory.judge(NOW + timedelta(seconds=70), node(), hot).healthy
    due = memory.judge(NOW + timedelta(seconds=130), node(), hot)
    assert (due.healthy, due.reason, due.verdict) == (False, health.TEMPERATURE, Verdict.DUE)
    # Judged unhealthy, it stays so while the signal lasts, then waits out healthyForSeconds.
    assert not memory.judge(NOW + timedelta(seconds=131), node(), hot).healthy
    cooled = memory.judge(NOW + timedelta(seconds=140), node(), gpus())
    assert (cooled.healthy, cooled.counts) == (True, False)
    assert memory.judge(NOW + timedelta(seconds=170), node(), gpus()).counts


def test_a_fatal_signal_taints_at_once_and_an_informational_one_never() -> None:
    memory = HealthMemory(DEFAULTS)
    assert not memory.judge(NOW, node(), gpus({"row_remap_failure": True})).healthy
    other = HealthMemory(DEFAULTS)
    for minutes in (0, 30, 600):
        state = other.judge(NOW + timedelta(minutes=minutes), node(), gpus({"row_remap_pending": True}))
        assert state.healthy
        assert state.counts
        assert state.rule is not None
        assert state.rule.signal == health.ROW_REMAP_PENDING


def test_memory_dates_an_xid_from_its_appearance() -> None:
    """The exporter's Xid field keeps its last value; the lookback counts from when it changed."""
    memory = HealthMemory(HealthSettings(xid_lookback_seconds=600))
    a_node = node()
    assert not memory.judge(NOW, a_node, gpus({"xid": 79})).healthy
    later = NOW + timedelta(seconds=599)
    assert memory.judge(later, a_node, gpus({"xid": 79})).reason == health.XID
    expired = NOW + timedelta(seconds=601)
    assert memory.judge(expired, a_node, gpus({"xid": 79})).healthy
    # The same Xid raised again (the field went to another value and back) is new again.
    memory.note_samples(expired, "gpu-a", gpus({"xid": 0}))
    again = expired + timedelta(seconds=1)
    assert memory.judge(again, a_node, gpus({"xid": 79})).reason == health.XID


def test_memory_reports_application_xids_without_tainting() -> None:
    memory = HealthMemory(DEFAULTS)
    memory.note_samples(NOW, "gpu-a", gpus({"xid": 13}, {"xid": 45}))
    assert set(memory.xid_seen("gpu-a")) == {13, 45}
    state = memory.judge(NOW, node(), gpus({"xid": 13}))
    assert state.healthy
    assert state.rule is not None
    assert state.rule.detail == "GPU 0 raised Xid 13 (informational: graphics engine exception)"


def test_a_node_counts_again_only_after_healthy_for_seconds() -> None:
    memory = HealthMemory(HealthSettings(healthy_for_seconds=120))
    first = memory.observe(NOW, "gpu-a", NodeHealth(True))
    assert first.counts
    assert not first.changed
    ill = memory.observe(NOW + timedelta(seconds=10), "gpu-a", NodeHealth(False, health.TEMPERATURE, "hot"))
    assert (ill.counts, ill.changed, ill.reason) == (False, True, health.TEMPERATURE)
    assert ill.since == NOW + timedelta(seconds=10)
    still_ill = memory.observe(NOW + timedelta(seconds=20), "gpu-a", NodeHealth(False, health.TEMPERATURE))
    assert not still_ill.changed
    assert still_ill.since == NOW + timedelta(seconds=10)
    cooled = NOW + timedelta(seconds=30)
    recovered = memory.observe(cooled, "gpu-a", NodeHealth(True))
    assert (recovered.healthy, recovered.counts, recovered.changed) == (True, False, True)
    assert not memory.observe(cooled + timedelta(seconds=119), "gpu-a", NodeHealth(True)).counts
    assert memory.observe(cooled + timedelta(seconds=120), "gpu-a", NodeHealth(True)).counts
    # A relapse resets the clock.
    memory.observe(cooled + timedelta(seconds=130), "gpu-a", NodeHealth(False, health.XID))
    back = cooled + timedelta(seconds=140)
    assert not memory.observe(back, "gpu-a", NodeHealth(True)).counts


def test_a_new_leader_makes_a_node_with_the_unhealthy_taint_wait() -> None:
    memory = HealthMemory(HealthSettings(healthy_for_seconds=60))
    state = memory.observe(NOW, "gpu-a", NodeHealth(True), previously_unhealthy=True)
    assert (state.healthy, state.counts, state.changed) == (True, False, True)
    assert memory.observe(NOW + timedelta(seconds=60), "gpu-a", NodeHealth(True)).counts
    still = memory.observe(NOW, "gpu-b", NodeHealth(False, health.XID), previously_unhealthy=True)
    assert not still.changed


def test_retain_forgets_nodes_that_left() -> None:
    memory = HealthMemory(HealthSettings(healthy_for_seconds=60))
    memory.judge(NOW, node(), gpus({"xid": 79}))
    memory.retain([])
    assert memory.xid_seen("gpu-a") == {}
    assert memory.observe(NOW, "gpu-a", NodeHealth(True)).counts  # first seen again
    assert memory.findings(NOW, node(), gpus({"temperature_celsius": 90.0}))[0].since == NOW


def test_from_spec_defaults() -> None:
    settings = HealthSettings.from_spec({}, resource="nvidia.com/gpu")
    assert settings == HealthSettings()
    assert settings.max_temperature_celsius == 78.0
    assert settings.xid_lookback_seconds == 3600.0
    assert settings.ignored_xids == INFORMATIONAL_XIDS
    assert settings.fatal_xids == FATAL_XIDS
    assert settings.healthy_for_seconds == 120.0
    assert (settings.degrading_for_seconds, settings.max_non_fatal_share) == (600.0, 0.2)
    assert (settings.taint_key, settings.taint_effect) == (UNHEALTHY_TAINT_KEY, "NoSchedule")
    assert settings.exporter is None
    assert settings.interconnect is None
    assert HealthSettings.from_spec(None) == settings


def test_from_spec_reads_every_field() -> None:
    settings = HealthSettings.from_spec(
        {
            "dcgmExporter": {
                "namespace": "gpu-operator",
                "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
                "port": 9500,
                "path": "/m",
            },
            "interconnect": {
                "exporter": {"namespace": "vk", "selector": {"matchLabels": {"app": "ic"}}},
                "thresholds": {"ibSymbolErrorsPerSecond": 2},
            },
            "maxTemperatureCelsius": 80,
            "xidLookbackSeconds": 60,
            "ignoredXids": [13],
            "fatalXids": [79],
            "severity": {"Temperature": "Fatal", "Xid": "Informational", "RowRemapPending": "Degrading"},
            "degradingForSeconds": 30,
            "maxNonFatalShare": 0.25,
            "externalTaintPrefixes": ["nvidia.com/"],
            "externalConditions": ["GpuThermalWatch"],
            "healthyForSeconds": 5,
            "taint": {"key": "example.com/sick", "effect": "NoExecute"},
        },
        resource="amd.com/gpu",
    )
    assert settings.exporter is not None
    assert (settings.exporter.namespace, settings.exporter.port, settings.exporter.path) == (
        "gpu-operator",
        9500,
        "/m",
    )
    assert settings.interconnect is not None
    assert settings.interconnect.exporter.port == 9402
    assert settings.resource == "amd.com/gpu"
    assert settings.max_temperature_celsius == 80.0
    assert (settings.ignored_xids, settings.fatal_xids) == (frozenset({13}), frozenset({79}))
    assert [settings.xid_severity(xid) for xid in (13, 79, 48)] == [INFO, FATAL, INFO]
    assert settings.severity_of(health.TEMPERATURE) is FATAL
    assert settings.severity_of(health.ROW_REMAP_PENDING) is DEGRADING
    assert settings.severity_of(health.ROW_REMAP_FAILURE) is FATAL  # the default still
    assert (settings.degrading_for_seconds, settings.max_non_fatal_share) == (30.0, 0.25)
    assert settings.external_taint_prefixes == ("nvidia.com/",)
    assert settings.external_conditions == ("GpuThermalWatch",)
    assert settings.healthy_for_seconds == 5.0
    assert (settings.taint_key, settings.taint_effect) == ("example.com/sick", "NoExecute")


def test_the_deprecated_flags_still_work() -> None:
    settings = HealthSettings.from_spec({"rowRemapFailure": False, "allocatableBelowCapacity": False})
    assert settings.severity_of(health.ROW_REMAP_FAILURE) is INFO
    assert settings.severity_of(health.DEVICE_PLUGIN_UNHEALTHY) is INFO
    # true, as the CRD used to default them, changes nothing.
    assert HealthSettings.from_spec({"rowRemapFailure": True}).severity_of(health.ROW_REMAP_FAILURE) is FATAL


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"maxTemperatureCelsius": "hot"}, "maxTemperatureCelsius"),
        ({"xidLookbackSeconds": -1}, "xidLookbackSeconds"),
        ({"healthyForSeconds": True}, "healthyForSeconds"),
        ({"ignoredXids": [13, "79"]}, "ignoredXids"),
        ({"fatalXids": 79}, "fatalXids"),
        ({"fatalXids": [79, 13]}, r"fatalXids and spec\.health\.ignoredXids both name Xids \[13\]"),
        ({"rowRemapFailure": "yes"}, "rowRemapFailure"),
        (
            {"rowRemapFailure": False, "severity": {"RowRemapFailure": "Fatal"}},
            r"rowRemapFailure: false says what spec\.health\.severity\.RowRemapFailure says",
        ),
        ({"severity": {"Heat": "Fatal"}}, r"severity\.Heat is no signal"),
        ({"severity": {"Temperature": "fatal"}}, r"severity\.Temperature must be Fatal, Degrading or"),
        ({"severity": ["Temperature"]}, r"spec\.health\.severity must map"),
        ({"degradingForSeconds": -5}, "degradingForSeconds"),
        ({"maxNonFatalShare": 1.5}, r"maxNonFatalShare must be a share of the pool, 0\.\.1"),
        ({"maxNonFatalShare": "20%"}, "maxNonFatalShare"),
        ({"externalTaintPrefixes": "nvidia.com/"}, "externalTaintPrefixes"),
        ({"taint": {"key": "x", "effect": "Never"}}, "taint.effect"),
        ({"dcgmExporter": {"namespace": "gpu"}}, "dcgmExporter.selector"),
        ({"interconnect": {"thresholds": {}}}, r"interconnect\.exporter is required"),
        (
            {
                "interconnect": {
                    "exporter": {"namespace": "vk", "selector": {"matchLabels": {"a": "b"}}, "port": 0}
                }
            },
            r"interconnect\.exporter\.port",
        ),
        (
            {
                "interconnect": {
                    "exporter": {"namespace": "vk", "selector": {"matchLabels": {"a": "b"}}},
                    "thresholds": {"ibSymbolErrorsPerSecond": -1},
                }
            },
            r"interconnect\.thresholds\.ibSymbolErrorsPerSecond must be a rate",
        ),
        (
            {
                "interconnect": {
                    "exporter": {"namespace": "vk", "selector": {"matchLabels": {"a": "b"}}},
                    "thresholds": {"symbolErrors": 1},
                }
            },
            r"interconnect\.thresholds has unknown fields \['symbolErrors'\]",
        ),
        ({"maxTemperature": 80}, "unknown fields"),
    ],
)
def test_from_spec_names_the_wrong_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(HealthSettingsError, match=field):
        HealthSettings.from_spec(spec)


@pytest.mark.parametrize(
    "crd", ["manifests/crds/offloadpolicy.yaml", "charts/vk-provider/crds/offloadpolicy.yaml"]
)
def test_the_crd_s_health_defaults_are_the_code_s(crd: str) -> None:
    schema = yaml.safe_load((Path(__file__).parents[3] / crd).read_text())["spec"]["versions"][0]["schema"]
    fields = schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["health"]["properties"]
    assert frozenset(fields["ignoredXids"]["default"]) == DEFAULTS.ignored_xids
    assert frozenset(fields["fatalXids"]["default"]) == DEFAULTS.fatal_xids
    assert fields["degradingForSeconds"]["default"] == DEFAULTS.degrading_for_seconds
    assert fields["maxNonFatalShare"]["default"] == DEFAULTS.max_non_fatal_share
    assert set(fields["severity"]["properties"]) == set(DEFAULT_SEVERITIES)
    thresholds = fields["interconnect"]["properties"]["thresholds"]["properties"]
    assert set(thresholds) == set(THRESHOLD_FIELDS)
    assert fields["interconnect"]["properties"]["exporter"]["properties"]["port"]["default"] == 9402
    # No defaults inside severity: a deprecated flag given false must not clash with a default.
    assert all("default" not in field for field in fields["severity"]["properties"].values())
    assert "default" not in fields["rowRemapFailure"]
    assert "default" not in fields["allocatableBelowCapacity"]


def test_an_xid_no_gpu_reports_any_more_reads_the_same_on_every_pass() -> None:
    # Its finding names when it was seen, not how long ago: the policy's status is written only when
    # it changes, and a detail that ticked every pass would rewrite it every 2 s.
    seen = {79: NOW - timedelta(seconds=30)}
    first = find(NOW, node(), gpus(), seen, DEFAULTS)
    later = find(NOW + timedelta(seconds=20), node(), gpus(), seen, DEFAULTS)
    assert [f.detail for f in first] == [f.detail for f in later]
    assert first[0].detail == "Xid 79 (fatal: GPU fallen off the bus) seen at " + (
        (NOW - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
