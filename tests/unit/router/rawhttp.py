"""Raw HTTP/1.1 for the router's tests: a recording backend, request and response readers, written
on asyncio streams and httptools' parsers only, so the tests control every byte and framing choice.
Used by `test_differential` and `test_http_behaviour`.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import random
import ssl
from collections.abc import Awaitable, Callable
from typing import Literal, Self

import httptools

from vk_provider.router import Endpoint

Headers = list[tuple[bytes, bytes]]

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""RFC 9110 7.6.1: about one connection; a proxy consumes them and never forwards them."""

FRAMING = frozenset({b"content-length", b"transfer-encoding"})

TIMEOUT = 60.0
"""Seconds one example may take, generous for a loaded machine; a hang fails instead of blocking."""


# --- Comparing headers ---------------------------------------------------------------------------


def header_value(headers: Headers, lowered_name: bytes) -> bytes | None:
    """The last value of a header (its name lower-case), or None."""
    found = None
    for name, value in headers:
        if name.lower() == lowered_name:
            found = value
    return found


def connection_tokens(headers: Headers) -> set[bytes]:
    return {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.split(b",")
    }


def end_to_end(headers: Headers, *, drop_named: bool) -> Headers:
    """`headers` with lower-cased names, without hop-by-hop ones, the framing and X-Forwarded-*.

    `drop_named`: also without the headers the Connection header names, which a proxy drops too. On
    what the router sent, they are kept, so a named header that got through shows up as a difference.
    """
    named = connection_tokens(headers) if drop_named else set()
    kept: Headers = []
    for name, value in headers:
        lowered = name.lower()
        if lowered in HOP_BY_HOP or lowered in FRAMING or lowered in named:
            continue
        if lowered.startswith(b"x-forwarded-"):
            continue
        kept.append((lowered, value))
    return kept


# --- A raw server --------------------------------------------------------------------------------

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """A TCP (or TLS) server on 127.0.0.1 running `handler` per connection, and counting connections.

    Leaving it aborts the connections still open and waits for their handlers, so no test leaves a
    transport or a task behind.
    """

    def __init__(self, handler: Handler, *, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.connections = 0
        self.open_connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.errors: list[BaseException] = []
        """What handlers raised (asyncio would only log it): raised again on leaving."""

    @property
    def url(self) -> str:
        return f"{'https' if self.tls is not None else 'http'}://127.0.0.1:{self.port}"

    def endpoint(self) -> Endpoint:
        return Endpoint(self.url)

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
        if self.errors:
            raise self.errors[0]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self.connections += 1
        self.open_connections += 1
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the router went away: what the handler got is recorded already
        except asyncio.CancelledError:
            pass  # by __aexit__, which waits for this task: nobody else is to be told
        except Exception as error:
            self.errors.append(error)
        finally:
            self.open_connections -= 1
            self._writers.discard(writer)
            self._tasks.discard(task)
            writer.transport.abort()


@dataclasses.dataclass(frozen=True)
class Received:
    """One request as a server read it: the body de-chunked, the headers in arrival order."""

    method: bytes
    target: bytes
    version: str
    headers: Headers
    body: bytes
    keep_alive: bool


class RequestReader:
    """Reads whole requests off one connection, in order (pipelined ones too), with httptools."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._parser = httptools.HttpRequestParser(self)
        self._done: collections.deque[Received] = collections.deque()
        self._target = b""
        self._headers: Headers = []
        self._body: list[bytes] = []
        self.started = asyncio.Event()
        """Set once a request's head is read (its body may still be on the way)."""

    async def next(self) -> Received | None:
        """The next whole request, or None when the connection ends first."""
        while not self._done:
            data = await self._reader.read(65536)
            if not data:
                return None
            self._parser.feed_data(data)
        return self._done.popleft()

    # httptools callbacks

    def on_message_begin(self) -> None:
        self._target = b""
        self._headers = []
        self._body = []

    def on_url(self, url: bytes) -> None:
        self._target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.started.set()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._done.append(
            Received(
                method=self._parser.get_method(),
                target=self._target,
                version=self._parser.get_http_version(),
                headers=self._headers,
                body=b"".join(self._body),
                keep_alive=self._parser.should_keep_alive(),
            )
        )


# --- Reading responses ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Pace:
    """A slow reader: `piece` bytes a read, a short pause every `every` reads."""

    piece: int
    every: int


@dataclasses.dataclass(frozen=True)
class Response:
    status: int
    headers: Headers
    body: bytes
    closes: bool
    """Whether the server closes the connection after it (Connection: close, or a body read to the end)."""


class _PacedReader:
    def __init__(self, reader: asyncio.StreamReader, pace: Pace | None) -> None:
        self.reader = reader
        self.pace = pace
        self.reads = 0

    async def exactly(self, size: int) -> bytes:
        if self.pace is None:
            return await self.reader.readexactly(size)
        parts: list[bytes] = []
        left = size
        while left:
            data = await self.reader.read(min(left, self.pace.piece))
            if not data:
                raise asyncio.IncompleteReadError(b"".join(parts), size)
            parts.append(data)
            left -= len(data)
            await self._pause()
        return b"".join(parts)

    async def to_end(self) -> bytes:
        parts: list[bytes] = []
        while data := await self.reader.read(self.pace.piece if self.pace is not None else 65536):
            parts.append(data)
            await self._pause()
        return b"".join(parts)

    async def _pause(self) -> None:
        if self.pace is None:
            return
        self.reads += 1
        pause = 0.001 if self.reads % self.pace.every == 0 else 0
        await asyncio.sleep(pause)  # pacing a slow reader, not waiting for anything (noqa: sleep-ok)


async def read_head(reader: asyncio.StreamReader) -> tuple[int, Headers]:
    """The next response head: (status, headers as sent, names' case kept)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    assert version in (b"HTTP/1.1", b"HTTP/1.0"), lines[0]
    status = int(rest[:3])
    headers: Headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        assert colon, line
        assert name, line
        assert name == name.strip(), line
        headers.append((name, value.strip(b" \t")))
    return status, headers


async def read_response(
    reader: asyncio.StreamReader, *, method: bytes = b"GET", pace: Pace | None = None
) -> Response:
    """The next response (interim 1xx ones included), its body read as its framing says (RFC 9112 6.3)."""
    status, headers = await read_head(reader)
    paced = _PacedReader(reader, pace)
    closes = b"close" in connection_tokens(headers)
    encoding = header_value(headers, b"transfer-encoding")
    length = header_value(headers, b"content-length")
    if method == b"HEAD" or status < 200 or status in (204, 304):
        body = b""
    elif encoding is not None:
        assert encoding.lower().rsplit(b",", 1)[-1].strip() == b"chunked", encoding
        body = await _read_chunked(reader, paced)
    elif length is not None:
        body = await paced.exactly(int(length))
    else:
        body = await paced.to_end()
        closes = True
    return Response(status, headers, body, closes)


async def _read_chunked(reader: asyncio.StreamReader, paced: _PacedReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line[:-2].partition(b";")[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # a trailer field
            return b"".join(parts)
        parts.append(await paced.exactly(size))
        assert await reader.readexactly(2) == b"\r\n"


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)


async def write_in_pieces(writer: asyncio.StreamWriter, data: bytes, cuts: tuple[int, ...]) -> None:
    """`data` in several writes, split at `cuts`, each flushed (and the loop let run) before the next."""
    start = 0
    for cut in (*cuts, len(data)):
        if cut > start:
            writer.write(data[start:cut])
            await writer.drain()
            await asyncio.sleep(0)  # the reader sees this piece alone (noqa: sleep-ok)
            start = cut


def cut_points(raw: list[int], size: int) -> tuple[int, ...]:
    """Drawn integers as sorted distinct cut points strictly inside 0..size."""
    return tuple(sorted({value % size for value in raw if size and value % size}))


# --- What the client sends -----------------------------------------------------------------------

RequestFraming = Literal["none", "length", "chunked"]
REQUEST_FRAMINGS: list[RequestFraming] = ["none", "length", "chunked"]
ReplyFraming = Literal["length", "chunked", "close"]
"""A reply's body is sized, chunked, or ended by closing the connection."""
REPLY_FRAMINGS: list[ReplyFraming] = ["length", "chunked", "close"]


@dataclasses.dataclass(frozen=True)
class Request:
    method: bytes
    target: bytes
    headers: Headers
    """All header lines but the framing, in the order they are written."""
    body: bytes
    framing: RequestFraming
    framing_name: bytes
    """The framing header's name as written (its case varies)."""
    chunk_cuts: tuple[int, ...]
    chunk_extensions: bool
    write_cuts: tuple[int, ...]
    close: bool
    """The client asks to close after this one (Connection: close, among `headers`)."""

    def encode(self) -> bytes:
        lines = [self.method + b" " + self.target + b" HTTP/1.1"]
        lines.extend(name + b": " + value for name, value in self.headers)
        body = self.body
        if self.framing == "length":
            lines.append(self.framing_name + b": %d" % len(body))
        elif self.framing == "chunked":
            lines.append(self.framing_name + b": chunked")
            body = b""
            start = 0
            for cut in (*self.chunk_cuts, len(self.body)):
                if cut > start:
                    extension = b";piece=%d" % start if self.chunk_extensions else b""
                    body += b"%x%b\r\n%b\r\n" % (cut - start, extension, self.body[start:cut])
                    start = cut
            body += b"0\r\n\r\n"
        return b"\r\n".join(lines) + b"\r\n\r\n" + body


@dataclasses.dataclass(frozen=True)
class Reply:
    """What the backend answers a request (the body's bytes are derived from the request)."""

    status: int
    reason: bytes
    headers: Headers
    framing: ReplyFraming
    size: int
    pieces: int
    seed: int


def generator(seed: int | bytes) -> random.Random:
    """A reproducible generator of test bytes and cut points: repeatable, not secret."""
    return random.Random(seed)  # noqa: S311


def reply_body(received: Received, size: int) -> bytes:
    """Bytes that depend on everything the backend received of the request but its headers."""
    digest = hashlib.sha256(received.method + b" " + received.target + b"\n" + received.body).digest()
    return generator(digest).randbytes(size)


def reply_bytes(received: Received, reply: Reply) -> bytes:
    """The whole response to `received`: as for a GET for a HEAD (its head only), no body for 204/304."""
    rng = generator(reply.seed)
    headers = [*reply.headers, (b"X-Body-Digest", hashlib.sha256(received.body).hexdigest().encode())]
    body = reply_body(received, reply.size)
    if reply.status in (204, 304):
        if reply.status == 304 and reply.framing == "length":
            headers.append((b"Content-Length", b"%d" % len(body)))  # the representation's, allowed
        encoded = b""
    elif reply.framing == "length":
        headers.append((b"Content-Length", b"%d" % len(body)))
        encoded = body
    elif reply.framing == "chunked":
        headers.append((b"Transfer-Encoding", b"chunked"))
        cuts = cut_points([rng.randrange(1 << 30) for _ in range(rng.randrange(1, 40))], len(body))
        encoded = b""
        start = 0
        for cut in (*cuts, len(body)):
            if cut > start:
                encoded += b"%x\r\n%b\r\n" % (cut - start, body[start:cut])
                start = cut
        encoded += b"0\r\n\r\n"
    else:
        encoded = body
    if reply.framing == "close":
        headers.append((b"Connection", b"close"))
    start_line = b"HTTP/1.1 %d %b" % (reply.status, reply.reason)
    head = b"\r\n".join([start_line, *(name + b": " + value for name, value in headers)]) + b"\r\n\r\n"
    return head + (b"" if received.method == b"HEAD" else encoded)


class RecordingBackend(RawServer):
    """Records every request it gets, in order, and answers each what `reply` says for it."""

    def __init__(self, reply: Callable[[Received], Reply], *, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(self._answer_all, tls=tls)
        self.reply = reply
        self.received: list[Received] = []

    async def _answer_all(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests = RequestReader(reader)
        while (received := await requests.next()) is not None:
            self.received.append(received)
            reply = self.reply(received)
            data = reply_bytes(received, reply)
            rng = generator(reply.seed + 1)
            cuts = cut_points([rng.randrange(1 << 30) for _ in range(reply.pieces - 1)], len(data))
            await write_in_pieces(writer, data, cuts)
            if reply.framing == "close" or not received.keep_alive:
                return


# --- Drawing requests and replies ----------------------------------------------------------------
