"""What the controller's own metrics say about a wave: how long Offloads waited for a worker, how
long each pass took, and how long its requests waited on its API budget.

A step that lands late either waited in the work queue (too few workers for the passes due) or
spent its time inside the pass (router answers, apiserver writes paced by the client's budget); the
two histograms and the budget's wait counter, read before and after the wave, tell which.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from vk_provider.controller.gates import quantile_seconds
from vk_provider.controller.metrics import NAMESPACE

QUEUE_WAIT = f"{NAMESPACE}_queue_wait_seconds"
PASS = f"{NAMESPACE}_pass_seconds"
API_WAIT = f"{NAMESPACE}_api_wait_seconds"
DEPTH = f"{NAMESPACE}_queue_depth"
READING_SERIES = (
    *(f"{name}_{part}" for name in (QUEUE_WAIT, PASS) for part in ("bucket", "sum")),
    f"{API_WAIT}_total",
)
"""The series a `QueueReading` reads, to ask the controller for those alone."""
DEPTH_SERIES = (DEPTH,)


@dataclasses.dataclass(frozen=True)
class QueueReading:
    """Cumulative counts at one scrape."""

    buckets: dict[str, dict[float, float]]
    """Histogram name -> upper bound -> cumulative count."""
    sums: dict[str, float]
    api_wait_seconds: float

    @classmethod
    def parse(cls, text: str) -> QueueReading:
        buckets: dict[str, dict[float, float]] = {QUEUE_WAIT: {}, PASS: {}}
        sums: dict[str, float] = {}
        api_wait = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.endswith("_bucket") and sample.name[: -len("_bucket")] in buckets:
                    bound = float(sample.labels["le"])
                    buckets[sample.name[: -len("_bucket")]][bound] = sample.value
                elif sample.name.endswith("_sum") and sample.name[: -len("_sum")] in buckets:
                    sums[sample.name[: -len("_sum")]] = sample.value
                elif sample.name == f"{API_WAIT}_total":
                    api_wait += sample.value
        return cls(buckets, sums, api_wait)


def _histogram(before: QueueReading, after: QueueReading, name: str) -> dict[str, Any]:
    bounds = sorted(after.buckets[name])
    buckets = tuple(
        (bound, after.buckets[name][bound] - before.buckets[name].get(bound, 0.0)) for bound in bounds
    )
    count = buckets[-1][1] if buckets else 0.0
    total = after.sums.get(name, 0.0) - before.sums.get(name, 0.0)
    return {
        "count": int(count),
        "mean": total / count if count else None,
        "p50": quantile_seconds(buckets, 0.5),
        "p99": quantile_seconds(buckets, 0.99),
    }


def between(before: QueueReading, after: QueueReading, *, max_depth: int) -> dict[str, Any]:
    """The wave's figures: queue wait and pass length (count, mean, p50, p99 in seconds), the API
    budget's wait in seconds, and the deepest queue seen."""
    return {
        "queue_wait_seconds": _histogram(before, after, QUEUE_WAIT),
        "pass_seconds": _histogram(before, after, PASS),
        "api_budget_wait_seconds": after.api_wait_seconds - before.api_wait_seconds,
        "max_queue_depth": max_depth,
    }


def depth(text: str) -> int:
    for family in text_string_to_metric_families(text):
        if family.name == DEPTH:
            return int(family.samples[0].value)
    return 0
