"""The router's Prometheus metrics, per route (Offload namespace/name) and side (home/away).

The migration controller gates every weight step on these (error rate, p99 latency, enough
requests), so they are labelled by the side that served the request, not by endpoint: pods come and
go during a migration, sides do not. Latency is time to response headers, because a streaming LLM
response can last minutes and its length says nothing about the backend's health.

Like the kubelet's metrics, they live in their own `CollectorRegistry`, so two routers in one
process (tests) never share series.

The two series every request touches (its status class and its latency) are kept in plain integers
per route and side and written as text when scraped (`vk_provider.router.sidecounts`); the rest are
prometheus_client's.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from vk_provider.kit.buildinfo import register_build_info
from vk_provider.router.sidecounts import SideCounts, SideCountsText
from vk_provider.routetable.table import Side

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
NAMESPACE = "vk_provider_router"

CLIENT_REFUSAL_REASONS = (
    "header_timeout",
    "request_line_too_long",
    "header_too_large",
    "too_many_headers",
    "connection_limit",
)


class RouterMetrics:
    """The router's series, with one small method per thing the proxy records."""

    def __init__(self, *, build_info: bool = False) -> None:
        """`build_info`: also the process's `vk_provider_build_info`, for a router serving alone and
        the xDS server; a worker leaves it to its supervisor, which sums the workers' families."""
        self.registry = CollectorRegistry(auto_describe=True)
        if build_info:
            register_build_info(self.registry)
        self._sides: dict[tuple[str, str, str], SideCounts] = {}
        self._sides_text = SideCountsText(NAMESPACE)
        self._errors = Counter(
            "errors",
            "Requests that failed at the proxy (no upstream answer, or a broken response), by reason.",
            ["namespace", "name", "side", "reason"],
            namespace=NAMESPACE,
            registry=self.registry,
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
        self._client_refusals = Counter(
            "client_refusals",
            "Client connections and requests refused before any route was looked up, by reason: "
            "header_timeout (408), request_line_too_long (414), header_too_large and "
            "too_many_headers (431), connection_limit (503).",
            ["reason"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        for reason in CLIENT_REFUSAL_REASONS:
            self._client_refusals.labels(reason)  # at 0 from the start: the first refusal is an increase
        self._unmatched = Counter(
            "unmatched",
            "Requests answered 404 because no route matched their host and path.",
            namespace=NAMESPACE,
            registry=self.registry,
        )

        self._kept_counts: dict[tuple[str, str], int] = {}
        """The counts `_kept` holds, as last set."""
        self._kept = Gauge(
            "endpoints_kept_on_active_checks",
            "Away endpoints served only because the router's own active checks pass: their node is "
            "not Ready, so their pods were marked not Ready, but their workloads answer.",
            ["namespace", "name"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._ignored = Gauge(
            "ignored_objects",
            "Away pods and home EndpointSlices the router leaves out of its table because it cannot "
            "trust them, by the reason of the Warning Event it posts for each (UnverifiedTrafficAddress, "
            "NotOnVkProviderNode, TrafficAuthRefused, UntrustedEndpointSlice, UntrustedTrafficAnnotation).",
            ["reason"],
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
        self.side_counts(namespace, name, side).record(status, seconds)

    def side_counts(self, namespace: str, name: str, side: Side) -> SideCounts:
        """The counts of one route's side, made at its first response and kept."""
        key = (namespace, name, side)
        counts = self._sides.get(key)
        if counts is None:
            counts = self._sides[key] = SideCounts()
        return counts

    def answered(self) -> int:
        """Requests answered by an upstream, over all routes and sides (a worker's share of the port's
        traffic)."""
        return sum(counts.count for counts in self._sides.values())

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
        """The kept endpoints of each route, (namespace, name) → count; routes not named are gone.

        Only the series that changed are touched: a table of a thousand routes is applied on every
        change of one, and making a thousand labelled series anew each time costs milliseconds."""
        counts = dict(by_route)
        for namespace, name in self._kept_counts.keys() - counts.keys():
            self._kept.remove(namespace, name)
        for (namespace, name), count in counts.items():
            if self._kept_counts.get((namespace, name)) != count:
                self._kept.labels(namespace, name).set(count)
        self._kept_counts = counts

    def ignored(self, by_reason: Mapping[str, int]) -> None:
        """How many objects are left out for each reason; every reason named is set, 0 included, so a
        rule sees the first one left out as an increase."""
        for reason, count in by_reason.items():
            self._ignored.labels(reason).set(count)

    def active_check(self, result: str) -> None:
        self._checks.labels(result).inc()

    def client_refused(self, reason: str) -> None:
        self._client_refusals.labels(reason).inc()

    def unmatched(self) -> None:
        self._unmatched.inc()

    def exposition(self) -> bytes:
        return self._sides_text.exposition(self._sides).encode() + generate_latest(self.registry)
