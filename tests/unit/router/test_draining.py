"""A stopping router stops listening but finishes the requests it is relaying."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from tests.unit.local import until
from tests.unit.router import backends, route, table
from vk_provider.router import Router
from vk_provider.router.running import drain
from vk_provider.router.server import start


async def test_draining_finishes_a_stream_in_flight_and_refuses_new_connections() -> None:
    half_sent = asyncio.Event()
    finish = asyncio.Event()

    async def slow_stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"first,")
        half_sent.set()
        await finish.wait()
        await response.write(b"last")
        await response.write_eof()
        return response

    async with backends("slow", handler=slow_stream) as (slow,):
        router = Router(table(route(home=(slow.endpoint(),))))
        server = await start(router, "127.0.0.1", 0)
        port = server.port
        try:
            async with aiohttp.ClientSession() as session:
                response = await session.get(f"http://127.0.0.1:{port}/", headers={"Host": "chat.test"})
                assert await response.content.readexactly(6) == b"first,"
                await half_sent.wait()
                draining = asyncio.create_task(drain(server, router, grace=10))
                # The listener goes first: a new client is refused while the stream still runs.
                await until(lambda: not server.listening)
                async with aiohttp.ClientSession() as other:
                    with pytest.raises(aiohttp.ClientConnectorError):
                        await other.get(f"http://127.0.0.1:{port}/")
                assert not draining.done()
                assert router.in_flight == 1
                finish.set()
                assert await response.read() == b"last"
                async with asyncio.timeout(5):
                    await draining
                assert router.in_flight == 0
        finally:
            await server.close()
