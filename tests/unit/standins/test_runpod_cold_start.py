"""The RunPod stand-in's realistic profile in time: a pod answers through the proxy only after it has
been provisioned, pulled its image and loaded its model, and the proxy cuts a request after 100 s.
The stand-in sleeps on a manual clock, so seven minutes pass in a few milliseconds."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from vk_devtools.standins.runpod.clock import ManualClock
from vk_devtools.standins.runpod.profile import FAST, REALISTIC
from vk_devtools.standins.runpod.proxy import ServedPod
from vk_devtools.standins.runpod.standin import FakeRunPod

from .runpod_support import call, eventually, pod_body


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


def proxy_url(fake: FakeRunPod, pod_id: str, path: str = "/v1/models") -> str:
    return fake.proxy_url_template.format(pod_id=pod_id, port=8000) + path


async def proxy_status(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url) as response:
        return response.status


async def test_realistic_figures_are_a_seven_minute_cold_start_and_runpods_limits() -> None:
    assert (REALISTIC.provisioning_seconds, REALISTIC.starting_seconds, REALISTIC.load_seconds) == (
        30,
        150,
        240,
    )
    assert REALISTIC.cold_start_seconds == 7 * 60
    assert REALISTIC.proxy_timeout_seconds == 100
    assert [(w.name, w.quota, w.seconds) for w in REALISTIC.rate_limits] == [
        ("minute", 60, 60),
        ("hour", 3000, 3600),
        ("day", 50000, 86400),
    ]
    assert REALISTIC.scaled(30 / 420).cold_start_seconds == pytest.approx(30)


async def test_the_pod_answers_only_once_provisioned_pulled_and_loaded(
    session: aiohttp.ClientSession,
) -> None:
    clock = ManualClock()
    async with FakeRunPod(profile=REALISTIC, clock=clock) as fake:
        status, _, pod = await call(session, fake, "POST", "/pods", pod_body())
        assert (status, pod["status"]) == (201, "PROVISIONING")
        url = proxy_url(fake, pod["id"])

        async def status_is(wanted: str) -> bool | None:
            _, _, current = await call(session, fake, "GET", f"/pods/{pod['id']}")
            return True if current["status"] == wanted else None

        stages = [("PROVISIONING", 30.0, "STARTING"), ("STARTING", 150.0, "RUNNING")]
        for stage, seconds, following in stages:
            await clock.wait_for_sleepers()
            clock.advance(seconds - 0.5)
            assert await status_is(stage)
            assert await proxy_status(session, url) == 502  # the proxy knows the pod; nothing serves yet
            clock.advance(0.5)
            await eventually(functools.partial(status_is, following))

        await clock.wait_for_sleepers()  # RUNNING, and the model loads
        clock.advance(239.5)
        assert await proxy_status(session, url) == 502
        clock.advance(0.5)

        async def answering() -> bool | None:
            return True if await proxy_status(session, url) == 200 else None

        await eventually(answering)
        assert clock.now() == REALISTIC.cold_start_seconds
        lines = [entry.line for entry in fake._pods.records[pod["id"]].logs if entry.source == "container"]
        assert lines[:2] == ["loading the model (simulated: 240 s)", "server ready"]


async def test_the_proxy_answers_524_when_the_app_has_not_begun_within_100_seconds(
    session: aiohttp.ClientSession,
) -> None:
    released = asyncio.Event()

    def slow_app(pod: ServedPod) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            if request.path == "/slow":
                await released.wait()
            return web.Response(text="done")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        return app

    clock = ManualClock()
    async with FakeRunPod(profile=REALISTIC.scaled(0), clock=clock, pod_app=slow_app) as fake:
        _, _, pod = await call(session, fake, "POST", "/pods", pod_body())

        async def answering() -> bool | None:
            return True if await proxy_status(session, proxy_url(fake, pod["id"], "/quick")) == 200 else None

        await eventually(answering)  # an answer that begins at once is not cut
        slow = asyncio.create_task(proxy_status(session, proxy_url(fake, pod["id"], "/slow")))
        await clock.wait_for_sleepers()  # the proxy's timer
        clock.advance(99.9)
        assert clock.sleepers == 1  # the proxy still waits for the app
        assert not slow.done()
        clock.advance(0.1)
        assert await slow == 524
        released.set()


async def test_fast_is_the_default_profile_and_adds_nothing() -> None:
    fake = FakeRunPod()
    assert fake.profile is FAST
    assert (FAST.provisioning_seconds, FAST.starting_seconds, FAST.load_seconds) == (0.05, 0.05, 0)
    assert (FAST.proxy_timeout_seconds, FAST.rate_limits, FAST.capacity_refusal_fraction) == (None, (), 0)
    assert (FAST.balance_dollars, FAST.denied_pools) == (None, frozenset())
    overridden = FakeRunPod(provisioning_seconds=0.3, starting_seconds=0.2)
    assert (overridden.profile.provisioning_seconds, overridden.profile.starting_seconds) == (0.3, 0.2)
    assert overridden.profile.name == "fast"


async def test_a_fast_pod_answers_at_once_with_no_rate_limit_headers(session: aiohttp.ClientSession) -> None:
    async with FakeRunPod() as fake:
        status, headers, pod = await call(session, fake, "POST", "/pods", pod_body())
        assert status == 201
        assert "RateLimit" not in headers
        assert "RateLimit-Policy" not in headers

        async def answering() -> bool | None:
            return True if await proxy_status(session, proxy_url(fake, pod["id"])) == 200 else None

        async with asyncio.timeout(2):  # 0.1 s of simulated provider time, on the loop's own clock
            await eventually(answering)
        assert not any(event.line == "server ready" for event in fake._pods.records[pod["id"]].logs)
