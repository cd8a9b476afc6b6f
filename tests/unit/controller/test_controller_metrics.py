"""The controller's metrics: counters that start at 0 per Offload, per-Offload gauges that go with the
Offload (and with the leadership), the leader gauge and build_info."""

from __future__ import annotations

from typing import Any

import pytest

from vk_provider import __version__
from vk_provider._kube.events import EventRecorder
from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.controller.offloadseries import MIGRATION_ENDINGS
from vk_provider.controller.reconciler import Reconciler
from vk_provider.kit.kube import KubeApiError
from vk_provider.offload.names import offload_path
from vk_provider.offload.status import OffloadStatus, Phase

pytestmark = pytest.mark.unit

ENDED = "vk_provider_controller_migrations_ended_total"


def value(metrics: ControllerMetrics, series: str, /, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(series, labels)


def test_an_offload_s_counters_start_at_zero_for_every_ending_before_its_first_one() -> None:
    metrics = ControllerMetrics()
    metrics.offload_seen("team", "chat")
    for outcome, reason in MIGRATION_ENDINGS:
        assert value(metrics, ENDED, namespace="team", name="chat", outcome=outcome, reason=reason) == 0
    assert value(metrics, "vk_provider_controller_severe_rollbacks_total", namespace="team", name="chat") == 0
    for side in ("home", "away"):
        emergencies = "vk_provider_controller_emergency_migrations_total"
        assert value(metrics, emergencies, namespace="team", name="chat", lost_side=side) == 0
    # The first rollback is then an increase from 0 to 1, which increase() sees.
    metrics.migration_ended("team", "chat", "RolledBack", "GatesFailed")
    metrics.offload_seen("team", "chat")  # seen again: nothing is reset
    labels = {"namespace": "team", "name": "chat", "outcome": "RolledBack", "reason": "GatesFailed"}
    assert value(metrics, ENDED, **labels) == 1


def test_the_endings_cover_each_outcome_the_reconciler_reports() -> None:
    assert {outcome for outcome, _ in MIGRATION_ENDINGS} == {"Succeeded", "RolledBack", "Failed"}


def test_an_offload_s_gauges_follow_its_status() -> None:
    metrics = ControllerMetrics()
    status = OffloadStatus(phase=Phase.SHIFTING, away_weight=50, step_index=2, steps=(0, 25, 50, 100))
    metrics.offload_status("team", "chat", status)
    assert value(metrics, "vk_provider_controller_offload_away_weight", namespace="team", name="chat") == 50
    assert value(metrics, "vk_provider_controller_offload_step", namespace="team", name="chat") == 2
    phases = {
        phase.value: value(
            metrics, "vk_provider_controller_offload_phase", namespace="team", name="chat", phase=phase.value
        )
        for phase in Phase
    }
    assert phases == {phase.value: (1 if phase is Phase.SHIFTING else 0) for phase in Phase}
    metrics.offload_status("team", "chat", OffloadStatus())  # before its first status: nothing is 1
    labels = {"namespace": "team", "name": "chat"}
    assert value(metrics, "vk_provider_controller_offload_phase", **labels, phase="Shifting") == 0
    assert value(metrics, "vk_provider_controller_offload_away_weight", **labels) == 0


def test_a_deleted_offload_s_gauges_go_and_its_counters_stay() -> None:
    metrics = ControllerMetrics()
    metrics.offload_seen("team", "chat")
    metrics.offload_status("team", "chat", OffloadStatus(phase=Phase.IDLE, away_weight=100))
    metrics.offload_status("team", "embed", OffloadStatus(phase=Phase.IDLE, away_weight=0))
    metrics.migration_ended("team", "chat", "Succeeded", "Succeeded")
    metrics.offload_gone("team", "chat")
    metrics.offload_gone("team", "never-seen")  # nothing to drop: no error
    text = metrics.exposition().decode()
    assert 'offload_away_weight{name="chat"' not in text
    assert 'offload_phase{name="chat"' not in text
    assert 'offload_step{name="chat"' not in text
    assert 'offload_away_weight{name="embed",namespace="team"} 0.0' in text
    labels = {"namespace": "team", "name": "chat", "outcome": "Succeeded", "reason": "Succeeded"}
    assert value(metrics, ENDED, **labels) == 1


def test_a_replica_that_stops_leading_exports_no_offload_gauges() -> None:
    metrics = ControllerMetrics()
    metrics.offload_status("team", "chat", OffloadStatus(phase=Phase.IDLE, away_weight=100))
    metrics.forget_offloads()
    samples = [line for line in metrics.exposition().decode().splitlines() if not line.startswith("#")]
    assert [line for line in samples if line.startswith("vk_provider_controller_offload_")] == []


def test_the_leader_gauge_is_read_from_the_elector_at_each_scrape() -> None:
    metrics = ControllerMetrics()
    assert value(metrics, "vk_provider_controller_leader") == 0
    leading = [False]
    metrics.set_leader_source(lambda: leading[0])
    assert value(metrics, "vk_provider_controller_leader") == 0
    leading[0] = True
    assert value(metrics, "vk_provider_controller_leader") == 1


def test_build_info_carries_the_version() -> None:
    assert value(ControllerMetrics(), "vk_provider_build_info", version=__version__) == 1


class OneOffload:
    """An apiserver holding at most one Offload (or none), recording the status patches."""

    def __init__(self, offload: dict[str, Any] | None) -> None:
        self.offload = offload
        self.patches: list[tuple[str, Any]] = []

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        if self.offload is None or path != offload_path("team", "chat"):
            raise KubeApiError(404, "NotFound", path)
        return self.offload

    async def patch(self, path: str, body: Any, **_: Any) -> dict[str, Any]:
        self.patches.append((path, body))
        return {}


def reconciler(api: OneOffload, metrics: ControllerMetrics) -> Reconciler:
    events = EventRecorder(api, host="test")  # type: ignore[arg-type]
    return Reconciler(api, data_planes=None, events=events, metrics=metrics)  # type: ignore[arg-type]


async def test_the_reconciler_exports_an_offload_it_reads_and_forgets_it_once_deleted() -> None:
    metrics = ControllerMetrics()
    # Invalid as written (no spec): the pass stops after reading it, having exported its status.
    offload = {
        "metadata": {"namespace": "team", "name": "chat", "uid": "u", "generation": 1},
        "status": {"phase": "RolledBack", "awayWeight": 25, "stepIndex": 1},
    }
    api = OneOffload(offload)
    assert await reconciler(api, metrics).reconcile("team", "chat") is None
    assert api.patches, "the invalid spec is reported on the Offload"
    labels = {"namespace": "team", "name": "chat"}
    assert value(metrics, "vk_provider_controller_offload_away_weight", **labels) == 25
    assert value(metrics, "vk_provider_controller_offload_phase", **labels, phase="RolledBack") == 1
    assert value(metrics, ENDED, **labels, outcome="RolledBack", reason="GatesFailed") == 0
    api.offload = None
    await reconciler(api, metrics).reconcile("team", "chat")
    assert value(metrics, "vk_provider_controller_offload_away_weight", **labels) is None
    assert value(metrics, ENDED, **labels, outcome="RolledBack", reason="GatesFailed") == 0


def test_a_spill_over_offload_s_sides_split_and_cost_are_gauges_gone_with_spill_over() -> None:
    metrics = ControllerMetrics()
    spill = {
        "homeReplicas": 2,
        "homeReadyReplicas": 2,
        "awayReplicas": 3,
        "awayReadyReplicas": 1,
        "capacityWeight": 33,
        "awayCostPerHour": 0.68,
    }
    metrics.offload_status("team", "chat", OffloadStatus(away_weight=25, spill_over=spill))
    replicas = "vk_provider_controller_offload_replicas"
    figures = {
        (side, ready): value(metrics, replicas, namespace="team", name="chat", side=side, ready=ready)
        for side in ("home", "away")
        for ready in ("true", "false")
    }
    assert figures == {("home", "true"): 2, ("home", "false"): 0, ("away", "true"): 1, ("away", "false"): 2}
    labels = {"namespace": "team", "name": "chat"}
    assert value(metrics, "vk_provider_controller_offload_capacity_weight", **labels) == 33
    assert value(metrics, "vk_provider_controller_offload_away_cost_per_hour_usd", **labels) == 0.68
    metrics.offload_status("team", "chat", OffloadStatus(away_weight=0))  # spec.spillOver removed
    assert value(metrics, "vk_provider_controller_offload_capacity_weight", **labels) is None
    assert value(metrics, replicas, namespace="team", name="chat", side="home", ready="true") is None


def test_the_away_replicas_kept_warm_are_gauges_gone_with_status_warm() -> None:
    metrics = ControllerMetrics()
    warm = {"replicas": 2, "ready": 1, "reason": "WarmUp", "until": "2026-12-07T03:00:00Z"}
    metrics.offload_status("team", "chat", OffloadStatus(away_weight=0, warm=warm))
    series = "vk_provider_offload_away_warm_replicas"
    assert value(metrics, series, namespace="team", offload="chat", state="wanted") == 2
    assert value(metrics, series, namespace="team", offload="chat", state="ready") == 1
    metrics.offload_status("team", "chat", OffloadStatus(away_weight=50))  # a migration runs
    assert value(metrics, series, namespace="team", offload="chat", state="wanted") is None
    metrics.offload_status("team", "chat", OffloadStatus(away_weight=0, warm=warm))
    metrics.offload_gone("team", "chat")
    assert value(metrics, series, namespace="team", offload="chat", state="ready") is None


def test_an_ending_outside_the_known_list_gets_its_own_series() -> None:
    metrics = ControllerMetrics()
    metrics.offload_seen("team", "chat")
    metrics.migration_ended("team", "chat", "Failed", "SomethingNew")
    metrics.emergency_migration("team", "chat", "home")
    metrics.severe_rollback("team", "chat")
    labels = {"namespace": "team", "name": "chat"}
    assert value(metrics, ENDED, **labels, outcome="Failed", reason="SomethingNew") == 1
    assert (
        value(metrics, "vk_provider_controller_emergency_migrations_total", **labels, lost_side="home") == 1
    )
    assert (
        value(metrics, "vk_provider_controller_emergency_migrations_total", **labels, lost_side="away") == 0
    )
    assert value(metrics, "vk_provider_controller_severe_rollbacks_total", **labels) == 1
    created = value(metrics, "vk_provider_controller_severe_rollbacks_created", **labels)
    assert created is not None  # rate() and increase() see when the series began
    assert created > 0
