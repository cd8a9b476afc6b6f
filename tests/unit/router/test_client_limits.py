"""What one client may hold: a request head has a deadline and a size, a process a number of connections.

Each refusal is answered as servers answer it (408, 414, 431, 503), closes the connection, is counted
by reason, and leaves other clients' requests alone. A request just inside every limit passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from tests.unit.router import backends, route, served_router, table
from tests.unit.router.rawhttp import connect, read_response
from vk_provider.router import Router
from vk_provider.router.metrics import CLIENT_REFUSAL_REASONS
from vk_provider.router.proxy import ProxySettings
from vk_provider.router.server import ProxyServer

LIMITS = ProxySettings(
    header_timeout=1.0,
    max_request_line=1024,
    max_header_bytes=4096,
    max_headers=20,
    max_client_connections=4,
)
WITHIN = 10.0
"""Seconds a refusal may take to arrive: the 1 s deadline plus the once-a-second sweep, with room."""


@contextlib.asynccontextmanager
async def limited_router() -> AsyncIterator[tuple[Router, ProxyServer]]:
    async with backends("home") as (home,):
        router = Router(table(route(home=(home.endpoint(),))), settings=LIMITS)
        async with served_router(router) as server:
            yield router, server


async def exchange(port: int, raw: bytes) -> tuple[int, bytes, bool]:
    """Send `raw` on a new connection: (status, body, whether the router then closed it)."""
    reader, writer = await connect(port)
    try:
        writer.write(raw)
        async with asyncio.timeout(WITHIN):
            response = await read_response(reader)
            # A response that says it closes the connection must be followed by the end of it.
            closed = response.closes and await reader.read() == b""
        return response.status, response.body, closed
    finally:
        writer.close()


def refusals(router: Router) -> dict[str, float]:
    text = router.metrics.exposition().decode()
    counts = {}
    for reason in CLIENT_REFUSAL_REASONS:
        line = next(
            line for line in text.splitlines() if f'client_refusals_total{{reason="{reason}"}}' in line
        )
        counts[reason] = float(line.rsplit(" ", 1)[1])
    return counts


async def test_every_refusal_reason_is_counted_from_zero() -> None:
    async with limited_router() as (router, _):
        assert refusals(router) == dict.fromkeys(CLIENT_REFUSAL_REASONS, 0.0)


async def test_a_request_inside_every_limit_passes() -> None:
    async with limited_router() as (router, server):
        target = b"/" + b"a" * 1000
        headers = b"".join(b"X-H%d: %b\r\n" % (number, b"v" * 150) for number in range(19))
        status, body, _ = await exchange(
            server.port, b"GET " + target + b" HTTP/1.1\r\nHost: h\r\n" + headers + b"\r\n"
        )
        assert status == 200, body
        assert refusals(router) == dict.fromkeys(CLIENT_REFUSAL_REASONS, 0.0)


@pytest.mark.parametrize(
    ("raw", "status", "reason"),
    [
        (b"GET /" + b"a" * 2000 + b" HTTP/1.1\r\nHost: h\r\n\r\n", 414, "request_line_too_long"),
        (
            b"GET / HTTP/1.1\r\nHost: h\r\n" + b"".join(b"X-H%d: v\r\n" % n for n in range(25)) + b"\r\n",
            431,
            "too_many_headers",
        ),
        (b"GET / HTTP/1.1\r\nHost: h\r\n" + b"X-Big: " + b"v" * 5000 + b"\r\n\r\n", 431, "header_too_large"),
        # One header line that never ends: the parser would keep it whole; the head's bytes are bounded.
        (b"GET / HTTP/1.1\r\nHost: h\r\nX-Endless: " + b"v" * 200_000, 431, "header_too_large"),
    ],
    ids=["long-target", "many-headers", "big-header", "endless-header"],
)
async def test_an_oversized_head_is_refused_and_the_connection_closed(
    raw: bytes, status: int, reason: str
) -> None:
    async with limited_router() as (router, server):
        got, body, closed = await exchange(server.port, raw)
        assert got == status, body
        assert closed
        assert refusals(router)[reason] == 1


async def test_a_slow_head_is_cut_at_the_deadline_while_other_clients_are_served() -> None:
    async with limited_router() as (router, server):
        reader, writer = await connect(server.port)
        started = time.monotonic()
        writer.write(b"GET / HTTP/1.1\r\nHost: h\r\n")

        async def dribble() -> None:
            for number in range(100):
                writer.write(b"X-Slow-%d: v\r\n" % number)
                await asyncio.sleep(0.2)  # slowloris's pace between header lines (noqa: sleep-ok)

        dribbling = asyncio.create_task(dribble())
        try:
            status, body, _ = await exchange(server.port, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            assert status == 200, body  # another client meanwhile
            async with asyncio.timeout(WITHIN):
                response = await read_response(reader)
            cut_after = time.monotonic() - started
        finally:
            dribbling.cancel()
            writer.close()
        assert response.status == 408, response
        assert LIMITS.header_timeout <= cut_after < LIMITS.header_timeout + 3.0
        assert refusals(router)["header_timeout"] == 1


async def test_connections_past_the_cap_are_answered_503_and_closed() -> None:
    async with limited_router() as (router, server):
        held = [await connect(server.port) for _ in range(LIMITS.max_client_connections)]
        try:
            async with asyncio.timeout(WITHIN):
                while len(server.connections) < LIMITS.max_client_connections:  # noqa: ASYNC110 - a count
                    await asyncio.sleep(0.01)  # a bounded poll of the accept loop (noqa: sleep-ok)
            status, body, closed = await exchange(server.port, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            assert (status, closed) == (503, True), body
            assert refusals(router)["connection_limit"] == 1
            # A held connection still serves.
            reader, writer = held[0]
            writer.write(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            async with asyncio.timeout(WITHIN):
                assert (await read_response(reader)).status == 200
        finally:
            for _, writer in held:
                writer.close()
        # Once they are gone, new connections are served again.
        async with asyncio.timeout(WITHIN):
            while server.connections:  # noqa: ASYNC110 - a set the protocol callbacks empty
                await asyncio.sleep(0.01)  # a bounded poll (noqa: sleep-ok)
        status, body, _ = await exchange(server.port, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        assert status == 200, body
