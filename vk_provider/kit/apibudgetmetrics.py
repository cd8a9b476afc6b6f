"""The API client's pacing as Prometheus metrics: its 429s, its pace and its waits, by request class.

The node daemon and the controller both publish it (each under its own prefix): a process that waits
on its own budget is slow for a reason no apiserver metric shows.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vk_provider.kit.apibudget import ApiBudget


class ApiBudgetCollector(Collector):
    """Reads the `ApiBudget` at scrape time: the request path only keeps plain counters, so watching
    the pace costs the process nothing between scrapes."""

    def __init__(self, budget: ApiBudget, namespace: str) -> None:
        self._budget = budget
        self._namespace = namespace

    def collect(self) -> Iterator[Metric]:
        throttled = CounterMetricFamily(
            f"{self._namespace}_api_throttled",
            "Requests the apiserver answered 429 (or 5xx with Retry-After), by request class.",
            labels=["class"],
        )
        waited = CounterMetricFamily(
            f"{self._namespace}_api_wait_seconds",
            "Time requests waited for their class's pace or Retry-After pause, by request class.",
            labels=["class"],
        )
        pace = GaugeMetricFamily(
            f"{self._namespace}_api_pace_qps",
            "The class's current pace in requests a second; 0 when unpaced (no 429 lately, no ceiling).",
            labels=["class"],
        )
        for name, limiter in self._budget.limiters.items():
            throttled.add_metric([name], limiter.throttled)
            waited.add_metric([name], limiter.waited_seconds)
            qps = limiter.qps
            pace.add_metric([name], 0.0 if math.isinf(qps) else qps)
        yield throttled
        yield waited
        yield pace
