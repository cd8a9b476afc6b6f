"""The router's data path: an `asyncio.Protocol` per client connection, parsed by httptools (llhttp).

Why not aiohttp, as before: its request, header, URL and client-session objects cost about 130 µs of
CPU per proxied request on the development machine, nine times nginx's; the event loop was not the
cost (uvloop alone gained 6%). Here a request is a few byte strings from the parser, its head is
rewritten by joining bytes (`wire`), and the response's bytes go from the endpoint's
`data_received` to the client's transport without a queue, a task or an await per chunk.

What the migration needs, and how it holds here:

- Bodies stream both ways, never buffered whole, so each SSE token reaches the client when the
  backend sends it; backpressure both ways: a client that reads slowly pauses the endpoint's
  socket, an endpoint that reads slowly pauses the client's. The one buffered body is a request to a
  signed endpoint (SageMaker), whose SigV4 signature covers the body's hash (`bodies`).
- A request is retried on another endpoint only when the connection failed before a byte was
  sent; after that the backend may have acted on it (a generation is not idempotent).
- A request reads the table once: a table swap leaves requests in flight on their endpoints.
- A client that goes away ends its exchange: the endpoint's connection is closed, not pooled.
- Each connection serves its requests one after the other (pipelined ones in order). The usual
  request (a proxied one, with a pooled connection to the endpoint it drew, unsigned) is answered
  from the callbacks alone: started when its head is parsed, finished when the endpoint's response
  ends. No task runs for it and nothing awaits: a task's two resumptions per request were an eighth
  of the router's CPU. What must wait (a new endpoint connection, a signed body) is answered from a
  task, one request at a time, in the same order.
- Timeouts are checked by one sweep a second over all connections, not by timers per request.

The router's own status, metrics and health are not served here: every path on the traffic port is
a route's (or a 404), whatever the Host; they are on the admin listener (`admin`).

Upgrades (WebSocket) are refused with 501: inference traffic does not use them, and passing a raw
tunnel through a weighted migration could not be moved.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

import httptools
from multidict import CIMultiDict

from vk_provider.router import wire
from vk_provider.router.bodies import BodyTooLargeError
from vk_provider.router.eventstream import stream_url, wants_stream
from vk_provider.router.relay import Outgoing, Relay
from vk_provider.router.signing import SigningUnavailableError
from vk_provider.router.upstream import Origin, UpstreamConnection
from vk_provider.routetable.table import Endpoint, Route, Side

if TYPE_CHECKING:
    from vk_provider.router.server import ProxyServer

logger = logging.getLogger(__name__)

BUFFER_BEFORE_PAUSE = 256 * 1024
"""Bytes of a request body kept while no endpoint takes them yet, before the client's reads pause."""

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

_FORWARDING = frozenset({b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host"})
_HOST = b"host"


class MalformedBodyError(Exception):
    """The client's request body broke HTTP/1.1 framing (a bad chunk) before it ended."""


class _BadRequest:
    """What the parser could not read, or a head refused, queued after the requests before it; it is
    answered with `status` and the connection closes."""

    def __init__(self, reason: str, status: int = 400) -> None:
        self.reason = reason
        self.status = status


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a head over the limits (`ProxySettings`)."""

    def __init__(self, status: int, metric_reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.metric_reason = metric_reason
        self.message = message


class Request:
    """One client request: its head as parsed, and its body as it arrives."""

    __slots__ = (
        "body",
        "body_size",
        "chunked",
        "complete",
        "content_length",
        "expects_continue",
        "headers",
        "host",
        "keep_alive",
        "method",
        "sink",
        "started",
        "target",
        "upgrade",
        "version",
        "waiter",
    )

    def __init__(self, started: float) -> None:
        self.started = started
        self.method = b""
        self.target = b""
        self.version = "1.1"
        self.headers: wire.Headers = []
        self.host: bytes | None = None
        self.keep_alive = True
        self.upgrade = False
        self.chunked = False
        self.content_length: int | None = None
        self.expects_continue = False
        self.body: list[bytes] = []
        self.body_size = 0
        self.complete = False
        self.sink: Callable[[bytes | None], None] | None = None
        """Takes the body's chunks once an endpoint does (None: the body ended)."""
        self.waiter: asyncio.Future[None] | None = None
        """Set while the whole body is awaited (a signed request)."""

    @property
    def has_body(self) -> bool:
        return self.chunked or bool(self.content_length)

    @property
    def path(self) -> bytes:
        return self.target.partition(b"?")[0]


class ClientConnection(asyncio.Protocol):
    """One client's connection: parses its requests and answers them in order."""

    def __init__(self, server: ProxyServer) -> None:
        self.server = server
        self.router = server.router
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer = b""
        self.closed = False
        self.last_active = time.monotonic()
        self.relay: Relay | None = None
        self._parser = httptools.HttpRequestParser(self)
        self._parsing = Request(0.0)
        """The request being parsed (its body may still arrive while an earlier one is answered)."""
        self._queue: collections.deque[Request | _BadRequest] = collections.deque()
        self._answering = False
        """The queue's first request is being answered (by callbacks, or by `_task`)."""
        self._ending = False
        """An answer said to close the connection: the requests queued after it are not answered."""
        self._task: asyncio.Task[None] | None = None
        self._read_pauses: set[str] = set()
        self._held: list[bytes] | None = None
        # The head being received: since when (None: no head in progress), which one (the parser's
        # message count), and what it holds so far, against the limits of `ProxySettings`.
        self.head_since: float | None = None
        self._head_number = 0
        self._head_bytes = 0
        self._header_fields = 0
        self._header_field_bytes = 0

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # TCP: a stream transport
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]).encode() if peer else b""
        limit = self.router.settings.max_client_connections
        if len(self.server.connections) >= limit:
            # Each connection holds a descriptor and buffers: a flood of them is refused, not kept.
            self.router.metrics.client_refused("connection_limit")
            self.closed = True
            message = f"the router holds {limit} client connections already; try again"
            self.transport.write(wire.plain_response(503, message, close=True))
            self.transport.close()
            return
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        head_in_progress = self.head_since is not None
        head_number = self._head_number
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._pause_reading("upgrade")  # the upgrade request is queued; it is refused, then closed
        except httptools.HttpParserCallbackError as error:
            if not isinstance(error.__context__, _HeadRefused):
                raise
            self._refuse_head(error.__context__)
        except httptools.HttpParserError as error:
            self._malformed(str(error) or "malformed request")
        else:
            if head_in_progress and self.head_since is not None and self._head_number == head_number:
                # The same head, still incomplete after this whole read: every byte of it was head.
                # The parser keeps a header line it has not seen the end of, so this bounds that too.
                self._head_bytes += len(data)
                limit = self.router.settings.max_request_line + self.router.settings.max_header_bytes
                if self._head_bytes > limit:
                    self._refuse_head(
                        _HeadRefused(431, "header_too_large", f"a request head of more than {limit} bytes")
                    )
        # After the whole read is parsed, not from the parser's callbacks: a request without a body
        # is then complete when it is answered, and a body that came with its head goes out with it.
        if not self._answering:
            self._answer_next()

    def _refuse_head(self, refusal: _HeadRefused) -> None:
        """Answer the head being received with `refusal`'s status; nothing more is read."""
        self._pause_reading("bad")
        self.head_since = None
        self.router.metrics.client_refused(refusal.metric_reason)
        self._queue.append(_BadRequest(refusal.message, refusal.status))
        if not self._answering:
            self._answer_next()

    def head_timed_out(self) -> None:
        """The head being received took longer than `header_timeout` (see `ProxyServer.sweep`)."""
        timeout = self.router.settings.header_timeout
        self._refuse_head(_HeadRefused(408, "header_timeout", f"no whole request head within {timeout:g}s"))

    def _malformed(self, reason: str) -> None:
        """The client sent what HTTP/1.1 cannot parse: answer 400 where a response can still start."""
        self._pause_reading("bad")
        request = self._parsing
        if request in self._queue and not request.complete:
            # Its body broke mid-way: the request cannot be finished, whoever waits for it stops.
            if request.waiter is not None and not request.waiter.done():
                request.waiter.set_exception(MalformedBodyError(reason))
            if self.relay is not None and self.relay.request is request:
                self.relay.client_body_broke(reason)
            return
        self._queue.append(_BadRequest(reason))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        if self._task is not None:
            self._task.cancel()  # it ends the exchange it awaits
        elif self.relay is not None:
            self._abandon(self.relay)
        for request in self._queue:
            if isinstance(request, Request) and request.waiter is not None and not request.waiter.done():
                request.waiter.cancel()

    def pause_writing(self) -> None:
        # The client reads slower than the endpoint sends: stop reading the endpoint.
        if self.relay is not None:
            self.relay.connection.pause_reading()

    def resume_writing(self) -> None:
        if self.relay is not None:
            self.relay.connection.resume_reading()

    # httptools callbacks

    def on_message_begin(self) -> None:
        self._parsing = Request(self.router.timer())
        self.head_since = time.monotonic()
        self._head_number += 1
        self._head_bytes = self._header_fields = self._header_field_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._parsing.target += url
        limit = self.router.settings.max_request_line
        if len(self._parsing.target) > limit:
            raise _HeadRefused(414, "request_line_too_long", f"a request target of more than {limit} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        settings = self.router.settings
        self._header_fields += 1
        self._header_field_bytes += len(name) + len(value)
        if self._header_fields > settings.max_headers:
            raise _HeadRefused(431, "too_many_headers", f"more than {settings.max_headers} header fields")
        if self._header_field_bytes > settings.max_header_bytes:
            raise _HeadRefused(
                431, "header_too_large", f"header fields of more than {settings.max_header_bytes} bytes"
            )
        self._parsing.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.head_since = None
        request = self._parsing
        parser = self._parser
        request.method = parser.get_method()
        request.version = parser.get_http_version()
        request.keep_alive = parser.should_keep_alive()
        request.upgrade = parser.should_upgrade()
        for name, value in request.headers:
            lowered = name.lower()
            if lowered == _HOST:
                request.host = value
            elif lowered == b"content-length":
                request.content_length = int(value)
            elif lowered == b"transfer-encoding":
                request.chunked = b"chunked" in value.lower()
            elif lowered == b"expect":
                request.expects_continue = value.lower() == b"100-continue"
        self._queue.append(request)
        if len(self._queue) > 1:
            self._pause_reading("pipelined")  # answered in order; read on once this one is

    def on_body(self, data: bytes) -> None:
        request = self._parsing
        request.body_size += len(data)
        if request.sink is not None:
            request.sink(data)
            return
        request.body.append(data)
        if request.waiter is None and request.body_size > BUFFER_BEFORE_PAUSE:
            self._pause_reading("buffer")
        elif (
            request.waiter is not None
            and not request.waiter.done()
            and request.body_size > self.router.settings.signed_body_limit
        ):
            request.waiter.set_exception(BodyTooLargeError(self.router.settings.signed_body_limit))

    def on_message_complete(self) -> None:
        request = self._parsing
        request.complete = True
        if request.sink is not None:
            request.sink(None)
        if request.waiter is not None and not request.waiter.done():
            request.waiter.set_result(None)

    # writing

    def write(self, data: bytes) -> None:
        if self._held is not None:
            self._held.append(data)
        elif self.transport is not None and not self.closed:
            self.transport.write(data)

    def hold(self) -> None:
        """Gather writes until `flush()`: what one read of the endpoint produces goes out in one send."""
        if self._held is None:
            self._held = []

    def flush(self) -> None:
        held, self._held = self._held, None
        if held:
            self.write(b"".join(held))

    def abort(self) -> None:
        """Break the connection: the client sees a truncated response, never a short complete one."""
        self._held = None
        if self.transport is not None:
            self.transport.abort()

    def close_when_written(self) -> None:
        self.flush()
        if self.transport is not None:
            self.transport.close()

    def _pause_reading(self, reason: str) -> None:
        if not self._read_pauses and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._read_pauses.add(reason)

    def resume_reading(self, reason: str) -> None:
        if reason in self._read_pauses:
            self._read_pauses.discard(reason)
            if not self._read_pauses and self.transport is not None and not self.closed:
                self.transport.resume_reading()

    def pause_for_upstream(self) -> None:
        self._pause_reading("upstream")

    # serving

    def _answer_next(self) -> None:
        """Answer the queued requests in order while each can be answered at once; the first that
        cannot goes to a task, which carries on with the queue when it is done."""
        while self._queue and not self._answering and not self._ending and not self.closed:
            self._answering = True
            keep = self._answer_at_once(self._queue[0])
            if keep is None:
                return  # under way: `_answered` follows when it ends
            self._done_answering(keep)

    def _answered(self, keep: bool) -> None:
        """The request being answered is done (`keep`: the connection may serve another)."""
        self._done_answering(keep)
        self._answer_next()

    def _done_answering(self, keep: bool) -> None:
        self._queue.popleft()
        self._answering = False
        self.last_active = time.monotonic()
        if not keep or self.closed:
            self._ending = True
            self.close_when_written()
            return
        self.resume_reading("pipelined")

    def _answer_at_once(self, request: Request | _BadRequest) -> bool | None:
        """Answer `request` from here if nothing needs awaiting: whether the connection may serve
        another, or None when the answer is under way (an exchange, or a task)."""
        if isinstance(request, _BadRequest):
            self.write(wire.plain_response(request.status, f"bad request: {request.reason}", close=True))
            return False
        if request.upgrade:
            self.write(wire.plain_response(501, "the router does not pass upgrades (WebSocket)", close=True))
            return False
        path = request.path
        host = request.host.decode("latin-1") if request.host is not None else None
        route = self.router.table.match(host, path.decode("latin-1"))
        if route is None:
            self.router.metrics.unmatched()
            message = f"no route for host {host or ''!r} and path {path.decode('latin-1')!r}"
            return self._own_answer(request, 404, message)
        self.router.request_started()
        draw = self.router.balancer.draw(route)  # one draw per request: its retries stay on the drawn side
        if not self._exchange_at_once(request, route, draw):
            self._answer_later(self._proxy_counted(request, route, draw))
        return None

    def _answer_later(self, answer: Coroutine[None, None, bool]) -> None:
        self._task = self.loop.create_task(self._run_answer(answer))

    async def _run_answer(self, answer: Coroutine[None, None, bool]) -> None:
        try:
            keep = await answer
        except asyncio.CancelledError:
            return  # the client went away
        except Exception:
            logger.exception("the router failed to answer a request")
            self.abort()
            return
        self._task = None
        self._answered(keep)

    async def _proxy_counted(self, request: Request, route: Route, draw: float) -> bool:
        try:
            return await self._proxy(request, route, draw)
        finally:
            self.router.request_finished()

    def _own_answer(self, request: Request, status: int, message: str) -> bool:
        """Answer `request` with the router's own text; keep the connection only if its body was read."""
        keep = request.keep_alive and request.complete and not self.server.draining
        self.write(wire.plain_response(status, message, close=not keep, head_only=request.method == b"HEAD"))
        return keep

    def _exchange_at_once(self, request: Request, route: Route, draw: float) -> bool:
        """Start the exchange for `request` from here, if its endpoint is unsigned and has a pooled
        connection (the usual case); False leaves the request to `_proxy`."""
        router = self.router
        pick = router.balancer.pick(route, draw)
        if pick is None or pick.endpoint.auth is not None:
            return False
        endpoint = pick.endpoint
        origin = router.origin(endpoint.url)
        connection = self.server.pool.idle(origin)
        if connection is None:
            return False
        if pick.fell_back:
            router.metrics.fallback(route.namespace, route.name, "away" if pick.side == "home" else "home")
        router.balancer.acquire(endpoint.url)
        side = pick.side
        relay = Relay(self, request, route, side, endpoint=endpoint, connection=connection, streaming=False)
        relay.over = self._exchange_over
        self._begin_exchange(relay, self._plain_outgoing(request, origin, side))
        return True

    def _exchange_over(self, relay: Relay) -> None:
        """The end of an exchange started at once: answer the rest, then the next request."""
        try:
            keep = self._end_exchange(relay)
            self.router.balancer.release(relay.endpoint.url)
            self.router.request_finished()
            self._answered(keep)
        except Exception:
            # Called from an endpoint connection's parser: an error must end here, with this client.
            logger.exception("the router failed to answer a request")
            self.abort()

    def _abandon(self, relay: Relay) -> None:
        """The client left during an exchange started at once: end it, not counting it an error."""
        relay.abandon()
        self._left_mid_exchange(relay)
        self.router.balancer.release(relay.endpoint.url)
        self.router.request_finished()

    async def _proxy(self, request: Request, route: Route, draw: float) -> bool:
        router = self.router
        balancer = router.balancer
        metrics = router.metrics
        tried: set[str] = set()
        counted_fallback = False
        for _attempt in range(router.settings.max_attempts):
            pick = balancer.pick(route, draw, frozenset(tried))
            if pick is None:
                break
            side = pick.side
            if pick.fell_back and not counted_fallback:
                counted_fallback = True
                metrics.fallback(route.namespace, route.name, "away" if side == "home" else "home")
            endpoint = pick.endpoint
            url = endpoint.url
            tried.add(url)
            balancer.acquire(url)
            try:
                try:
                    outgoing = await self._outgoing(request, endpoint, side)
                except MalformedBodyError as error:
                    return self._own_answer(request, 400, f"bad request body: {error}")
                except BodyTooLargeError as error:
                    metrics.rejected(route.namespace, route.name, side, "body_too_large")
                    request.keep_alive = False  # the rest of the body is not read
                    return self._own_answer(request, 413, f"{error} (requests to {url} are signed)")
                except SigningUnavailableError as error:
                    # Before a byte was sent, but every signed endpoint would fail the same way.
                    metrics.error(route.namespace, route.name, side, "signing")
                    return self._own_answer(request, 502, f"cannot sign the request to {url}: {error}")
                try:
                    connection = await self.server.pool.connect(outgoing.origin)
                except (OSError, TimeoutError) as error:
                    # Nothing was sent: safe to try elsewhere, and this endpoint sits out a while.
                    period = balancer.refused(url)
                    metrics.ejection(route.namespace, route.name, side)
                    metrics.error(route.namespace, route.name, side, "connect")
                    logger.warning(
                        "ejected %s of %s for %.0f s: %s", url, route.key, period, error or type(error)
                    )
                    continue
                return await self._exchange(
                    request, route, side, endpoint=endpoint, connection=connection, outgoing=outgoing
                )
            finally:
                balancer.release(url)
        metrics.unavailable(route.namespace, route.name)
        return self._own_answer(request, 503, f"no usable endpoint for {route.key}: tried {len(tried)}")

    async def _outgoing(self, request: Request, endpoint: Endpoint, side: Side) -> Outgoing:
        """The head (and whole body, when signed) of one attempt at `endpoint`.

        Home pods get the client's Host, as behind any in-cluster proxy. An away endpoint gets its
        own: it is a provider's front (RunPod's proxy, SageMaker's runtime) that finds the deployment
        by Host, so the client's Host would reach nothing there; X-Forwarded-Host still carries it.
        """
        origin = self.router.origin(endpoint.url)
        if endpoint.auth is None:
            return self._plain_outgoing(request, origin, side)
        headers = self._forwarded_headers(request, origin, side)
        body = await self._whole_body(request)
        url = endpoint.target(request.target.decode("latin-1"))
        streaming = wants_stream(
            wire.text(wire.header_value(headers, b"accept")),
            wire.text(wire.header_value(headers, b"content-type")),
            body,
        )
        if streaming:
            url = stream_url(url)
            accept = wire.header_value(headers, b"accept")
            if accept is not None and wire.header_value(headers, b"x-amzn-sagemaker-accept") is None:
                # InvokeEndpointWithResponseStream reads the wanted answer type from this header.
                headers.append((b"X-Amzn-SageMaker-Accept", accept))
        forwarded = CIMultiDict((name.decode("latin-1"), value.decode("latin-1")) for name, value in headers)
        signed = await self.router.signing.signed_headers(
            request.method.decode(), url, forwarded, body, endpoint.auth
        )
        out: wire.Headers = [(b"Host", origin.host_header), (b"Content-Length", b"%d" % len(body))]
        out.extend((name.encode("latin-1"), value.encode("latin-1")) for name, value in signed.items())
        parts = urlsplit(url)
        signed_target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        start = request.method + b" " + signed_target.encode("latin-1") + b" HTTP/1.1"
        return Outgoing(origin, wire.head(start, out), body, streaming=streaming)

    def _plain_outgoing(self, request: Request, origin: Origin, side: Side) -> Outgoing:
        """The head of an unsigned attempt: the client's body follows as it comes."""
        headers = self._forwarded_headers(request, origin, side)
        if request.chunked:
            headers.append((b"Transfer-Encoding", b"chunked"))
        elif request.content_length is not None:
            headers.append((b"Content-Length", b"%d" % request.content_length))
        start = request.method + b" " + origin.path.encode() + request.target + b" HTTP/1.1"
        return Outgoing(origin, wire.head(start, headers), None, streaming=False)

    def _forwarded_headers(self, request: Request, origin: Origin, side: Side) -> wire.Headers:
        """The client's end-to-end headers, the Host this side gets, and X-Forwarded-*."""
        headers: wire.Headers = []
        prior: list[bytes] = []
        has_host = False
        for name, value in wire.end_to_end(request.headers).headers:
            lowered = name.lower()
            if lowered in _FORWARDING:
                if lowered == b"x-forwarded-for":
                    prior.append(value)
                continue
            if lowered == _HOST:
                if side == "away":
                    continue
                has_host = True
            elif lowered == b"expect" and request.expects_continue:
                continue  # the router says 100 Continue itself, when it starts reading the body
            headers.append((name, value))
        if not has_host:
            headers.insert(0, (b"Host", origin.host_header))
        prior.append(self.peer)
        headers.append((b"X-Forwarded-For", b", ".join(prior)))
        headers.append((b"X-Forwarded-Proto", b"http"))
        if request.host is not None:
            headers.append((b"X-Forwarded-Host", request.host))
        return headers

    async def _whole_body(self, request: Request) -> bytes:
        """The whole body of a request to a signed endpoint, read once; BodyTooLargeError past the limit."""
        limit = self.router.settings.signed_body_limit
        if request.content_length is not None and request.content_length > limit:
            raise BodyTooLargeError(limit)
        if not request.complete:
            self.send_continue(request)
            request.waiter = asyncio.get_running_loop().create_future()
            self.resume_reading("buffer")
            await request.waiter
        if request.body_size > limit:
            raise BodyTooLargeError(limit)
        whole = b"".join(request.body)
        request.body = [whole]
        return whole

    def send_continue(self, request: Request) -> None:
        """Tell a client waiting on `Expect: 100-continue` to send its body, once."""
        if request.expects_continue:
            request.expects_continue = False
            self.write(CONTINUE)

    async def _exchange(
        self,
        request: Request,
        route: Route,
        side: Side,
        *,
        endpoint: Endpoint,
        connection: UpstreamConnection,
        outgoing: Outgoing,
    ) -> bool:
        relay = Relay(
            self, request, route, side, endpoint=endpoint, connection=connection, streaming=outgoing.streaming
        )
        over: asyncio.Future[None] = self.loop.create_future()
        relay.over = lambda _relay: over.set_result(None)  # once: Relay calls it once
        try:
            self._begin_exchange(relay, outgoing)
            await over  # the response streams through the callbacks meanwhile
        except asyncio.CancelledError:
            self._left_mid_exchange(relay)
            raise
        except BaseException:
            self._release_exchange(relay)
            raise
        return self._end_exchange(relay)

    def _begin_exchange(self, relay: Relay, outgoing: Outgoing) -> None:
        self.relay = relay
        request = relay.request
        if outgoing.body is not None:
            relay.connection.begin(relay, outgoing.head + outgoing.body)
        elif not request.has_body:
            relay.connection.begin(relay, outgoing.head)
        else:
            relay.send_body_from(outgoing.head)

    def _end_exchange(self, relay: Relay) -> bool:
        """Answer what the exchange could not (400, 504, 502) and release it; whether the client's
        connection may serve another request."""
        request, route, side = relay.request, relay.route, relay.side
        try:
            if relay.bad_body is not None:
                return self._own_answer(request, 400, f"bad request body: {relay.bad_body}")
            url = relay.endpoint.url
            if relay.timed_out:
                self.router.metrics.error(route.namespace, route.name, side, "timeout")
                return self._own_answer(request, 504, f"upstream {url} sent no response in time")
            if relay.failure is not None:
                self.router.metrics.error(route.namespace, route.name, side, "upstream")
                logger.warning("upstream %s of %s failed before answering: %s", url, route.key, relay.failure)
                message = f"upstream {url} failed before answering: {relay.failure}"
                return self._own_answer(request, 502, message)
            return bool(relay.outcome) and relay.keep_alive and request.complete and not self.server.draining
        finally:
            self._release_exchange(relay)

    def _left_mid_exchange(self, relay: Relay) -> None:
        # The client left (a closed tab, a cancelled generation): nothing failed on our side, so it
        # is not an error a gate should count.
        if relay.responded:
            self.router.metrics.client_disconnected(relay.route.namespace, relay.route.name, relay.side)
        logger.debug("client of %s left mid-exchange", relay.route.key)
        self._release_exchange(relay)

    def _release_exchange(self, relay: Relay) -> None:
        self.relay = None
        relay.request.sink = None
        self.resume_reading("upstream")
        relay.connection.finish(reusable=relay.reusable)
