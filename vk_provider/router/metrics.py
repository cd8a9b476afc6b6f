"""The router's Prometheus metrics, per route (Offload namespace/name) and side (home/away).

The migration controller gates every weight step on these (error rate, p99 latency, enough
requests), so they are labelled by the side that served the request, not by endpoint: pods come and
go during a migration, sides do not. Latency is time to response headers, because a streaming LLM
response can last minutes and its length says nothing about the backend's health.

Like the kubelet's metrics, they live in their own `CollectorRegistry`, so two routers in one
process (tests) never share series.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from vk_provider.router.table import Side

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
NAMESPACE = "vk_provider_router"

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Fine at the low end: the gates compare p99s of fast inference endpoints."""


def status_class(status: int) -> str:
    return f"{status // 100}xx"


class RouterMetrics:
    """The router's series, with one small method per thing the proxy records."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._requests = Counter(
            "requests",
            "Requests answered by an upstream, by route, side and status class (2xx, 5xx, ...).",
            ["namespace", "name", "side", "code"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._errors = Counter(
            "errors",
            "Requests that failed at the proxy (no upstream answer, or a broken response), by reason.",
            ["namespace", "name", "side", "reason"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._latency = Histogram(
            "response_header_seconds",
            "Time from the request's arrival to the upstream's response headers.",
            ["namespace", "name", "side"],
            namespace=NAMESPACE,
            registry=self.registry,
            buckets=_LATENCY_BUCKETS,
        )
        self._fallbacks = Counter(
            "fallbacks",
            "Requests sent to the other side because the drawn side had no usable endpoint.",
            ["namespace", "name", "drawn_side"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._ejections = Counter(
            "ejections",
            "Endpoints ejected after a failed connection.",
            ["namespace", "name", "side"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._unavailable = Counter(
            "unavailable",
            "Requests answered 503 because neither side had a usable endpoint.",
            ["namespace", "name"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._rejected = Counter(
            "rejected",
            "Requests the router refused itself, sending nothing (e.g. a body too large to sign), by "
            "reason. Not errors of the side: the client asked for what no endpoint would take.",
            ["namespace", "name", "side", "reason"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._disconnects = Counter(
            "client_disconnects",
            "Responses cut short because the client went away while they were relayed (a cancelled "
            "generation, a closed tab). Not errors of the side: nothing failed there.",
            ["namespace", "name", "side"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._unmatched = Counter(
            "unmatched",
            "Requests answered 404 because no route matched their host and path.",
            namespace=NAMESPACE,
            registry=self.registry,
        )

        self._kept = Gauge(
            "endpoints_kept_on_active_checks",
            "Away endpoints served only because the router's own active checks pass: their node is "
            "not Ready, so their pods were marked not Ready, but their workloads answer.",
            ["namespace", "name"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._checks = Counter(
            "active_checks",
            "Active health checks of away endpoints, by result (pass, fail).",
            ["result"],
            namespace=NAMESPACE,
            registry=self.registry,
        )

    def response(self, namespace: str, name: str, side: Side, status: int, seconds: float) -> None:
        self._requests.labels(namespace, name, side, status_class(status)).inc()
        self._latency.labels(namespace, name, side).observe(seconds)

    def error(self, namespace: str, name: str, side: Side, reason: str) -> None:
        self._errors.labels(namespace, name, side, reason).inc()

    def fallback(self, namespace: str, name: str, drawn_side: Side) -> None:
        self._fallbacks.labels(namespace, name, drawn_side).inc()

    def ejection(self, namespace: str, name: str, side: Side) -> None:
        self._ejections.labels(namespace, name, side).inc()

    def unavailable(self, namespace: str, name: str) -> None:
        self._unavailable.labels(namespace, name).inc()

    def rejected(self, namespace: str, name: str, side: Side, reason: str) -> None:
        self._rejected.labels(namespace, name, side, reason).inc()

    def client_disconnected(self, namespace: str, name: str, side: Side) -> None:
        self._disconnects.labels(namespace, name, side).inc()

    def kept_on_active_checks(self, by_route: Mapping[tuple[str, str], int]) -> None:
        """The kept endpoints of each route, (namespace, name) → count; routes not named are gone."""
        self._kept.clear()
        for (namespace, name), count in by_route.items():
            self._kept.labels(namespace, name).set(count)

    def active_check(self, result: str) -> None:
        self._checks.labels(result).inc()

    def unmatched(self) -> None:
        self._unmatched.inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
