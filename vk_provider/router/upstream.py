"""Connections to endpoints: one `asyncio.Protocol` per connection, parsed by httptools, pooled.

A connection serves one exchange at a time. What it parses of the response goes straight to that
exchange's callbacks (`Exchange`), so the response's bytes reach the client from within this
protocol's `data_received`: no queue, no task, no await per chunk. When the endpoint's socket cannot
take more of a request body, the client's reads pause (`Exchange.pause_client`): a slow endpoint
never makes the router buffer an upload.

Idle connections are kept per origin (scheme, host, port) for `idle_timeout` seconds, shorter than
backends' own idle timeouts (commonly 60 s or more), so the router rarely sends on a connection the
backend is just closing: a request sent there cannot be retried, since bytes left.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
import time
from collections.abc import Callable
from typing import Protocol, cast
from urllib.parse import urlsplit

import httptools

from vk_provider.router.wire import Headers


class Exchange(Protocol):
    """What an upstream connection reports to the request it serves."""

    def on_response_head(self, status: int, reason: bytes, headers: Headers, keep_alive: bool) -> None: ...
    def on_response_body(self, data: bytes) -> None: ...
    def on_response_complete(self) -> None: ...
    def on_upstream_lost(self, error: Exception | None) -> None: ...
    def pause_client(self) -> None: ...
    def resume_client(self) -> None: ...
    def hold(self) -> None: ...
    def flush(self) -> None: ...


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where an endpoint's connections go, and the Host its requests carry."""

    scheme: str
    host: str
    port: int
    host_header: bytes
    path: str
    """The endpoint URL's path (a proxy front's prefix, a signed endpoint's invocation path)."""
    key: str
    """`scheme://host:port`: what pooled connections are filed under (a string hashes once; a
    dataclass hashes its fields on every lookup)."""

    @property
    def tls(self) -> bool:
        return self.scheme == "https"


def parse_origin(url: str) -> Origin:
    parts = urlsplit(url)
    if parts.hostname is None:
        raise ValueError(f"endpoint URL {url!r} has no host")
    default_port = 443 if parts.scheme == "https" else 80
    return Origin(
        scheme=parts.scheme,
        host=parts.hostname,
        port=parts.port or default_port,
        host_header=parts.netloc.rpartition("@")[2].encode(),
        path=parts.path,
        key=f"{parts.scheme}://{parts.hostname}:{parts.port or default_port}",
    )


class UpstreamConnection(asyncio.Protocol):
    """One connection to an endpoint; `begin()` sends a request head and binds an exchange."""

    def __init__(self, pool: UpstreamPool, origin: Origin) -> None:
        self.pool = pool
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._reason = b""
        self._headers: Headers = []
        self._complete = False
        self._keep_alive = False
        self._reading_paused = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # TCP or TLS: a stream transport

    def data_received(self, data: bytes) -> None:
        exchange = self.exchange
        if exchange is None:
            # An idle connection has nothing to say: the endpoint breaks HTTP or closes it.
            self.close()
            return
        exchange.hold()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self.exchange = None
            self.close()
            exchange.on_upstream_lost(error)
        finally:
            exchange.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.on_upstream_lost(exc)

    def pause_writing(self) -> None:
        if self.exchange is not None:
            self.exchange.pause_client()

    def resume_writing(self) -> None:
        if self.exchange is not None:
            self.exchange.resume_client()

    # httptools callbacks

    def on_message_begin(self) -> None:
        self._reason = b""
        self._headers = []

    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:
            return  # 100 Continue, 103 Early Hints: the final response follows on this connection
        self._keep_alive = self._parser.should_keep_alive()
        if self.exchange is not None:
            self.exchange.on_response_head(status, self._reason, self._headers, self._keep_alive)

    def on_body(self, data: bytes) -> None:
        if self.exchange is not None:
            self.exchange.on_response_body(data)

    def on_message_complete(self) -> None:
        if self._parser.get_status_code() < 200:
            return
        self._complete = True
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.on_response_complete()

    # for the exchange

    def begin(self, exchange: Exchange, data: bytes) -> None:
        """Bind `exchange` and send `data` (the request head, and its body when whole)."""
        self.exchange = exchange
        self._complete = False
        self.write(data)

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def pause_reading(self) -> None:
        """The client reads slower than this endpoint sends: stop reading until it catches up."""
        if self.transport is not None and not self.closed and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def finish(self, *, reusable: bool) -> None:
        """The exchange is over: keep the connection for the next one if it may be, else close it."""
        self.exchange = None
        if reusable and self._complete and self._keep_alive and not self.closed:
            self.resume_reading()  # paused by a slow client of the exchange that just ended
            self.pool.keep(self)
        else:
            self.close()

    def close(self) -> None:
        """Close now, dropping anything unsent: the exchange is over or broken."""
        self.exchange = None
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()


class UpstreamPool:
    """Idle connections per origin, and new ones on demand."""

    def __init__(
        self,
        *,
        connect_timeout: float,
        idle_timeout: float,
        ssl_context: Callable[[], ssl.SSLContext] = ssl.create_default_context,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self._ssl_context_factory = ssl_context
        self._ssl_context: ssl.SSLContext | None = None
        self._clock = clock
        self._idle: dict[str, list[UpstreamConnection]] = {}

    async def connect(self, origin: Origin) -> UpstreamConnection:
        """An idle connection to `origin`, or a new one.

        OSError (refused, unreachable, TLS refused) or TimeoutError when a new one cannot be made
        in `connect_timeout`: nothing was sent then.
        """
        connection = self.idle(origin)
        if connection is not None:
            return connection
        loop = asyncio.get_running_loop()
        context = self._tls_context() if origin.tls else None
        async with asyncio.timeout(self.connect_timeout):
            _transport, connection = await loop.create_connection(
                lambda: UpstreamConnection(self, origin),
                origin.host,
                origin.port,
                ssl=context,
                server_hostname=origin.host if context is not None else None,
            )
        return connection

    def idle(self, origin: Origin) -> UpstreamConnection | None:
        """A pooled connection to `origin`, taken out of the pool, or None."""
        idle = self._idle.get(origin.key)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        return None

    def keep(self, connection: UpstreamConnection) -> None:
        connection.idle_since = self._clock()
        self._idle.setdefault(connection.origin.key, []).append(connection)

    def forget(self, connection: UpstreamConnection) -> None:
        idle = self._idle.get(connection.origin.key)
        if idle and connection in idle:
            idle.remove(connection)

    def sweep(self) -> None:
        """Close connections idle longer than `idle_timeout` (called about once a second)."""
        cutoff = self._clock() - self.idle_timeout
        for connections in self._idle.values():
            for connection in [c for c in connections if c.idle_since < cutoff]:
                connections.remove(connection)
                connection.close()

    def close(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()

    def idle_count(self) -> int:
        return sum(len(connections) for connections in self._idle.values())

    def _tls_context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = self._ssl_context_factory()
        return self._ssl_context
