"""The routers' status and metrics, asked for by many Offloads at once, are read once per replica:
each answer holds every route, so one read serves them all (a real aiohttp server counts the reads)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from vk_provider.controller.routers import SHARED_FOR_SECONDS, RouterDirectory, RouterUnreachable

pytestmark = pytest.mark.unit

ROUTES = [
    {"namespace": "ml", "name": f"svc-{index}", "away_weight": index, "endpoints": {"home": {"usable": 2}}}
    for index in range(50)
]


class CountingRouter:
    def __init__(self) -> None:
        self.reads = {"status": 0, "metrics": 0}
        self.failing = False
        self.release = asyncio.Event()
        self.arrived = {"status": asyncio.Event(), "metrics": asyncio.Event()}

    async def status(self, _: web.Request) -> web.Response:
        self.reads["status"] += 1
        self.arrived["status"].set()
        await self.release.wait()  # every caller arrives while this read is in flight
        if self.failing:
            return web.Response(status=500)
        return web.json_response({"routes": ROUTES})

    async def metrics(self, _: web.Request) -> web.Response:
        self.reads["metrics"] += 1
        self.arrived["metrics"].set()
        await self.release.wait()
        return web.Response(text="vk_provider_router_requests_total 1\n")


@pytest.fixture
async def router() -> AsyncIterator[tuple[CountingRouter, str]]:
    counting = CountingRouter()
    app = web.Application()
    app.router.add_get("/-/status", counting.status)
    app.router.add_get("/-/metrics", counting.metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield counting, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_fifty_offloads_asking_at_once_cost_each_router_one_read(
    router: tuple[CountingRouter, str],
) -> None:
    counting, url = router
    directory = RouterDirectory(None, urls=[url])
    try:
        asking = [asyncio.create_task(directory.views("ml", f"svc-{index}")) for index in range(50)]
        scraping = [asyncio.create_task(directory.metrics()) for _ in range(10)]
        # Held until both reads have reached the router: every caller has joined one by then.
        await asyncio.wait_for(
            asyncio.gather(counting.arrived["status"].wait(), counting.arrived["metrics"].wait()), 10
        )
        counting.release.set()
        views = await asyncio.gather(*asking)
        await asyncio.gather(*scraping)
        assert counting.reads == {"status": 1, "metrics": 1}
        assert [view[0].away_weight for view in views] == list(range(50))  # each its own route
    finally:
        await directory.close()


async def test_a_failed_read_fails_its_waiters_and_the_next_caller_asks_again(
    router: tuple[CountingRouter, str],
) -> None:
    counting, url = router
    counting.failing = True
    counting.release.set()
    directory = RouterDirectory(None, urls=[url])
    try:
        with pytest.raises(RouterUnreachable):
            await directory.views("ml", "svc-1")
        counting.failing = False
        views = await directory.views("ml", "svc-1")
        assert views[0].away_weight == 1
        assert counting.reads["status"] == 2
    finally:
        await directory.close()


async def test_a_status_the_same_as_the_last_is_not_decoded_again(
    router: tuple[CountingRouter, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    counting, url = router
    counting.release.set()
    decoded: list[None] = []
    real = json.loads

    def counted(text: bytes) -> object:
        decoded.append(None)
        return real(text)

    monkeypatch.setattr("vk_provider.controller.routers.json.loads", counted)
    clock = [0.0]
    monkeypatch.setattr("vk_provider.controller.routers.time.monotonic", lambda: clock[0])
    directory = RouterDirectory(None, urls=[url])
    try:
        for moment in range(5):  # five reads, each past the sharing window
            clock[0] = moment * 10.0
            views = await directory.views("ml", "svc-7")
            assert views[0].away_weight == 7
        assert counting.reads["status"] == 5
        assert len(decoded) == 1
        ROUTES[7]["away_weight"] = 70  # the router's answer changes: decoded again
        clock[0] = 100.0
        assert (await directory.views("ml", "svc-7"))[0].away_weight == 70
        assert len(decoded) == 2
        assert (await directory.views("ml", "absent"))[0].away_weight is None
    finally:
        ROUTES[7]["away_weight"] = 7
        await directory.close()


async def test_a_read_answers_callers_for_a_moment_after_it_ends_however_long_it_took(
    router: tuple[CountingRouter, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of a busy router can take longer than the sharing window: counted from the read's start,
    the window would be over when it ends, and every later caller would read again."""
    counting, url = router
    clock = [0.0]
    monkeypatch.setattr("vk_provider.controller.routers.time.monotonic", lambda: clock[0])
    directory = RouterDirectory(None, urls=[url])
    try:
        first = asyncio.create_task(directory.views("ml", "svc-1"))
        await asyncio.wait_for(counting.arrived["status"].wait(), 10)
        clock[0] = 3.0  # the read takes 3 s
        joining = asyncio.create_task(directory.views("ml", "svc-2"))  # comes while it is under way
        counting.release.set()
        assert (await first)[0].away_weight == 1
        assert (await joining)[0].away_weight == 2
        clock[0] = 3.0 + SHARED_FOR_SECONDS  # just within the window after its end
        assert (await directory.views("ml", "svc-3"))[0].away_weight == 3
        assert counting.reads["status"] == 1
        clock[0] = 3.0 + SHARED_FOR_SECONDS + 0.01  # past it: read again
        assert (await directory.views("ml", "svc-4"))[0].away_weight == 4
        assert counting.reads["status"] == 2
    finally:
        await directory.close()
