"""The router's state: the route table, the balancer, the metrics and the signing of requests.

The data path that applies it lives in `server`, `client` (client connections), `relay` and
`upstream` (connections to endpoints); this module holds what every request reads and what
`/-/status` reports, so tests and the `--worker-processes` supervisor can use it without serving
anything.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from vk_provider.router.balancing import Balancer
from vk_provider.router.bodies import SIGNED_BODY_LIMIT
from vk_provider.router.metrics import RouterMetrics
from vk_provider.router.signing import RequestSigning
from vk_provider.router.upstream import Origin, parse_origin
from vk_provider.router.wire import HOP_BY_HOP
from vk_provider.routetable.table import SIDES, RouteTable


@dataclasses.dataclass(frozen=True)
class ProxySettings:
    max_attempts: int = 3
    """Endpoints tried per request when connections fail before sending (the first one included)."""
    connect_timeout: float = 2.0
    """Seconds to open an upstream connection; a pod that does not answer SYNs is as good as gone."""
    keepalive_timeout: float = 15.0
    """Seconds an idle pooled upstream connection is kept. Shorter than backends' own idle timeouts
    (commonly 60 s or more), so the router rarely sends on a connection the backend just closed:
    such a request cannot be retried, since bytes were sent."""
    response_timeout: float = 600.0
    """Seconds an endpoint may take to send its response head (a long generation that answers only
    when done takes minutes); then the client gets 504. Streams, once started, have no limit."""
    client_idle_timeout: float = 75.0
    """Seconds a client connection may sit between requests before the router closes it."""
    header_timeout: float = 10.0
    """Seconds from a request's first byte to the end of its head; then 408 and the connection closes.
    The idle timer restarts on every byte, so without this a client sending a header line every few
    seconds (slowloris) would hold its connection for ever."""
    max_request_line: int = 8 * 1024
    """Bytes of a request's target (path and query); longer gets 414."""
    max_header_bytes: int = 32 * 1024
    """Bytes of a request's header fields, names and values together; more gets 431."""
    max_headers: int = 100
    """Header fields a request may have; more gets 431."""
    max_client_connections: int = 10_000
    """Client connections one process (one worker) keeps open; one more is answered 503 and closed."""
    signed_body_limit: int = SIGNED_BODY_LIMIT
    """Bytes a request to a signed endpoint may carry (read whole to be signed); larger gets 413."""
    upstream_ca_file: str | None = None
    """CA bundle for TLS endpoints, instead of the system's (e.g. a private provider front)."""


class Router:
    """The proxy's state: the current table, the balancer, the metrics and the signing.

    `update(table)` may be called at any time from the event loop's thread; `core.start` serves it.
    """

    def __init__(
        self,
        table: RouteTable | None = None,
        *,
        settings: ProxySettings | None = None,
        balancer: Balancer | None = None,
        metrics: RouterMetrics | None = None,
        signing: RequestSigning | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.settings = settings if settings is not None else ProxySettings()
        self.balancer = balancer if balancer is not None else Balancer()
        self.metrics = metrics if metrics is not None else RouterMetrics()
        self.signing = signing if signing is not None else RequestSigning()
        self.timer = timer
        """Reads the clock latency is measured with (a fake one in tests)."""
        self.check_status: Callable[[], dict[str, Any]] = dict
        """What `/-/status` says of the active checks of away endpoints (set by whoever runs them)."""
        self._table = RouteTable()
        self._origins: dict[str, Origin] = {}
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.update(table if table is not None else RouteTable())

    @property
    def table(self) -> RouteTable:
        return self._table

    def update(self, table: RouteTable) -> None:
        """Apply a new table to new requests; requests in flight keep their endpoints."""
        self._table = table
        self.balancer.forget_except(table.endpoint_urls(), {route.key for route in table.routes})
        self.metrics.kept_on_active_checks(
            {
                (route.namespace, route.name): sum(1 for e in route.away if e.kept_on_active_checks)
                for route in table.routes
            }
        )

    def status(self) -> dict[str, Any]:
        """What each route applies now: the controller checks every replica's generation and weight."""
        return {
            "routes": [
                {
                    "namespace": route.namespace,
                    "name": route.name,
                    "generation": route.generation,
                    "away_weight": route.away_weight,
                    "match": {"hosts": list(route.match.hosts), "path_prefix": route.match.path_prefix},
                    "endpoints": self.balancer.side_counts(route),
                    # Away endpoints served although their node is not Ready, on the router's own checks.
                    "away_kept_on_active_checks": [e.url for e in route.away if e.kept_on_active_checks],
                }
                for route in self._table.routes
            ],
            "active_checks": self.check_status(),
        }

    @property
    def in_flight(self) -> int:
        """Requests being proxied right now (streams included)."""
        return self._in_flight

    async def wait_idle(self) -> None:
        """Return once no request is being proxied."""
        await self._idle.wait()

    def request_started(self) -> None:
        self._in_flight += 1
        self._idle.clear()

    def request_finished(self) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self._idle.set()

    def origin(self, url: str) -> Origin:
        """Where an endpoint's connections go, parsed once per endpoint URL."""
        origin = self._origins.get(url)
        if origin is None:
            if len(self._origins) > 10_000:  # endpoints come and go: never grow without bound
                self._origins.clear()
            origin = self._origins[url] = parse_origin(url)
        return origin


__all__ = ["HOP_BY_HOP", "SIDES", "ProxySettings", "Router"]
