"""One router's `/-/status` and `/-/metrics` from those of its worker processes.

- `/-/status`: the migration controller counts a weight as applied when every router reports it, so
  a router made of N workers must report each route as its LEAST advanced worker serves it. Each
  route's entry comes from the worker with the oldest table (numbered by the supervisor), which is
  also the lowest generation any worker serves; the table's number decides rather than the
  generation because a weight change is written to the Offload's status, which leaves the
  generation as it was. A route missing from any worker is left out: not yet applied (or not any
  more). Usable endpoints are the fewest any worker can use (each worker ejects endpoints on its own
  failed connections).
- `/-/metrics`: the workers' series summed sample by sample (counters, histogram buckets), with the
  supervisor's own series beside them. `_created` series are dropped: a sum of creation times means
  nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from vk_provider.router.workerprotocol import WorkerStatus

ENDPOINT_COUNT_MERGES: dict[str, Callable[[Iterable[int]], int]] = {
    "usable": min,  # what every worker can use: the controller waits for enough usable endpoints
    "ejected": max,  # ejected by some worker (each worker ejects on its own failed connections)
    "outstanding": sum,  # requests in flight in the whole router
}
"""How the per-side endpoint counts of the workers combine; the others (`total`, `terminating`)
describe the table and come from the oldest table's entry."""


def merged_status(
    statuses: Sequence[WorkerStatus], *, active_checks: dict[str, Any], table: int
) -> dict[str, Any]:
    """One router's `/-/status` from its workers' (see the module's docstring for why so)."""
    oldest_first = sorted(statuses, key=lambda status: status.sequence)
    routes_by_worker = [
        {(route["namespace"], route["name"]): route for route in status.document.get("routes") or ()}
        for status in oldest_first
    ]
    routes = []
    for key, entry in (routes_by_worker[0] if routes_by_worker else {}).items():
        entries = [served.get(key) for served in routes_by_worker]
        if any(other is None for other in entries):
            continue  # some worker does not serve it yet (or any more): not applied
        counts = [other["endpoints"] for other in entries if other is not None]
        routes.append({**entry, "endpoints": merged_endpoint_counts(counts)})
    return {
        "routes": routes,
        "active_checks": active_checks,
        "table": table,
        "workers": [
            {
                "slot": status.slot,
                "pid": status.pid,
                "table": status.sequence,
                "in_flight": status.in_flight,
                "requests": status.requests,
            }
            for status in sorted(statuses, key=lambda status: status.slot)
        ],
    }


def merged_endpoint_counts(
    per_worker: Sequence[dict[str, dict[str, int]]],
) -> dict[str, dict[str, int]]:
    """Per side, each count combined by `ENDPOINT_COUNT_MERGES`; the first (oldest table's) entry
    gives the rest."""
    first = per_worker[0]
    return {
        side: {
            name: (
                merge(counts.get(side, {}).get(name, 0) for counts in per_worker)
                if (merge := ENDPOINT_COUNT_MERGES.get(name)) is not None
                else value
            )
            for name, value in first[side].items()
        }
        for side in first
    }


CUMULATIVE_TYPES = frozenset({"counter", "histogram", "summary"})


def parsed_families(text: str) -> list[Metric]:
    """An exposition's families without the `_created` companions of its cumulative ones."""
    families = list(text_string_to_metric_families(text))
    cumulative = {family.name for family in families if family.type in CUMULATIVE_TYPES}
    return [
        family
        for family in families
        if not (family.type == "gauge" and family.name.removesuffix("_created") in cumulative)
    ]


def summed(groups: Iterable[Iterable[Metric]]) -> list[Metric]:
    """The families of all `groups`, each sample (name and labels) summed over the groups."""
    kinds: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for group in groups:
        for family in group:
            if family.name not in kinds:
                kinds[family.name] = family
                values[family.name] = {}
            samples = values[family.name]
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                samples[key] = samples.get(key, 0.0) + sample.value
    result = []
    for name, kind in kinds.items():
        family = Metric(name, kind.documentation, kind.type)
        for (sample_name, labels), value in values[name].items():
            family.add_sample(sample_name, dict(labels), value)
        result.append(family)
    return result


class _Families(Collector):
    def __init__(self, families: Sequence[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return iter(self._families)


def exposition_of(families: Sequence[Metric]) -> bytes:
    """The text exposition of `families`, as prometheus_client writes any registry's."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)
