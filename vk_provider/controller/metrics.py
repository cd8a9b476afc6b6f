"""The controller's own Prometheus metrics: what it did on its own, without a person asking, and
where each Offload stands.

Served on `--admin-listen` (off by default: tests run several controllers on one host). Like the
router's, they live in their own `CollectorRegistry`, so two controllers in one process never share
series.

Counters labelled by Offload start at 0 for every label set the controller can produce, as soon as
it first sees the Offload: a series that first appears at 1 has no earlier sample, so `increase()`
over it is 0 and an alert on the first rollback of an Offload would never fire. The shipped rules
also catch a series that appears at 1 (a migration can end in the very pass that first sees the
Offload, before any scrape saw the 0), so the lists below need not be complete to be safe; they keep
`increase()` exact for everything else (dashboards).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from vk_provider.controller.offloadseries import LOST_SIDES, OffloadSeries
from vk_provider.kit.apibudget import ApiBudget
from vk_provider.kit.apibudgetmetrics import ApiBudgetCollector
from vk_provider.kit.buildinfo import register_build_info
from vk_provider.offload.status import OffloadStatus

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
NAMESPACE = "vk_provider_controller"

QUEUE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, float("inf"))
WARM_STATES = ("wanted", "ready")


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        register_build_info(self.registry)
        self._leader = Gauge(
            "leader",
            "1 while this replica holds the controller's leader Lease and reconciles, 0 as a standby.",
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._leader.set_function(lambda: 0.0)  # until the elector is there to ask
        # Per Offload: its counters, and its gauges as its status says at the controller's last look
        # (only the leader has those); plain numbers, written out at the scrape.
        self._offloads = OffloadSeries(NAMESPACE)
        self.registry.register(self._offloads)
        self._replicas = Gauge(
            "offload_replicas",
            "A spill-over Offload's replicas on each side (status.spillOver), by side and by whether ready.",
            ["namespace", "name", "side", "ready"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._capacity_weight = Gauge(
            "offload_capacity_weight",
            "A spill-over Offload's away share of ready serving capacity (its away weight moves toward it).",
            ["namespace", "name"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._away_cost = Gauge(
            "offload_away_cost_per_hour_usd",
            "What a spill-over Offload's away pods cost per hour at their providers' published prices.",
            ["namespace", "name"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        # Named as the warm-up contract with the policy has it (docs/reference/metrics.md lists it).
        self._warm = Gauge(
            "offload_away_warm_replicas",
            "Away replicas an Offload keeps warm while it serves at home (status.warm): wanted (the pilot "
            "light, or a warm-up's count) and ready. Absent while a migration runs or traffic is away.",
            ["namespace", "offload", "state"],
            namespace="vk_provider",
            registry=self.registry,
        )
        self._strays = Gauge(
            "envoy_strays",
            "Clients connected to the xDS server that are not Envoys the controller expects, so that no "
            "weight step waits for them, at the last check (their node ids are in the controller's log).",
            namespace=NAMESPACE,
            registry=self.registry,
        )
        # How the Offloads' work queue keeps up: a step that lands late either waited for a worker
        # (queue wait, depth) or spent its time in the pass (pass seconds, the API budget's waits).
        self._queue_wait = Histogram(
            "queue_wait_seconds",
            "Time an Offload due for a pass waited in the work queue for a free worker.",
            namespace=NAMESPACE,
            registry=self.registry,
            buckets=QUEUE_BUCKETS,
        )
        self._pass_seconds = Histogram(
            "pass_seconds",
            "Time one reconcile pass over an Offload took, its reads, router checks and writes included.",
            namespace=NAMESPACE,
            registry=self.registry,
            buckets=QUEUE_BUCKETS,
        )
        self._queue_depth = Gauge(
            "queue_depth",
            "Offloads due for a pass and waiting for a worker, at the scrape.",
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._queue_depth.set_function(lambda: 0.0)  # until the leader's queue is there to ask

    def set_api_budget_source(self, budget: ApiBudget) -> None:
        """Report the API client's pacing (its 429s, its pace, its waits) at each scrape."""
        self.registry.register(ApiBudgetCollector(budget, NAMESPACE))

    def set_queue_depth_source(self, depth: Callable[[], int]) -> None:
        self._queue_depth.set_function(lambda: float(depth()))

    def queue_waited(self, seconds: float) -> None:
        self._queue_wait.observe(seconds)

    def pass_took(self, seconds: float) -> None:
        self._pass_seconds.observe(seconds)

    def set_leader_source(self, leading: Callable[[], bool]) -> None:
        """Read whether this replica leads from `leading` at each scrape (the elector stays the truth)."""
        self._leader.set_function(lambda: 1.0 if leading() else 0.0)

    def offload_seen(self, namespace: str, name: str) -> None:
        """Start the Offload's counters at 0 (see the module), once; later calls change nothing."""
        self._offloads.seen(namespace, name)

    def offload_status(self, namespace: str, name: str, status: OffloadStatus) -> None:
        phase = status.phase.value if status.phase is not None else None
        self._offloads.status(namespace, name, status.away_weight or 0, status.step_index or 0, phase)
        self._spill_over(namespace, name, status.spill_over)
        self._warm_replicas(namespace, name, status.warm)

    def _warm_replicas(self, namespace: str, name: str, warm: Mapping[str, Any] | None) -> None:
        if warm is None:
            self._forget_warm(namespace, name)
            return
        self._warm.labels(namespace, name, "wanted").set(_number(warm.get("replicas")))
        self._warm.labels(namespace, name, "ready").set(_number(warm.get("ready")))

    def _forget_warm(self, namespace: str, name: str) -> None:
        for state in WARM_STATES:
            with contextlib.suppress(KeyError):
                self._warm.remove(namespace, name, state)

    def _spill_over(self, namespace: str, name: str, spill: Mapping[str, Any] | None) -> None:
        if spill is None:
            self._forget_spill_over(namespace, name)
            return
        for side in LOST_SIDES:
            replicas, ready = spill.get(f"{side}Replicas"), spill.get(f"{side}ReadyReplicas")
            self._replicas.labels(namespace, name, side, "false").set(_number(replicas) - _number(ready))
            self._replicas.labels(namespace, name, side, "true").set(_number(ready))
        self._capacity_weight.labels(namespace, name).set(_number(spill.get("capacityWeight")))
        self._away_cost.labels(namespace, name).set(_number(spill.get("awayCostPerHour")))

    def _forget_spill_over(self, namespace: str, name: str) -> None:
        for side in LOST_SIDES:
            for ready in ("true", "false"):
                with contextlib.suppress(KeyError):
                    self._replicas.remove(namespace, name, side, ready)
        for gauge in (self._capacity_weight, self._away_cost):
            with contextlib.suppress(KeyError):
                gauge.remove(namespace, name)

    def offload_gone(self, namespace: str, name: str) -> None:
        """Drop a deleted Offload's gauges. Its counters stay: removing them could lose the last
        increment (a migration that ended just before the deletion) before any scrape saw it."""
        self._offloads.forget_status(namespace, name)
        self._forget_spill_over(namespace, name)
        self._forget_warm(namespace, name)

    def forget_offloads(self) -> None:
        """Drop every Offload's gauges when this replica stops leading: a standby's would go stale."""
        self._offloads.forget_statuses()
        for gauge in (
            self._replicas,
            self._capacity_weight,
            self._away_cost,
            self._warm,
        ):
            gauge.clear()

    def envoy_strays(self, count: int) -> None:
        self._strays.set(count)

    def migration_ended(self, namespace: str, name: str, outcome: str, reason: str) -> None:
        self._offloads.migration_ended(namespace, name, outcome, reason)

    def emergency_migration(self, namespace: str, name: str, lost_side: str) -> None:
        self._offloads.emergency_migration(namespace, name, lost_side)

    def severe_rollback(self, namespace: str, name: str) -> None:
        self._offloads.severe_rollback(namespace, name)

    def exposition(self, names: Collection[str] = ()) -> bytes:
        """Every series, or only those of `names` (sample names, e.g. `..._queue_wait_seconds_bucket`),
        collected only from the collectors that make them."""
        return generate_latest(self.registry.restricted_registry(names) if names else self.registry)


def _number(value: Any) -> float:
    """A status figure as a gauge value (a missing or malformed one counts as 0)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
