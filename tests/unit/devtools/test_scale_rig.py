"""The scale rig's pure parts: who sent what, from the apiserver's counters, and a wave's step times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.unit.kit.test_apibudget import FakeClock
from vk_devtools.scale import attribution, controllerqueue
from vk_devtools.scale.rig import RigSettings, WaveTracker
from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.kit.apibudget import ApiBudget


def dispatched(schema: str, value: int, level: str = "workload-high") -> str:
    name = "apiserver_flowcontrol_dispatched_requests_total"
    return f'{name}{{flow_schema="{schema}",priority_level="{level}"}} {value}'


def served(verb: str, group: str, resource: str, subresource: str, value: int, *, code: str = "200") -> str:
    labels = f'code="{code}",group="{group}",resource="{resource}",subresource="{subresource}",verb="{verb}"'
    return f'apiserver_request_total{{{labels},version="v1"}} {value}'


METRICS = "\n".join(
    [
        "# TYPE apiserver_flowcontrol_dispatched_requests_total counter",
        dispatched("vk-scale-controller-get", 40),
        dispatched("vk-scale-controller-list", 10),
        dispatched("vk-scale-controller-watch", 7),
        dispatched("vk-scale-nodes-update", 3),
        dispatched("global-default", 999, "global-default"),
        dispatched("vk-scale-somebody-get", 5),
        served("GET", "apps", "deployments", "", 30),
        served("GET", "apps", "deployments", "", 2, code="404"),
        served("PATCH", "", "pods", "status", 6),
        served("GET", "", "", "/readyz", 50),
    ]
)


def test_dispatched_requests_are_the_rigs_users_by_verb_and_the_rest_by_resource() -> None:
    counters = attribution.parse(METRICS, at=10.0)

    assert counters.dispatched == {
        ("controller", "get"): 40,
        ("controller", "list"): 10,
        ("controller", "watch"): 7,
        ("nodes", "update"): 3,
    }
    assert counters.requests == {("GET", "deployments.apps"): 32, ("PATCH", "pods/status"): 6}


def test_rates_leave_watches_out_unless_asked() -> None:
    before = attribution.parse("", at=0.0)
    rates = attribution.parse(METRICS, at=10.0).rates_since(before)

    assert rates.component("controller") == pytest.approx(5.0)
    assert rates.component("controller", watches=True) == pytest.approx(5.7)
    assert rates.by_verb("nodes") == {"update": pytest.approx(0.3)}
    assert rates.by_resource() == {
        "GET deployments.apps": pytest.approx(3.2),
        "PATCH pods/status": pytest.approx(0.6),
    }


def test_a_later_step_counts_from_when_it_was_due_the_first_from_the_flip() -> None:
    sent_wall = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    tracker = WaveTracker({"svc-0000"}, sent=100.0, sent_wall=sent_wall)
    started_at_50 = (sent_wall + timedelta(seconds=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "targetPlacement": "away",
        "awayWeight": 50,
        "stepStartedAt": started_at_50,
        "phase": "Shifting",
    }

    tracker.saw_routes({"svc-0000": {"away_weight": 50}}, now=105.0)
    tracker.saw_offloads([{"metadata": {"name": "svc-0000"}, "status": status}], now=106.0)
    tracker.saw_routes({"svc-0000": {"away_weight": 100}}, now=111.0)
    tracker.saw_offloads(
        [{"metadata": {"name": "svc-0000"}, "status": {**status, "awayWeight": 100, "phase": "Succeeded"}}],
        now=112.0,
    )

    first, later = tracker.step_latencies()
    assert first == [5.0]
    assert later == [pytest.approx(11.0 - (6.0 + 2.0))]
    controller_part, router_part = tracker.later_step_parts()
    assert controller_part == [pytest.approx(12.0 - (6.0 + 2.0))]  # the status was seen at 12
    assert router_part == [0.0]  # the router's poll came first in that round: never negative
    assert tracker.done()
    assert tracker.report()["wave_seconds"] == 12.0


def test_filler_daemons_come_after_the_pool_and_away_daemons_and_hold_their_networks(tmp_path: Path) -> None:
    cidrs = [f"10.{index}.0.0/20" for index in range(6)]
    settings = RigSettings(
        tmp_path, "scale", cidrs, max_services=10, pool_daemons=2, pool_nodes=2, filler_daemons=3
    )
    assert list(settings.filler_daemon_indexes) == [3, 4, 5]  # after 2 pool daemons and 1 away daemon
    assert sum(settings.pod_addresses(index) for index in settings.filler_daemon_indexes) == 3 * 4094


def test_the_queue_readings_series_are_all_a_reading_takes() -> None:
    """The rig asks the controller for these series alone: read from them, a reading and the depth
    are what the whole exposition gives."""
    metrics = ControllerMetrics()
    metrics.set_api_budget_source(ApiBudget(clock=FakeClock()))
    metrics.set_queue_depth_source(lambda: 7)
    metrics.queue_waited(0.3)
    metrics.pass_took(0.02)
    metrics.offload_seen("ml", "chat")
    whole = metrics.exposition().decode()
    named = metrics.exposition(controllerqueue.READING_SERIES).decode()
    assert controllerqueue.QueueReading.parse(named) == controllerqueue.QueueReading.parse(whole)
    assert controllerqueue.QueueReading.parse(named).sums[controllerqueue.QUEUE_WAIT] == 0.3
    assert "api_wait_seconds_total" in named
    assert 'name="chat"' not in named
    assert controllerqueue.depth(metrics.exposition(controllerqueue.DEPTH_SERIES).decode()) == 7
