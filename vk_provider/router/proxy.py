"""The router's data path: an aiohttp reverse proxy that applies a `RouteTable`.

Everything here serves one promise of the migration: moving traffic between home and away must not
fail a request or break a stream. Hence:

- bodies stream both ways, chunk by chunk, never buffered: LLM output is SSE or chunked, and a
  client must see each token when the backend sends it. The one exception is the request body
  of a request to a signed endpoint (a SageMaker invocation URL), which is read whole first because
  its SigV4 signature covers its hash (`bodies`, `signing`); its response still streams;
- a request is retried on another endpoint only when its connection failed before any byte was
  sent (refused, or connect timeout). After that the backend may have acted on it (a generation is
  not idempotent), so a later failure is reported, never replayed;
- the table is swapped by one assignment; a request reads it once, so requests in flight keep the
  endpoint they picked while new ones follow the new weights;
- a client that goes away cancels its upstream request (the server runs with handler
  cancellation, and the upstream response is closed, not returned to the pool, when unfinished).

One `ClientSession` is shared by all requests so upstream connections are pooled; it has no cookie
jar (cookies belong to the clients, not to the router) and does not decompress (the client gets the
bytes the backend sent, with their Content-Encoding).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from vk_provider.router.balancing import Balancer
from vk_provider.router.bodies import SIGNED_BODY_LIMIT, BodyTooLargeError, RequestBody
from vk_provider.router.metrics import CONTENT_TYPE, RouterMetrics
from vk_provider.router.signing import RequestSigning, SigningUnavailableError
from vk_provider.router.table import SIDES, Endpoint, Route, RouteTable, Side

logger = logging.getLogger(__name__)

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers about one connection (RFC 9110 7.6.1): each hop sets its own, a proxy never forwards them."""

CONNECT_FAILURES = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
"""Failures raised while connecting, before a byte of the request left: the only retryable ones."""

UPSTREAM_FAILURES = (aiohttp.ClientError, asyncio.TimeoutError)


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
    connection_limit: int = 0
    """Upstream connections at once, 0 for no limit: long streams must not queue short requests."""
    signed_body_limit: int = SIGNED_BODY_LIMIT
    """Bytes a request to a signed endpoint may carry (read whole to be signed); larger gets 413."""


def forwarded_headers(request: web.Request) -> CIMultiDict[str]:
    """The request headers to send upstream: the client's, minus hop-by-hop, plus X-Forwarded-*."""
    headers = _end_to_end(request.headers)
    headers.update(_forwarding(request))
    return headers


def _forwarding(request: web.Request) -> CIMultiDict[str]:
    peer = request.remote or ""
    prior = request.headers.get("X-Forwarded-For")
    forwarding: CIMultiDict[str] = CIMultiDict()
    forwarding["X-Forwarded-For"] = f"{prior}, {peer}" if prior else peer
    forwarding["X-Forwarded-Proto"] = request.scheme
    if "Host" in request.headers:
        forwarding["X-Forwarded-Host"] = request.headers["Host"]
    return forwarding


def _end_to_end(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    # The Connection header may name further per-connection headers; those go too.
    named = {
        token.strip().lower() for value in headers.getall("Connection", []) for token in value.split(",")
    }
    kept: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        lowered = name.lower()
        if lowered not in HOP_BY_HOP and lowered not in named:
            kept.add(name, value)
    return kept


def _plain(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n")


class Router:
    """The proxy's state: the current table, the balancer, the metrics and the upstream session.

    `update(table)` may be called at any time from the event loop's thread; `app()` is the aiohttp
    application to serve (see `start`, which serves it with handler cancellation on).
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
        self._timer = timer
        self.check_status: Callable[[], dict[str, Any]] = dict
        """What `/-/status` says of the active checks of away endpoints (set by whoever runs them)."""
        self._table = RouteTable()
        self._session: aiohttp.ClientSession | None = None
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
        self.balancer.forget_except(table.endpoint_urls())
        self.metrics.kept_on_active_checks(
            {
                (route.namespace, route.name): sum(1 for e in route.away if e.kept_on_active_checks)
                for route in table.routes
            }
        )

    def app(self) -> web.Application:
        # Request bodies are forwarded as received: decompressing them would make the forwarded
        # Content-Encoding and Content-Length lie.
        app = web.Application(handler_args={"auto_decompress": False})
        app.router.add_get("/-/healthz", self._healthz)
        app.router.add_get("/-/status", self._status)
        app.router.add_get("/-/metrics", self._metrics)
        app.router.add_route("*", "/{tail:.*}", self.proxy)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, _app: web.Application) -> None:
        connector = aiohttp.TCPConnector(
            limit=self.settings.connection_limit, keepalive_timeout=self.settings.keepalive_timeout
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.settings.connect_timeout),
            # Send what the client sent, not aiohttp's defaults for these.
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        )

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})

    async def _status(self, _request: web.Request) -> web.Response:
        return web.json_response(self.status())

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

    async def proxy(self, request: web.Request) -> web.StreamResponse:
        """Route one request, forward it, and stream the answer back."""
        self._in_flight += 1
        self._idle.clear()
        try:
            return await self._proxy(request)
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        started = self._timer()
        route = self._table.match(request.headers.get("Host"), request.path)
        if route is None:
            self.metrics.unmatched()
            host = request.headers.get("Host", "")
            return _plain(404, f"no route for host {host!r} and path {request.path!r}")
        if self._session is None:
            raise RuntimeError("the router's application is not started")
        draw = self.balancer.draw()  # one draw per request: its retries stay on the drawn side
        body = RequestBody(request)
        tried: set[str] = set()
        counted_fallback = False
        for _attempt in range(self.settings.max_attempts):
            pick = self.balancer.pick(route, draw, frozenset(tried))
            if pick is None:
                break
            if pick.fell_back and not counted_fallback:
                counted_fallback = True
                self.metrics.fallback(route.namespace, route.name, "away" if pick.side == "home" else "home")
            url = pick.endpoint.url
            tried.add(url)
            self.balancer.acquire(url)
            try:
                try:
                    target, headers, data = await self._outgoing(request, body, pick.endpoint, pick.side)
                except BodyTooLargeError as error:
                    self.metrics.rejected(route.namespace, route.name, pick.side, "body_too_large")
                    return _plain(413, f"{error} (requests to {url} are signed)")
                except SigningUnavailableError as error:
                    # Before a byte was sent, but every signed endpoint would fail the same way.
                    self.metrics.error(route.namespace, route.name, pick.side, "signing")
                    return _plain(502, f"cannot sign the request to {url}: {error}")
                try:
                    upstream = await self._session.request(
                        request.method,
                        URL(target, encoded=True),
                        headers=headers,
                        data=data,
                        allow_redirects=False,
                    )
                except CONNECT_FAILURES as error:
                    # Nothing was sent: safe to try elsewhere, and this endpoint sits out a while.
                    period = self.balancer.refused(url)
                    self.metrics.ejection(route.namespace, route.name, pick.side)
                    self.metrics.error(route.namespace, route.name, pick.side, "connect")
                    logger.warning("ejected %s of %s for %.0f s: %s", url, route.key, period, error)
                    continue
                except UPSTREAM_FAILURES as error:
                    # The request (or part of it) went out: the backend may have acted on it.
                    self.metrics.error(route.namespace, route.name, pick.side, "upstream")
                    logger.warning("upstream %s of %s failed before answering: %r", url, route.key, error)
                    return _plain(502, f"upstream {url} failed before answering: {error}")
                self.balancer.succeeded(url)
                self.metrics.response(
                    route.namespace, route.name, pick.side, upstream.status, self._timer() - started
                )
                return await self._relay(request, upstream, route, pick.side)
            finally:
                self.balancer.release(url)
        self.metrics.unavailable(route.namespace, route.name)
        return _plain(503, f"no usable endpoint for {route.key}: tried {len(tried)}")

    async def _outgoing(
        self, request: web.Request, body: RequestBody, endpoint: Endpoint, side: Side
    ) -> tuple[str, CIMultiDict[str], bytes | AsyncIterator[bytes] | None]:
        """The URL, headers and body of one attempt at `endpoint`: signed when it asks for that.

        Home pods get the client's Host, as behind any in-cluster proxy. An away endpoint gets its
        own: it is a provider's front (RunPod's proxy, SageMaker's runtime) that finds the deployment
        by Host, so the client's Host would reach nothing there; X-Forwarded-Host still carries it.
        BodyTooLargeError or SigningUnavailableError when a signed request cannot be made.
        """
        target = endpoint.target(request.raw_path)
        headers = forwarded_headers(request)
        if side == "away":
            headers.popall("Host", None)
        if endpoint.auth is None:
            return target, headers, body.payload()
        whole = await body.whole(self.settings.signed_body_limit)
        signed = await self.signing.signed_headers(request.method, target, headers, whole, endpoint.auth)
        return target, signed, whole

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, route: Route, side: Side
    ) -> web.StreamResponse:
        """Stream the upstream response to the client; close the upstream unless it ended cleanly."""
        finished = False
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason, headers=_end_to_end(upstream.headers)
        )
        try:
            await response.prepare(request)
            while True:
                try:
                    chunk = await upstream.content.readany()
                except UPSTREAM_FAILURES as error:
                    # Headers are out, so no status can say so: break the client's response, so
                    # it sees a truncated body rather than a short one that looks complete.
                    self.metrics.error(route.namespace, route.name, side, "upstream_broken")
                    logger.warning("upstream of %s broke mid-response: %r", route.key, error)
                    if request.transport is not None:
                        request.transport.abort()
                    return response
                if not chunk:
                    break
                await response.write(chunk)  # each chunk goes out as it arrives: SSE tokens flow
            await response.write_eof()
            finished = True
            return response
        except (ConnectionError, asyncio.CancelledError) as gone:
            # The client left (a closed tab, a cancelled generation): aiohttp cancels the handler,
            # or, when the client leaves just as the answer starts, the write fails. Nothing failed
            # on our side, so it is not an error a gate should count, nor worth more than a debug
            # line; let through, the write failure would be logged as an unhandled error with a
            # traceback, once per request.
            self.metrics.client_disconnected(route.namespace, route.name, side)
            logger.debug("client of %s left mid-response", route.key)
            if isinstance(gone, asyncio.CancelledError):
                raise
            return response
        finally:
            if finished:
                upstream.release()
            else:
                upstream.close()


async def start(router: Router, host: str, port: int, *, shutdown_timeout: float = 30.0) -> web.AppRunner:
    """Serve `router` on host:port until the returned runner's `cleanup()`.

    `cleanup()` stops listening at once, then gives requests in flight (streams included) up to
    `shutdown_timeout` seconds to finish before cancelling them: a router replica being replaced
    must not cut the answers it is relaying.
    """
    # Handler cancellation: when a client disconnects, its handler (and so its upstream request)
    # is cancelled instead of running on for nobody.
    runner = web.AppRunner(
        router.app(), handler_cancellation=True, access_log=None, shutdown_timeout=shutdown_timeout
    )
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


__all__ = ["HOP_BY_HOP", "SIDES", "ProxySettings", "Router", "forwarded_headers", "start"]
