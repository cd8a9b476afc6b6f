"""What the router's supervisor and its workers say to each other, and the channel it travels on.

One Unix socketpair per worker, inherited as a file descriptor; over it, both ways, length-prefixed
pickled messages, read and written with asyncio streams. Pickle, because route tables are frozen
dataclasses (no converter to keep in step with `table`) and both ends are this same program: the
socketpair reaches no third process. A message is a `Request` (wants a `Reply` with its id), a
`Reply`, or a notice (any other message: a new table, `Stop`).

Supervisor to worker: the `Start` request (settings and the current table; answered `Listening` or
`StartFailed`), `TableChange` and `Stop` notices, `StatusQuery` and `MetricsQuery` requests (the
supervisor merges the answers for the admin listener). Workers ask nothing of the supervisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import pickle
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from vk_provider.router.proxy import ProxySettings
from vk_provider.routetable.table import Route, RouteTable

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class WorkerConfig:
    """What every worker serves with, taken from the router's command line."""

    host: str
    port: int
    proxy: ProxySettings
    shutdown_grace: float
    shutdown_delay: float = 0.0
    """A SIGTERM of its own (the container's whole process group signalled) waits this long before the
    drain, as the supervisor does before it stops the workers."""
    aws_profile: str | None = None
    aws_credentials_file: Path | None = None
    log_level: str = "INFO"
    log_format: str = "text"


@dataclasses.dataclass(frozen=True)
class NumberedTable:
    """A route table and its number in the supervisor's sequence; pushed to workers as it is."""

    sequence: int
    table: RouteTable


@dataclasses.dataclass(frozen=True)
class TableChange:
    """Table `sequence` as a change to table `base`: what a worker serving `base` applies.

    Why not the whole table: a status change of one Offload changes one route, but a thousand routes
    pickle to about 400 KB, which the supervisor pickled once per worker and each worker unpickled, on
    every change of any Offload. A change carries the routes that changed; those that did not are
    named by key, which keeps the new table's order without a rule of its own.
    """

    sequence: int
    base: int
    routes: tuple[Route | str, ...]
    """The new table's routes in order: a route that is new or changed, or the key of one that the base
    table holds as it is."""
    host_owners: Mapping[str, str] | None
    """The new table's host owners; None when they are the base table's."""

    @classmethod
    def between(cls, base: NumberedTable, new: NumberedTable) -> TableChange:
        kept = {route.key: route for route in base.table.routes}
        routes = tuple(
            route.key if (same := kept.get(route.key)) is route or same == route else route
            for route in new.table.routes
        )
        owners = None if new.table.host_owners == base.table.host_owners else new.table.host_owners
        return cls(new.sequence, base.sequence, routes, owners)

    def applied_to(self, base: RouteTable) -> RouteTable:
        kept = {route.key: route for route in base.routes}
        routes = (kept[route] if isinstance(route, str) else route for route in self.routes)
        owners = base.host_owners if self.host_owners is None else self.host_owners
        return RouteTable.of(routes, owners)


@dataclasses.dataclass(frozen=True)
class Start:
    """Request to a new worker: serve with this config and table; answered `Listening` or
    `StartFailed` once the worker listens (or cannot)."""

    slot: int
    config: WorkerConfig
    table: NumberedTable


@dataclasses.dataclass(frozen=True)
class Listening:
    pid: int
    port: int


@dataclasses.dataclass(frozen=True)
class StartFailed:
    reason: str


@dataclasses.dataclass(frozen=True)
class Stop:
    """Notice to a worker: stop listening, finish the requests in flight (up to the grace), exit."""


@dataclasses.dataclass(frozen=True)
class StatusQuery:
    """Request to a worker, answered with its `WorkerStatus`."""


@dataclasses.dataclass(frozen=True)
class MetricsQuery:
    """Request to a worker, answered with its metrics exposition (bytes)."""


@dataclasses.dataclass(frozen=True)
class WorkerStatus:
    slot: int
    pid: int
    sequence: int
    """The number of the table the worker serves."""
    in_flight: int
    requests: int
    """Requests the worker has relayed an answer for since it started."""
    document: dict[str, Any]
    """The worker's own `Router.status()`."""


@dataclasses.dataclass(frozen=True)
class Request:
    """A message that wants a `Reply` with the same id."""

    id: int
    body: object


@dataclasses.dataclass(frozen=True)
class Reply:
    id: int
    body: object


@dataclasses.dataclass(frozen=True)
class _Failure:
    """The reply when the handler of a request raised: the asker learns at once, not at its timeout."""

    reason: str


class ChannelClosedError(ConnectionError):
    """The other process closed its end (it exited, or is exiting)."""


class RemoteError(Exception):
    """The other process failed to handle a request."""


_FRAME = struct.Struct("!I")


class Channel:
    """Messages both ways over one stream: requests with replies (matched by id), and notices.

    `serve` reads until the other end closes; replies resolve the `request` calls waiting for them,
    each request runs `on_request` in a task of its own (so a slow one never holds up the reading,
    e.g. the supervisor's answer to one worker, which queries every worker), and anything else goes
    to `on_notice`.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[object]] = {}
        self._handlers: set[asyncio.Task[None]] = set()
        self.closed = False

    @classmethod
    async def over(cls, sock: socket.socket) -> Channel:
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        return cls(reader, writer)

    def send(self, message: object) -> None:
        """Queue `message` for the other end; dropped once the channel is closed (the other end is
        gone, or going, and has no use for it)."""
        if self.closed or self._writer.is_closing():
            return
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self._writer.write(_FRAME.pack(len(payload)) + payload)

    async def flush(self) -> None:
        """Wait until what was sent is handed to the socket (before exiting, say)."""
        if not self._writer.is_closing():
            with contextlib.suppress(ConnectionError):  # closed meanwhile: nobody left to read it
                await self._writer.drain()

    async def receive(self) -> object:
        """The next message; ChannelClosedError at the end of the stream."""
        try:
            header = await self._reader.readexactly(_FRAME.size)
            payload = await self._reader.readexactly(_FRAME.unpack(header)[0])
        except (asyncio.IncompleteReadError, ConnectionError) as error:
            raise ChannelClosedError("the other end closed the channel") from error
        return pickle.loads(payload)  # noqa: S301 - from our own process at the socketpair's other end

    async def request(self, body: object, *, within: float) -> object:
        """Send `body` as a request and wait (up to `within` seconds) for its reply; TimeoutError,
        ChannelClosedError, or RemoteError when the other end failed to handle it."""
        if self.closed:
            raise ChannelClosedError("the channel is closed")
        request_id = next(self._ids)
        reply = self._waiting[request_id] = asyncio.get_running_loop().create_future()
        try:
            self.send(Request(request_id, body))
            async with asyncio.timeout(within):
                answer = await reply
        finally:
            self._waiting.pop(request_id, None)
        if isinstance(answer, _Failure):
            raise RemoteError(answer.reason)
        return answer

    def reply(self, request: Request, body: object) -> None:
        """Answer a request `receive` returned (before `serve` runs)."""
        self.send(Reply(request.id, body))

    async def serve(
        self,
        on_request: Callable[[object], Awaitable[object]],
        on_notice: Callable[[object], None],
    ) -> None:
        """Read and dispatch until the other end closes; then fail the requests still waiting."""
        try:
            while True:
                message = await self.receive()
                if isinstance(message, Reply):
                    waiting = self._waiting.get(message.id)
                    if waiting is not None and not waiting.done():
                        waiting.set_result(message.body)
                elif isinstance(message, Request):
                    task = asyncio.create_task(self._handle(message, on_request))
                    self._handlers.add(task)
                    task.add_done_callback(self._handlers.discard)
                else:
                    on_notice(message)
        except ChannelClosedError:
            pass
        finally:
            self.close()

    async def _handle(self, request: Request, on_request: Callable[[object], Awaitable[object]]) -> None:
        try:
            answer = await on_request(request.body)
        except Exception as error:
            logger.exception("failed to answer %s", type(request.body).__name__)
            answer = _Failure(f"{type(error).__name__}: {error}")
        self.send(Reply(request.id, answer))

    def close(self) -> None:
        """Close our end; requests still waiting fail with ChannelClosedError."""
        self.closed = True
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(ChannelClosedError("the other end closed the channel"))
        for handler in self._handlers:
            handler.cancel()
        self._writer.close()
