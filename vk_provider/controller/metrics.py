"""The controller's own Prometheus metrics: what it did on its own, without a person asking.

Served on `--metrics-listen` (off by default: tests run several controllers on one host). Like the
router's, they live in their own `CollectorRegistry`, so two controllers in one process never share
series.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from vk_provider import __version__

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
NAMESPACE = "vk_provider_controller"


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # Prometheus' build_info idiom: always 1, the version in a label, so a dashboard can join it
        # onto any series (or count the versions running during a rollout).
        Gauge(
            "vk_provider_build_info",
            "The running controller's vk-provider version (always 1).",
            ["version"],
            registry=self.registry,
        ).labels(__version__).set(1)
        self._emergencies = Counter(
            "emergency_migrations",
            "Emergency migrations started because the serving side lost its endpoints, by the side lost.",
            ["namespace", "name", "lost_side"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._ended = Counter(
            "migrations_ended",
            "Migrations that ended, by outcome (Succeeded, RolledBack, Failed) and reason (GatesFailed, "
            "Aborted, SevereFailure, ProgressDeadlineExceeded, ...).",
            ["namespace", "name", "outcome", "reason"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._severe = Counter(
            "severe_rollbacks",
            "Migrations rolled back at once because the receiving side's error rate was severe.",
            ["namespace", "name"],
            namespace=NAMESPACE,
            registry=self.registry,
        )

    def migration_ended(self, namespace: str, name: str, outcome: str, reason: str) -> None:
        self._ended.labels(namespace, name, outcome, reason).inc()

    def emergency_migration(self, namespace: str, name: str, lost_side: str) -> None:
        self._emergencies.labels(namespace, name, lost_side).inc()

    def severe_rollback(self, namespace: str, name: str) -> None:
        self._severe.labels(namespace, name).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
