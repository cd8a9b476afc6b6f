"""The daemon's own metrics: what the node records, read back from its private registry."""

from __future__ import annotations

import pytest

from tests.unit.kit.test_apibudget import FakeClock
from vk_provider import __version__
from vk_provider.errors import TemporaryProviderError
from vk_provider.kit.apibudget import HEARTBEAT, WORKLOAD, ApiBudget
from vk_provider.node.metrics import DaemonMetrics


def value(metrics: DaemonMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_queue_depth_is_read_from_its_source_at_each_scrape() -> None:
    metrics = DaemonMetrics()
    assert value(metrics, "vk_provider_pod_queue_depth") == 0
    queue = ["a", "b"]
    metrics.set_queue_depth_source(lambda: len(queue))
    assert value(metrics, "vk_provider_pod_queue_depth") == 2
    queue.append("c")
    assert value(metrics, "vk_provider_pod_queue_depth") == 3


def test_reconciles_are_timed_and_counted_by_result() -> None:
    metrics = DaemonMetrics()
    assert value(metrics, "vk_provider_reconciles_total", result="failure") == 0
    metrics.observe_reconcile(0.25, ok=True)
    metrics.observe_reconcile(2.0, ok=False)
    metrics.observe_reconcile(0.5, ok=True)
    assert value(metrics, "vk_provider_reconciles_total", result="success") == 2
    assert value(metrics, "vk_provider_reconciles_total", result="failure") == 1
    assert value(metrics, "vk_provider_reconcile_duration_seconds_count") == 3
    assert value(metrics, "vk_provider_reconcile_duration_seconds_sum") == 2.75


async def test_a_provider_call_is_timed_by_operation() -> None:
    metrics = DaemonMetrics()
    async with metrics.time_provider_call("create"):
        pass
    assert value(metrics, "vk_provider_provider_call_duration_seconds_count", operation="create") == 1
    assert value(metrics, "vk_provider_provider_call_errors_total", operation="create", error="X") is None


async def test_a_failing_provider_call_is_timed_counted_by_error_type_and_reraised() -> None:
    metrics = DaemonMetrics()
    with pytest.raises(TemporaryProviderError):
        async with metrics.time_provider_call("delete"):
            raise TemporaryProviderError("busy")
    errors = value(
        metrics, "vk_provider_provider_call_errors_total", operation="delete", error="TemporaryProviderError"
    )
    assert errors == 1
    assert value(metrics, "vk_provider_provider_call_duration_seconds_count", operation="delete") == 1


def test_provider_availability_is_one_or_zero() -> None:
    metrics = DaemonMetrics()
    metrics.set_provider_available(True)
    assert value(metrics, "vk_provider_provider_available") == 1
    metrics.set_provider_available(False)
    assert value(metrics, "vk_provider_provider_available") == 0


def test_two_daemons_in_one_process_keep_separate_metrics() -> None:
    first, second = DaemonMetrics(), DaemonMetrics()
    first.observe_reconcile(0.1, ok=True)
    assert value(first, "vk_provider_reconciles_total", result="success") == 1
    assert value(second, "vk_provider_reconciles_total", result="success") == 0


def test_the_exposition_is_prometheus_text_with_help_and_type() -> None:
    text = DaemonMetrics().exposition().decode()
    for name, kind in [
        ("vk_provider_pod_queue_depth", "gauge"),
        ("vk_provider_reconcile_duration_seconds", "histogram"),
        ("vk_provider_reconciles_total", "counter"),
        ("vk_provider_provider_call_duration_seconds", "histogram"),
        ("vk_provider_provider_call_errors_total", "counter"),
        ("vk_provider_provider_available", "gauge"),
    ]:
        assert f"# TYPE {name} {kind}\n" in text
        assert f"# HELP {name} " in text


async def test_the_api_clients_pacing_is_read_from_its_budget_at_each_scrape() -> None:
    clock = FakeClock()
    budget = ApiBudget(clock=clock)
    metrics = DaemonMetrics()
    metrics.set_api_budget_source(budget)
    assert value(metrics, "vk_provider_api_throttled_total", **{"class": WORKLOAD}) == 0
    assert value(metrics, "vk_provider_api_pace_qps", **{"class": WORKLOAD}) == 0  # unpaced
    for _ in range(40):  # 40 requests within a second, then the apiserver says 429, Retry-After 2
        await budget.acquire(WORKLOAD)
        clock.time += 0.02
    budget.throttle(WORKLOAD, 2.0)
    await budget.acquire(WORKLOAD)
    assert value(metrics, "vk_provider_api_throttled_total", **{"class": WORKLOAD}) == 1
    pace = value(metrics, "vk_provider_api_pace_qps", **{"class": WORKLOAD})
    assert pace is not None
    assert 1 <= pace < 40
    waited = value(metrics, "vk_provider_api_wait_seconds_total", **{"class": WORKLOAD})
    assert waited is not None
    assert waited >= 2.0
    assert value(metrics, "vk_provider_api_throttled_total", **{"class": HEARTBEAT}) == 0


def test_refusals_that_name_no_resource_start_at_zero() -> None:
    """So that `increase()` sees the first OutOfBudget refusal: a series that first appears at 1 has
    no increase, and the alert on it would never fire."""
    metrics = DaemonMetrics()
    refusals = "vk_provider_pod_admission_refusals_total"
    assert value(metrics, refusals, reason="OutOfBudget", check="spend-ceiling") == 0
    assert value(metrics, refusals, reason="OutOfBudget", check="pods-ceiling") == 0
    assert value(metrics, refusals, reason="InvalidPlacement", check="placement") == 0
    metrics.count_admission_refusal("OutOfBudget", "spend-ceiling")
    assert value(metrics, refusals, reason="OutOfBudget", check="spend-ceiling") == 1


def test_build_info_carries_the_version() -> None:
    assert value(DaemonMetrics(), "vk_provider_build_info", version=__version__) == 1


def test_the_node_s_name_is_an_info_series_for_dashboards() -> None:
    assert value(DaemonMetrics("gpu-burst"), "vk_provider_node_info", node="gpu-burst") == 1
    assert "vk_provider_node_info" not in DaemonMetrics().exposition().decode()  # no name, no series
