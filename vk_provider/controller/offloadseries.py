"""Every Offload's own series, kept as a few plain numbers and written out at each scrape.

Each Offload has nineteen series from the moment the controller sees it: its counters started at 0
for every ending (see `metrics`) and its away weight, step and phase. As prometheus-client children
(an object, a lock and a value each) they cost 13.9 KB per Offload, a quarter of the controller's
memory per Offload at a thousand of them (`bench/scale.py`); as numbers in one record per Offload,
rendered by this collector when Prometheus asks, they cost 0.6 KB (tracemalloc, 1,000 Offloads).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vk_provider.offload.status import Phase

MIGRATION_ENDINGS: tuple[tuple[str, str], ...] = (
    (Phase.SUCCEEDED.value, "Succeeded"),
    (Phase.SUCCEEDED.value, "EmergencyMigration"),
    (Phase.ROLLED_BACK.value, "GatesFailed"),
    (Phase.ROLLED_BACK.value, "Aborted"),
    (Phase.ROLLED_BACK.value, "SevereFailure"),
    (Phase.FAILED.value, "ProgressDeadlineExceeded"),
)
"""(outcome, reason) of every way the reconciler ends a migration (`Reconciler._decide`)."""
LOST_SIDES = ("home", "away")

Key = tuple[str, str]
"""(namespace, name)."""


@dataclasses.dataclass(slots=True)
class _Counts:
    created: float
    ended: dict[tuple[str, str], float] = dataclasses.field(default_factory=dict)
    """Endings that happened (the known ones without an entry are 0)."""
    emergencies: dict[str, float] = dataclasses.field(default_factory=dict)
    severe: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class _Status:
    away_weight: float
    step: float
    phase: str | None


class OffloadSeries(Collector):
    """The per-Offload counters (kept while the controller runs: they only grow) and gauges (kept
    while the Offload exists and this replica leads)."""

    def __init__(self, namespace: str) -> None:
        self._prefix = namespace
        self._counts: dict[Key, _Counts] = {}
        self._statuses: dict[Key, _Status] = {}

    def _counted(self, key: Key) -> _Counts:
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = _Counts(created=time.time())
        return counts

    def seen(self, namespace: str, name: str) -> None:
        self._counted((namespace, name))

    def migration_ended(self, namespace: str, name: str, outcome: str, reason: str) -> None:
        ended = self._counted((namespace, name)).ended
        ended[(outcome, reason)] = ended.get((outcome, reason), 0.0) + 1

    def emergency_migration(self, namespace: str, name: str, lost_side: str) -> None:
        emergencies = self._counted((namespace, name)).emergencies
        emergencies[lost_side] = emergencies.get(lost_side, 0.0) + 1

    def severe_rollback(self, namespace: str, name: str) -> None:
        self._counted((namespace, name)).severe += 1

    def status(self, namespace: str, name: str, away_weight: float, step: float, phase: str | None) -> None:
        self._statuses[(namespace, name)] = _Status(away_weight, step, phase)

    def forget_status(self, namespace: str, name: str) -> None:
        self._statuses.pop((namespace, name), None)

    def forget_statuses(self) -> None:
        self._statuses.clear()

    def collect(self) -> Iterator[Metric]:
        yield from self._counters()
        yield from self._gauges()

    def _counters(self) -> Iterator[Metric]:
        prefix = self._prefix
        emergencies = CounterMetricFamily(
            f"{prefix}_emergency_migrations",
            "Emergency migrations started because the serving side lost its endpoints, by the side lost.",
            labels=["namespace", "name", "lost_side"],
        )
        ended = CounterMetricFamily(
            f"{prefix}_migrations_ended",
            "Migrations that ended, by outcome (Succeeded, RolledBack, Failed) and reason (GatesFailed, "
            "Aborted, SevereFailure, ProgressDeadlineExceeded, ...).",
            labels=["namespace", "name", "outcome", "reason"],
        )
        severe = CounterMetricFamily(
            f"{prefix}_severe_rollbacks",
            "Migrations rolled back at once because the receiving side's error rate was severe.",
            labels=["namespace", "name"],
        )
        for (namespace, name), counts in self._counts.items():
            created = counts.created
            for side in dict.fromkeys((*LOST_SIDES, *counts.emergencies)):
                value = counts.emergencies.get(side, 0.0)
                emergencies.add_metric([namespace, name, side], value, created=created)
            for outcome, reason in dict.fromkeys((*MIGRATION_ENDINGS, *counts.ended)):
                value = counts.ended.get((outcome, reason), 0.0)
                ended.add_metric([namespace, name, outcome, reason], value, created=created)
            severe.add_metric([namespace, name], counts.severe, created=created)
        yield emergencies
        yield ended
        yield severe

    def _gauges(self) -> Iterator[Metric]:
        prefix = self._prefix
        weight = GaugeMetricFamily(
            f"{prefix}_offload_away_weight",
            "The Offload's status.awayWeight: the percentage of its requests routed away.",
            labels=["namespace", "name"],
        )
        phases = GaugeMetricFamily(
            f"{prefix}_offload_phase",
            "1 for the Offload's status.phase, 0 for every other phase (all 0 before its first status).",
            labels=["namespace", "name", "phase"],
        )
        step = GaugeMetricFamily(
            f"{prefix}_offload_step",
            "The Offload's status.stepIndex: the index of the current weight in status.steps.",
            labels=["namespace", "name"],
        )
        for (namespace, name), status in self._statuses.items():
            weight.add_metric([namespace, name], status.away_weight)
            step.add_metric([namespace, name], status.step)
            for phase in Phase:
                phases.add_metric([namespace, name, phase.value], 1.0 if status.phase == phase.value else 0.0)
        yield weight
        yield phases
        yield step
