"""Health gates: router metrics in, verdict out."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from vk_provider.controller.gates import (
    SideSample,
    judge,
    judge_severe,
    quantile_seconds,
    total,
)
from vk_provider.controller.sideindex import parse_side_sample
from vk_provider.offload.plan import Verdict
from vk_provider.offload.spec import Gates, SevereGate
from vk_provider.router.metrics import RouterMetrics
from vk_provider.routetable.table import Side


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
    assert (summed.requests, summed.failures(["5xx"])) == (5, 2)
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


def served(ok: int, failed: int, status_class: str = "5xx") -> SideSample:
    return SideSample(responses=ok + failed, by_class=(("2xx", ok), (status_class, failed)))


def test_a_severe_error_rate_over_enough_requests_is_severe_whatever_the_tolerance() -> None:
    gates = Gates(max_error_rate_percent=1.0)
    bad = served(10, 10)
    assert judge(bad, gates, "away").verdict is Verdict.SEVERE
    assert judge_severe(bad, gates, "away") is not None
    # Too few requests to call it severe: the tolerant gates judge it (unhealthy, held).
    few = served(0, 19)
    assert judge_severe(few, gates, "away") is None
    assert judge(few, gates, "away").verdict is Verdict.UNHEALTHY
    # Below the severe rate: tolerant path.
    poor = served(51, 49)
    assert judge(poor, gates, "away").verdict is Verdict.UNHEALTHY
    # Turned off: never severe.
    off = Gates(severe=SevereGate(enabled=False))
    assert judge(bad, off, "away").verdict is Verdict.UNHEALTHY
    assert judge_severe(None, gates, "away") is None


def test_errors_a_client_provokes_on_both_sides_alike_are_neither_severe_nor_unhealthy() -> None:
    gates = Gates()  # the defaults: 1% at most, severe at 50%; compared with the other side
    # 40 provoked 500s in a 5 s window beside 20 good requests, split 50/50 as a router would.
    away, home = served(10, 20), served(10, 20)
    assert judge_severe(away, gates, "away", home) is None
    assert judge_severe(away, gates, "away") is not None  # judged alone, as before: severe
    # Over an interval: a chance difference of a few points between the sides is no failure.
    away, home = served(60, 140), served(70, 130)
    judgement = judge(away, gates, "away", home)
    assert judgement.verdict is Verdict.HEALTHY, judgement.message
    assert judgement.baseline_error_rate_percent == pytest.approx(65.0)
    assert "home side 65.00% over 200" in judgement.message
    assert judge(away, gates, "away").verdict is Verdict.SEVERE  # judged alone, as before


def test_a_truly_failing_side_stands_out_from_its_baseline() -> None:
    gates = Gates()
    # Everything fails away, while home fails only the quarter of its requests a client provoked.
    severe = judge_severe(served(0, 100), gates, "away", served(75, 25))
    assert severe is not None
    assert "fails more than 50% of what the home side serves" in severe.message
    # A client provoking two thirds of the requests does not soften the severe gate: away fails
    # all that home serves, and that is what is measured (the noise the client adds takes more
    # requests to see through: 150 a side here, 30 a side would still be chance).
    assert judge_severe(served(0, 150), gates, "away", served(50, 100)) is not None
    assert judge_severe(served(0, 30), gates, "away", served(10, 20)) is None
    # A few points worse than home, over enough requests: unhealthy, not severe.
    judgement = judge(served(900, 100), gates, "away", served(990, 10))
    assert judgement.verdict is Verdict.UNHEALTHY
    assert "fails more than 1% of what the home side serves" in judgement.message
    # The same few points, as home direction: the judged side is home, the baseline away.
    assert judge(served(900, 100), gates, "home", served(990, 10)).verdict is Verdict.UNHEALTHY


def test_a_baseline_too_small_to_be_fair_leaves_the_absolute_limits_in_charge() -> None:
    gates = Gates(min_requests_per_interval=10)
    # 9 clean home requests are too few to compare with: the absolute 1% judges.
    judgement = judge(served(95, 5), gates, "away", served(9, 0))
    assert judgement.verdict is Verdict.UNHEALTHY
    assert judgement.baseline_error_rate_percent is None
    # With no home request at all, too.
    assert judge(served(95, 5), gates, "away", SideSample()).verdict is Verdict.UNHEALTHY
    # But a small baseline failing as much spares the judged side: the errors are both sides'.
    assert judge(served(95, 5), gates, "away", served(0, 9)).verdict is Verdict.HEALTHY
    # The severe window of a loaded machine: 20 away requests, 11 of them 500s a client provoked,
    # beside 19 home requests (under the minimum of 20) with 10 provoked: no severe rollback ...
    assert judge_severe(served(9, 11), gates, "away", served(9, 10)) is None
    # ... while an away side failing everything beside a small clean home still is severe.
    assert judge_severe(served(0, 20), gates, "away", served(15, 0)) is not None
    off = Gates(compare_with_other_side=False)
    assert judge(served(10, 20), off, "away", served(10, 20)).verdict is Verdict.SEVERE


def test_which_status_classes_count_is_configurable() -> None:
    rejected = served(90, 10, "4xx")
    assert judge(rejected, Gates(), "away").verdict is Verdict.HEALTHY  # 4xx: the client's, by default
    counting_4xx = Gates(error_statuses=("4xx", "5xx"))
    assert judge(rejected, counting_4xx, "away").verdict is Verdict.UNHEALTHY
    relay_failures = SideSample(responses=90, by_class=(("2xx", 90),), proxy_errors=10)
    assert relay_failures.failures(["5xx"]) == 10  # a failed relay always counts
