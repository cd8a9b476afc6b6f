"""Health gates: router metrics in, verdict out."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from vk_provider.controller.gates import (
    SideSample,
    judge,
    judge_severe,
    parse_side_sample,
    quantile_seconds,
    total,
)
from vk_provider.offload.plan import Verdict
from vk_provider.offload.spec import Gates, SevereGate
from vk_provider.router.metrics import RouterMetrics
from vk_provider.router.table import Side


def exposition(record: list[tuple[Side, int, float]], errors: Sequence[str] = ()) -> str:
    metrics = RouterMetrics()
    for side, status, seconds in record:
        metrics.response("ns", "chat", side, status, seconds)
    for reason in errors:
        metrics.error("ns", "chat", "home", reason)
    return metrics.exposition().decode()


def test_a_sample_counts_only_its_route_and_side() -> None:
    served = [("home", 200, 0.01), ("home", 503, 0.02), ("away", 200, 0.01)]
    text = exposition(served, ["upstream", "connect"])
    home = parse_side_sample(text, "ns", "chat", "home")
    assert (home.responses, home.server_errors, home.proxy_errors) == (2, 1, 1)
    away = parse_side_sample(text, "ns", "chat", "away")
    assert (away.responses, away.server_errors, away.proxy_errors) == (1, 0, 0)
    assert parse_side_sample(text, "ns", "other", "home") == SideSample(buckets=())


def test_the_interval_is_the_difference_and_a_router_restart_voids_it() -> None:
    before = parse_side_sample(exposition([("home", 200, 0.01)] * 5), "ns", "chat", "home")
    after = parse_side_sample(exposition([("home", 200, 0.01)] * 12), "ns", "chat", "home")
    interval = after.minus(before)
    assert interval is not None
    assert interval.requests == 7
    assert before.minus(after) is None  # counters went down: a router restarted
    assert judge(None, Gates(), "home").verdict is Verdict.NOT_ENOUGH_DATA


def test_samples_from_several_routers_add_up() -> None:
    one = parse_side_sample(exposition([("away", 200, 0.01)] * 3), "ns", "chat", "away")
    two = parse_side_sample(exposition([("away", 500, 0.01)] * 2), "ns", "chat", "away")
    summed = total([one, two])
    assert (summed.requests, summed.failures) == (5, 2)
    assert summed.buckets[-1] == (float("inf"), 5)


def test_p99_is_interpolated_within_its_bucket() -> None:
    buckets = ((0.1, 0.0), (0.2, 100.0), (float("inf"), 100.0))
    assert quantile_seconds(buckets, 0.99) == pytest.approx(0.199)
    assert quantile_seconds(((1.0, 0.0), (float("inf"), 10.0)), 0.99) == 1.0  # beyond the last bound
    assert quantile_seconds((), 0.99) is None


def test_verdicts() -> None:
    gates = Gates(max_error_rate_percent=1.0, max_p99_latency_ms=100, min_requests_per_interval=10)
    healthy = parse_side_sample(exposition([("home", 200, 0.005)] * 200), "ns", "chat", "home")
    assert judge(healthy, gates, "home").verdict is Verdict.HEALTHY
    erroring = parse_side_sample(
        exposition([("home", 200, 0.005)] * 95 + [("home", 500, 0.005)] * 5), "ns", "chat", "home"
    )
    judgement = judge(erroring, gates, "home")
    assert judgement.verdict is Verdict.UNHEALTHY
    assert "5.00% errors" in judgement.message
    assert "error rate above 1%" in judgement.message
    slow = parse_side_sample(exposition([("home", 200, 0.4)] * 50), "ns", "chat", "home")
    assert "p99 above 100 ms" in judge(slow, gates, "home").message
    few = parse_side_sample(exposition([("home", 500, 0.4)] * 3), "ns", "chat", "home")
    assert judge(few, gates, "home").verdict is Verdict.NOT_ENOUGH_DATA
    no_minimum = Gates(min_requests_per_interval=0)
    assert judge(SideSample(), no_minimum, "home").verdict is Verdict.HEALTHY


def test_a_severe_error_rate_over_enough_requests_is_severe_whatever_the_tolerance() -> None:
    gates = Gates(max_error_rate_percent=1.0)
    bad = SideSample(responses=20, server_errors=10)
    assert judge(bad, gates, "away").verdict is Verdict.SEVERE
    assert judge_severe(bad, gates.severe, "away") is not None
    # Too few requests to call it severe: the tolerant gates judge it (unhealthy, held).
    few = SideSample(responses=19, server_errors=19)
    assert judge_severe(few, gates.severe, "away") is None
    assert judge(few, gates, "away").verdict is Verdict.UNHEALTHY
    # Below the severe rate: tolerant path.
    poor = SideSample(responses=100, server_errors=49)
    assert judge(poor, gates, "away").verdict is Verdict.UNHEALTHY
    # Turned off: never severe.
    off = Gates(severe=SevereGate(enabled=False))
    assert judge(bad, off, "away").verdict is Verdict.UNHEALTHY
    assert judge_severe(None, gates.severe, "away") is None
