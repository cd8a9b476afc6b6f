"""Judging a home GPU node's health, the memory of Xids and healthy time, and spec.health parsing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vk_provider.policy import health
from vk_provider.policy.dcgm import GpuSample
from vk_provider.policy.health import (
    HealthMemory,
    HealthSettings,
    HealthSettingsError,
    NodeHealth,
    judge_node,
)
from vk_provider.policy.names import POLICY_TAINTS_ANNOTATION, RESERVED_TAINT_KEY, UNHEALTHY_TAINT_KEY

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


@pytest.mark.parametrize(
    ("node_object", "samples", "xid_seen", "settings", "reason"),
    [
        (node(), gpus(), {}, DEFAULTS, None),
        (node(), None, {}, DEFAULTS, None),
        (node(), gpus({"temperature_celsius": 85.0}), {}, DEFAULTS, health.TEMPERATURE),
        (node(), gpus({"temperature_celsius": 78.0}), {}, DEFAULTS, None),  # the line itself is fine
        (node(), gpus({"xid": 79}), {}, DEFAULTS, health.XID),  # not remembered yet: new, so recent
        (node(), gpus({"xid": 79}), {79: NOW - timedelta(minutes=59)}, DEFAULTS, health.XID),
        (node(), gpus({"xid": 79}), {79: NOW - timedelta(minutes=61)}, DEFAULTS, None),  # outside lookback
        (node(), gpus(), {48: NOW - timedelta(minutes=5)}, DEFAULTS, health.XID),  # GPU reset since
        (node(), None, {48: NOW - timedelta(minutes=5)}, DEFAULTS, health.XID),  # exporter down, Xid stays
        (node(), gpus({"xid": 13}), {}, DEFAULTS, None),  # application error
        (node(), gpus({}, {"xid": 43}), {}, DEFAULTS, None),
        (node(), gpus({"xid": 13}), {}, HealthSettings(ignored_xids=frozenset()), health.XID),
        (node(), gpus({"row_remap_failure": True}), {}, DEFAULTS, health.ROW_REMAP_FAILURE),
        (node(), gpus({"row_remap_failure": True}), {}, HealthSettings(row_remap_failure=False), None),
        (node(allocatable="3"), gpus(), {}, DEFAULTS, health.DEVICE_PLUGIN_UNHEALTHY),
        (node(allocatable=None), None, {}, DEFAULTS, health.DEVICE_PLUGIN_UNHEALTHY),
        (node(allocatable="3"), gpus(), {}, HealthSettings(allocatable_below_capacity=False), None),
        (node(allocatable="3"), gpus(), {}, HealthSettings(resource="amd.com/gpu"), None),  # not the pool's
        (
            node(taints=[{"key": "nvidia.com/gpu-xid-error", "value": "true", "effect": "NoSchedule"}]),
            gpus(),
            {},
            HealthSettings(external_taint_prefixes=("nvidia.com/",)),
            health.EXTERNAL_TAINT,
        ),
        (
            node(taints=[{"key": "nvidia.com/gpu-xid-error", "value": "true", "effect": "NoSchedule"}]),
            gpus(),
            {},
            DEFAULTS,
            None,
        ),
        (
            node(conditions=[{"type": "GpuThermalWatch", "status": "True", "reason": "Hot"}]),
            gpus(),
            {},
            HealthSettings(external_conditions=("GpuThermalWatch",)),
            health.EXTERNAL_CONDITION,
        ),
        (
            node(conditions=[{"type": "GpuThermalWatch", "status": "False"}]),
            gpus(),
            {},
            HealthSettings(external_conditions=("GpuThermalWatch",)),
            None,
        ),
    ],
)
def test_judge_node(
    node_object: dict[str, Any],
    samples: list[GpuSample] | None,
    xid_seen: dict[int, datetime],
    settings: HealthSettings,
    reason: str | None,
) -> None:
    verdict = judge_node(NOW, node_object, samples, xid_seen, settings)
    assert verdict.reason == reason, verdict.detail
    assert verdict.healthy is (reason is None)


def test_the_policys_own_taints_are_not_external() -> None:
    """A prefix that covers the policy's own taints must not make its unhealthy taint self-sustaining."""
    taints = [
        {"key": UNHEALTHY_TAINT_KEY, "value": "Temperature", "effect": "NoSchedule"},
        {"key": RESERVED_TAINT_KEY, "value": "training", "effect": "NoSchedule"},
    ]
    settings = HealthSettings(external_taint_prefixes=("gpu.vk-provider.dev/",))
    tainted = node(taints=taints, policy_taints=[RESERVED_TAINT_KEY])
    assert judge_node(NOW, tainted, gpus(), {}, settings).healthy
    foreign = node(taints=[{"key": "gpu.vk-provider.dev/drained", "effect": "NoSchedule"}])
    assert judge_node(NOW, foreign, gpus(), {}, settings).reason == health.EXTERNAL_TAINT


def test_every_problem_is_in_the_detail_and_the_first_reason_wins() -> None:
    verdict = judge_node(
        NOW, node(allocatable="3"), gpus({"temperature_celsius": 85.0}, {"xid": 79}), {}, DEFAULTS
    )
    assert verdict.reason == health.XID
    assert "GPU 1 raised Xid 79" in verdict.detail
    assert "GPU 0 at 85 °C > 78 °C" in verdict.detail
    assert "allocatable 3 < capacity 4" in verdict.detail


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


def test_memory_ignores_application_xids() -> None:
    memory = HealthMemory(DEFAULTS)
    memory.note_samples(NOW, "gpu-a", gpus({"xid": 13}, {"xid": 45}))
    assert memory.xid_seen("gpu-a") == {}
    assert memory.judge(NOW, node(), gpus({"xid": 13})).healthy


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


def test_from_spec_defaults() -> None:
    settings = HealthSettings.from_spec({}, resource="nvidia.com/gpu")
    assert settings == HealthSettings()
    assert settings.max_temperature_celsius == 78.0
    assert settings.xid_lookback_seconds == 3600.0
    assert settings.ignored_xids == frozenset({13, 31, 43, 45, 68, 109})
    assert settings.healthy_for_seconds == 120.0
    assert (settings.taint_key, settings.taint_effect) == (UNHEALTHY_TAINT_KEY, "NoSchedule")
    assert settings.exporter is None
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
            "maxTemperatureCelsius": 80,
            "xidLookbackSeconds": 60,
            "ignoredXids": [13],
            "rowRemapFailure": False,
            "allocatableBelowCapacity": False,
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
    assert settings.resource == "amd.com/gpu"
    assert settings.max_temperature_celsius == 80.0
    assert settings.ignored_xids == frozenset({13})
    assert (settings.row_remap_failure, settings.allocatable_below_capacity) == (False, False)
    assert settings.external_taint_prefixes == ("nvidia.com/",)
    assert settings.external_conditions == ("GpuThermalWatch",)
    assert settings.healthy_for_seconds == 5.0
    assert (settings.taint_key, settings.taint_effect) == ("example.com/sick", "NoExecute")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"maxTemperatureCelsius": "hot"}, "maxTemperatureCelsius"),
        ({"xidLookbackSeconds": -1}, "xidLookbackSeconds"),
        ({"healthyForSeconds": True}, "healthyForSeconds"),
        ({"ignoredXids": [13, "79"]}, "ignoredXids"),
        ({"rowRemapFailure": "yes"}, "rowRemapFailure"),
        ({"externalTaintPrefixes": "nvidia.com/"}, "externalTaintPrefixes"),
        ({"taint": {"key": "x", "effect": "Never"}}, "taint.effect"),
        ({"dcgmExporter": {"namespace": "gpu"}}, "dcgmExporter.selector"),
        ({"maxTemperature": 80}, "unknown fields"),
    ],
)
def test_from_spec_names_the_wrong_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(HealthSettingsError, match=field):
        HealthSettings.from_spec(spec)
