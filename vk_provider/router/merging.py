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
  supervisor's own series beside them, read and summed as lines of text (`families_of`). `_created`
  series are dropped: a sum of creation times means nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from vk_provider.router.sidecounts import value_text
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


@dataclasses.dataclass(eq=False)
class ExposedFamily:
    """One metric family of a text exposition, as lines: its `# HELP`/`# TYPE` lines as written, and
    each sample's value by its series (the sample's name and labels, as written)."""

    header: str
    kind: str
    samples: dict[str, float]

    @property
    def cumulative(self) -> bool:
        return self.kind in CUMULATIVE_TYPES


Families = dict[str, ExposedFamily]
"""Families by name (a counter's without `_total`), in the order first seen."""


def families_of(text: str, *, keep: Callable[[str], bool] | None = None) -> Families:
    """The families of an exposition prometheus_client wrote (version 0.0.4), read line by line.

    Why not prometheus_client's parser: it decodes every label of every sample, a few seconds per
    scrape of a router with a thousand routes, where summing needs each series only as a key
    (workers running the same code write the same series the same way). `keep` picks families by
    name; the `_created` companions of cumulative families are left out (a sum of creation times
    means nothing).
    """
    families: Families = {}
    cumulative: set[str] = set()
    help_line = ""
    current: ExposedFamily | None = None
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            help_line = line
            continue
        if line.startswith("# TYPE "):
            _, _, declared, kind = line.split(" ", 3)
            name = declared.removesuffix("_total") if kind == "counter" else declared
            if kind in CUMULATIVE_TYPES:
                cumulative.add(name)
            created = kind == "gauge" and declared.endswith("_created")
            if (created and declared.removesuffix("_created") in cumulative) or (
                keep is not None and not keep(name)
            ):
                current = None
            else:
                current = families.setdefault(name, ExposedFamily(f"{help_line}\n{line}\n", kind, {}))
            help_line = ""
            continue
        if line.startswith("#") or current is None:
            continue
        series, _, value = line.rpartition(" ")
        current.samples[series] = current.samples.get(series, 0.0) + float(value)
    return families


def summed(groups: Iterable[Families]) -> Families:
    """The families of all `groups`, each series summed over the groups."""
    result: Families = {}
    for group in groups:
        for name, family in group.items():
            total = result.get(name)
            if total is None:
                result[name] = ExposedFamily(family.header, family.kind, dict(family.samples))
                continue
            samples = total.samples
            for series, value in family.samples.items():
                samples[series] = samples.get(series, 0.0) + value
    return result


def cumulative_only(families: Families) -> Families:
    return {name: family for name, family in families.items() if family.cumulative}


def exposition_of(*groups: Families) -> bytes:
    """The text exposition of the families of `groups`, one after the other, as prometheus_client
    writes it."""
    lines = []
    for families in groups:
        for family in families.values():
            lines.append(family.header)
            lines.extend(f"{series} {value_text(value)}\n" for series, value in family.samples.items())
    return "".join(lines).encode()
