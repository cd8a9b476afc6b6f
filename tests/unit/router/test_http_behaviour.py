"""HTTP/1.1 as the router must speak it, seen from raw sockets on both sides.

Each test is one behaviour a reverse proxy in front of inference servers needs: connections reused on
both sides, backpressure both ways (a slow reader or a slow upstream never makes the router buffer a
whole body), HEAD, `Expect: 100-continue`, upgrades, malformed and pipelined requests, an upstream
that never answers, TLS upstreams, and a client that leaves mid-response. The clients write their
bytes themselves and the backends are raw asyncio servers, so nothing here depends on how the router
is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.unit.local import until
from vk_provider.router import ProxyServer, ProxySettings, Router

from . import local_tls, route, served_router, table
from .rawhttp import (
    RawServer,
    Received,
    RecordingBackend,
    Reply,
    RequestReader,
    Response,
    connect,
    header_value,
    read_head,
    read_response,
    reply_body,
)

WITHIN = 20.0
"""Seconds any awaited answer may take: generous for a loaded machine, short of hanging the run."""
QUICK = 10.0
"""Seconds for an answer the router gives by itself, with no upstream involved (still generous)."""


def plain_reply(size: int = 100) -> Reply:
    return Reply(status=200, reason=b"OK", headers=[], framing="length", size=size, pieces=1, seed=0)


@contextlib.asynccontextmanager
async def proxied(
    backend: RawServer, settings: ProxySettings | None = None
) -> AsyncIterator[tuple[Router, ProxyServer]]:
    router = Router(table(route(home=(backend.endpoint(),))), settings=settings)
    async with served_router(router) as server:
        yield router, server


@contextlib.asynccontextmanager
async def client_of(
    server: ProxyServer, *, receive_buffer: int | None = None
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    if receive_buffer is None:
        reader, writer = await connect(server.port)
    else:
        reader, writer = await _small_buffer_connection(server.port, receive_buffer)
    try:
        yield reader, writer
    finally:
        writer.transport.abort()


async def _small_buffer_connection(port: int, size: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection whose kernel receive buffer is `size`, so what a stalled client holds is small."""
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        return await asyncio.open_connection(sock=sock, limit=1 << 20)
    except BaseException:
        sock.close()
        raise


def get(target: bytes = b"/", *, extra: bytes = b"") -> bytes:
    return b"GET " + target + b" HTTP/1.1\r\nHost: svc.example\r\n" + extra + b"\r\n"


def post(target: bytes, body: bytes, *, extra: bytes = b"") -> bytes:
    head = b"POST " + target + b" HTTP/1.1\r\nHost: svc.example\r\nContent-Length: %d\r\n" % len(body)
    return head + extra + b"\r\n" + body


async def answer(reader: asyncio.StreamReader, *, method: bytes = b"GET") -> Response:
    async with asyncio.timeout(WITHIN):
        return await read_response(reader, method=method)


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    """Whether the peer closes the connection (EOF or reset) with nothing more to read."""
    async with asyncio.timeout(WITHIN):
        try:
            return await reader.read() == b""
        except ConnectionResetError:
            return True


# --- Keep-alive ----------------------------------------------------------------------------------


async def test_a_client_connection_carries_request_after_request() -> None:
    async with (
        RecordingBackend(lambda _received: plain_reply(size=300)) as backend,
        proxied(backend) as (_, server),
    ):
        async with client_of(server) as (reader, writer):
            sent = [get(b"/one"), post(b"/two", b"a body"), get(b"/three?x=1"), post(b"/four", b"")]
            for number, request in enumerate(sent):
                writer.write(request)
                response = await answer(reader)
                assert response.status == 200, number
                assert not response.closes, f"the router closed the connection after request {number}"
                assert response.body == reply_body(backend.received[number], 300)
        assert [received.target for received in backend.received] == [
            b"/one",
            b"/two",
            b"/three?x=1",
            b"/four",
        ]


async def test_sequential_requests_reuse_upstream_connections() -> None:
    requests = 12
    async with RecordingBackend(lambda _received: plain_reply()) as backend, proxied(backend) as (_, server):
        for number in range(requests):
            # A new client connection each time: only the upstream side can be reused.
            async with client_of(server) as (reader, writer):
                if number % 3 == 0:
                    writer.write(get(b"/n%d" % number))
                elif number % 3 == 1:
                    writer.write(post(b"/n%d" % number, b"x" * 5000))
                else:
                    writer.write(
                        b"PUT /n%d HTTP/1.1\r\nHost: svc.example\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"3\r\nabc\r\n0\r\n\r\n" % number
                    )
                assert (await answer(reader)).status == 200
        assert len(backend.received) == requests
        assert backend.connections <= requests // 2, f"{backend.connections} upstream connections"


# --- Backpressure --------------------------------------------------------------------------------

FLOOD = 256 << 20
"""A body far larger than every buffer on the way (kernel socket buffers autotune to a few MiB)."""
PIECE = 64 << 10


@dataclasses.dataclass
class Progress:
    """How far a writer got, and since when its `drain()` has been blocked (None: it is not)."""

    sent: int = 0
    blocked_since: float | None = None

    def stalled_for(self) -> float:
        if self.blocked_since is None:
            return 0.0
        return asyncio.get_running_loop().time() - self.blocked_since

    async def write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        self.sent += len(data)
        self.blocked_since = asyncio.get_running_loop().time()
        await writer.drain()
        self.blocked_since = None


STALLED = 1.0
"""Seconds a drain must stay blocked to count as stalled: a relay that keeps up never blocks this long."""


async def test_a_client_that_stops_reading_stops_the_upstreams_writes() -> None:
    progress = Progress()

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await RequestReader(reader).next()
        await progress.write(writer, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % FLOOD)
        progress.sent = 0
        piece = b"x" * PIECE
        while progress.sent < FLOOD:
            await progress.write(writer, piece)

    async with (
        RawServer(flood) as backend,
        proxied(backend) as (_, server),
        client_of(server, receive_buffer=64 << 10) as (reader, writer),
    ):
        writer.write(get(b"/big"))
        async with asyncio.timeout(WITHIN):
            status, _headers = await read_head(reader)
        assert status == 200
        await until(lambda: progress.stalled_for() > STALLED, within=WITHIN)
        assert progress.sent < FLOOD // 8, f"the backend wrote {progress.sent} bytes to a client reading none"
        # Reading again lets the backend write again, to the end.
        received = 0
        async with asyncio.timeout(120):
            while received < FLOOD:
                data = await reader.read(1 << 20)
                assert data, f"the response ended after {received} bytes"
                received += len(data)
        assert progress.sent == FLOOD


async def test_a_slow_upstream_stops_the_clients_upload() -> None:
    head_read = asyncio.Event()
    may_read = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        head_read.set()
        await may_read.wait()
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        received = 0
        while received < length:
            data = await reader.read(1 << 20)
            assert data
            received += len(data)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%d" % (len(b"%d" % received), received))
        await writer.drain()

    progress = Progress()

    async def upload(writer: asyncio.StreamWriter) -> None:
        await progress.write(
            writer, b"POST /up HTTP/1.1\r\nHost: svc.example\r\nContent-Length: %d\r\n\r\n" % FLOOD
        )
        progress.sent = 0
        piece = b"y" * PIECE
        while progress.sent < FLOOD:
            await progress.write(writer, piece)

    async with (
        RawServer(slow) as backend,
        proxied(backend) as (_, server),
        client_of(server) as (reader, writer),
    ):
        sending = asyncio.create_task(upload(writer))
        try:
            async with asyncio.timeout(WITHIN):
                await head_read.wait()
            await until(lambda: progress.stalled_for() > STALLED, within=WITHIN)
            assert progress.sent < FLOOD // 8, (
                f"the client sent {progress.sent} bytes to an upstream reading none"
            )
            may_read.set()
            async with asyncio.timeout(120):
                await sending
            response = await answer(reader)
        finally:
            sending.cancel()
        assert (response.status, response.body) == (200, b"%d" % FLOOD)


# --- HEAD, Expect, upgrades ----------------------------------------------------------------------


@pytest.mark.parametrize("body_after_head", [False, True], ids=["correct-upstream", "upstream-sends-a-body"])
async def test_a_head_response_relays_no_body(body_after_head: bool) -> None:
    async def server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests = RequestReader(reader)
        while (received := await requests.next()) is not None:
            if received.method == b"HEAD":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nX-Kind: head\r\n\r\n")
                if body_after_head:
                    writer.write(b"z" * 1000)  # wrong, but seen in the wild
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nX-Kind: get\r\n\r\nget body")
            await writer.drain()

    async with (
        RawServer(server) as backend,
        proxied(backend) as (_, server_),
        client_of(server_) as (reader, writer),
    ):
        writer.write(b"HEAD /thing HTTP/1.1\r\nHost: svc.example\r\n\r\n")
        response = await answer(reader, method=b"HEAD")
        assert response.status == 200
        assert header_value(response.headers, b"x-kind") == b"head"
        if response.closes:
            assert await closed_by_peer(reader)
            return
        # The next bytes on the connection must be the next response's, not a HEAD body.
        writer.write(get(b"/thing"))
        following = await answer(reader)
        assert (following.status, following.body) == (200, b"get body")
        assert header_value(following.headers, b"x-kind") == b"get"


async def test_expect_100_continue_gets_the_body_upstream() -> None:
    body = bytes(range(256)) * 40
    async with (
        RecordingBackend(lambda _received: plain_reply(size=10)) as backend,
        proxied(backend) as (_, server),
    ):
        async with client_of(server) as (reader, writer):
            writer.write(
                b"POST /generate HTTP/1.1\r\nHost: svc.example\r\nExpect: 100-continue\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body)
            )
            # The client holds its body until told to send it: a router that waits for it hangs here.
            async with asyncio.timeout(WITHIN):
                status, _headers = await read_head(reader)
            assert status == 100, f"got {status} before the body was sent: the body could never arrive"
            writer.write(body)
            response = await answer(reader)
            assert response.status == 200
        assert [received.body for received in backend.received] == [body]


async def test_an_upgrade_is_refused_with_a_message_or_passed_through_never_left_hanging() -> None:
    async def websocket(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
        while data := await reader.read(1024):
            writer.write(data)  # an echo, past the upgrade

    async with (
        RawServer(websocket) as backend,
        proxied(backend) as (_, server),
        client_of(server) as (reader, writer),
    ):
        writer.write(
            get(
                b"/ws",
                extra=b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
            )
        )
        response = await answer(reader)
        if response.status == 101:
            writer.write(b"ping")
            async with asyncio.timeout(WITHIN):
                assert await reader.readexactly(4) == b"ping"
            return
        assert 400 <= response.status < 600, response.status
        assert response.body.strip(), "a refusal says why"
        if response.closes:
            assert await closed_by_peer(reader)
        else:
            writer.write(get(b"/after"))
            assert (await answer(reader)).status < 600


# --- Malformed and pipelined requests ------------------------------------------------------------

MALFORMED = {
    "garbage": b"THIS IS NOT HTTP\r\n\r\n",
    "header-without-colon": b"GET / HTTP/1.1\r\nHost: svc.example\r\nNo colon here\r\n\r\n",
    "space-in-header-name": b"GET / HTTP/1.1\r\nHost: svc.example\r\nBad Name: x\r\n\r\n",
    "non-numeric-length": b"POST / HTTP/1.1\r\nHost: svc.example\r\nContent-Length: abc\r\n\r\n",
    "conflicting-lengths": (
        b"POST / HTTP/1.1\r\nHost: svc.example\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"
    ),
    "length-and-chunked": (
        b"POST / HTTP/1.1\r\nHost: svc.example\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"0\r\n\r\n"
    ),
    "control-byte-in-target": b"GET /a\x01b HTTP/1.1\r\nHost: svc.example\r\n\r\n",
    "unknown-version": b"GET / HTTP/7.3\r\nHost: svc.example\r\n\r\n",
}


async def test_a_malformed_request_gets_400_and_the_connection_closes() -> None:
    async def one(name: str, request_bytes: bytes, server: ProxyServer) -> str | None:
        """What went wrong for this request, or None."""
        async with client_of(server) as (reader, writer):
            writer.write(request_bytes)
            try:
                async with asyncio.timeout(QUICK):
                    response = await read_response(reader)
            except TimeoutError:
                return f"{name}: no answer"
            if response.status != 400:
                return f"{name}: {response.status}"
            if not await closed_by_peer(reader):
                return f"{name}: the connection stayed open"
            return None

    async with RecordingBackend(lambda _received: plain_reply()) as backend, proxied(backend) as (_, server):
        # All at once, each on its own connection, so a router that never answers costs one timeout.
        outcomes = await asyncio.gather(*(one(name, data, server) for name, data in MALFORMED.items()))
        assert [outcome for outcome in outcomes if outcome is not None] == []
        assert backend.received == []


async def test_a_good_request_then_garbage_gets_its_answer_then_400() -> None:
    async with (
        RecordingBackend(lambda _received: plain_reply(size=7)) as backend,
        proxied(backend) as (_, server),
    ):
        async with client_of(server) as (reader, writer):
            writer.write(get(b"/fine") + b"NOT HTTP AT ALL\r\n\r\n")
            first = await answer(reader)
            assert first.status == 200
            assert first.body == reply_body(backend.received[0], 7)
            assert (await answer(reader)).status == 400
            assert await closed_by_peer(reader)
        assert [received.target for received in backend.received] == [b"/fine"]


async def test_a_malformed_chunk_after_the_head_was_relayed_ends_both_connections() -> None:
    async with RecordingBackend(lambda _received: plain_reply()) as backend, proxied(backend) as (_, server):
        async with client_of(server) as (reader, writer):
            writer.write(
                b"POST /up HTTP/1.1\r\nHost: svc.example\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
            )
            await until(lambda: backend.connections == 1, within=WITHIN)
            writer.write(b"NOT-A-CHUNK-SIZE\r\n\r\n")
            async with asyncio.timeout(QUICK):
                response = await read_response(reader)
            assert 400 <= response.status < 600, response.status
            assert await closed_by_peer(reader)
        await until(lambda: backend.open_connections == 0, within=WITHIN)
        assert backend.received == []  # the upstream never got a whole (hence valid) request


async def test_pipelined_requests_are_answered_in_order() -> None:
    def reply(received: Received) -> Reply:
        return plain_reply(size=len(received.target) * 100)

    async with RecordingBackend(reply) as backend, proxied(backend) as (_, server):
        async with client_of(server) as (reader, writer):
            writer.write(
                post(b"/first", b"first body")
                + b"PUT /second-longer HTTP/1.1\r\nHost: svc.example\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"6\r\nsecond\r\n5\r\n body\r\n0\r\n\r\n"
                + b"HEAD /third HTTP/1.1\r\nHost: svc.example\r\n\r\n"
                + get(b"/fourth-the-longest", extra=b"Connection: close\r\n")
            )
            responses = [
                await answer(reader),
                await answer(reader),
                await answer(reader, method=b"HEAD"),
                await answer(reader),
            ]
            assert await closed_by_peer(reader)
        received = backend.received
        assert [(r.method, r.target, r.body) for r in received] == [
            (b"POST", b"/first", b"first body"),
            (b"PUT", b"/second-longer", b"second body"),
            (b"HEAD", b"/third", b""),
            (b"GET", b"/fourth-the-longest", b""),
        ]
        assert [response.status for response in responses] == [200] * 4
        for number in (0, 1, 3):
            assert responses[number].body == reply_body(received[number], len(received[number].target) * 100)
        assert responses[2].body == b""


# --- Upstreams that stall, TLS, clients that leave -----------------------------------------------


async def test_an_upstream_that_never_answers_gets_504() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await RequestReader(reader).next()
        await reader.read()  # never answers; returns when the router gives up on the connection

    settings = ProxySettings(response_timeout=1.0)
    async with RawServer(silent) as backend, proxied(backend, settings) as (_, server):
        async with client_of(server) as (reader, writer):
            writer.write(get(b"/slow"))
            response = await answer(reader)
            assert response.status in (502, 504), response.status
            assert response.body.strip()
        await until(lambda: backend.open_connections == 0, within=WITHIN)


async def test_a_tls_upstream_trusted_through_the_ca_setting_gets_the_requests(tmp_path: Path) -> None:
    certificate_file, context = local_tls(tmp_path)
    settings = ProxySettings(upstream_ca_file=str(certificate_file))
    body = bytes(range(256)) * 1000
    size = 1 << 20
    async with (
        RecordingBackend(lambda _received: plain_reply(size=size), tls=context) as backend,
        proxied(backend, settings) as (_, server),
        client_of(server) as (reader, writer),
    ):
        assert backend.url.startswith("https://127.0.0.1:")
        for _ in range(2):
            writer.write(post(b"/tls", body))
            response = await answer(reader)
            assert response.status == 200
            assert response.body == reply_body(backend.received[-1], size)
        assert [received.body for received in backend.received] == [body, body]
        assert backend.connections == 1


async def test_a_tls_upstream_with_an_untrusted_certificate_is_refused(tmp_path: Path) -> None:
    _certificate_file, context = local_tls(tmp_path)
    async with (
        RecordingBackend(lambda _received: plain_reply(), tls=context) as backend,
        proxied(backend) as (_, server),
        client_of(server) as (reader, writer),
    ):
        writer.write(get(b"/tls"))
        response = await answer(reader)
        # Not trusted by default: no request gets there. (502, or 503 when the router counts the
        # failed handshake as an endpoint it cannot connect to, as it does a refused connection.)
        assert response.status in (502, 503), response.status
        assert backend.received == []


async def test_a_client_leaving_mid_response_closes_the_upstream_connection() -> None:
    upstream_closed = asyncio.Event()

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await RequestReader(reader).next()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (100 << 20) + b"t" * 1000)
        await writer.drain()
        try:
            await reader.read()  # the router sends nothing more: this ends when it closes the connection
        finally:
            upstream_closed.set()

    async with RawServer(endless) as backend, proxied(backend) as (router, server):
        async with client_of(server) as (reader, writer):
            writer.write(get(b"/generate"))
            async with asyncio.timeout(WITHIN):
                status, _headers = await read_head(reader)
                assert status == 200
                assert len(await reader.readexactly(1000)) == 1000
        # The client is gone with most of the body unsent.
        async with asyncio.timeout(WITHIN):
            await upstream_closed.wait()
        await until(lambda: router.in_flight == 0, within=WITHIN)
