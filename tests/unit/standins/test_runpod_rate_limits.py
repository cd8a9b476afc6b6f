"""The RunPod stand-in's rate limits per API key: fixed windows, 429 with `Retry-After` when any window
is used up, and `RateLimit`/`RateLimit-Policy` on every authenticated answer, on a manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from vk_devtools.standins.runpod.clock import ManualClock
from vk_devtools.standins.runpod.profile import REALISTIC, RateLimitWindow
from vk_devtools.standins.runpod.standin import FakeRunPod

from .runpod_support import call, pod_body


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=1000.0)  # 40 s into a minute window, 1000 s into an hour window


@pytest.fixture
async def fake(clock: ManualClock) -> AsyncIterator[FakeRunPod]:
    async with FakeRunPod(profile=REALISTIC.scaled(0), clock=clock) as server:
        yield server


async def test_ordinary_answers_carry_the_quota_and_what_is_left(
    fake: FakeRunPod, session: aiohttp.ClientSession
) -> None:
    status, headers, _ = await call(session, fake, "GET", "/pods")
    assert status == 200
    assert headers["RateLimit-Policy"] == '"minute";q=60;w=60, "hour";q=3000;w=3600, "day";q=50000;w=86400'
    assert headers["RateLimit"] == '"minute";r=59;t=20, "hour";r=2999;t=2600, "day";r=49999;t=85400'
    assert "Retry-After" not in headers
    status, headers, _ = await call(session, fake, "POST", "/pods", pod_body(bogus=1))
    assert status == 422  # a refusal counts and says so too
    assert headers["RateLimit"].startswith('"minute";r=58;')


async def test_over_the_quota_is_429_until_the_window_resets_then_it_succeeds(
    fake: FakeRunPod, clock: ManualClock, session: aiohttp.ClientSession
) -> None:
    await fake.control.set_rate_limits([RateLimitWindow("minute", 3, 60)])
    for left in (2, 1, 0):
        status, headers, _ = await call(session, fake, "GET", "/pods")
        assert (status, headers["RateLimit"]) == (200, f'"minute";r={left};t=20')

    status, headers, refused = await call(session, fake, "GET", "/pods")
    assert (status, headers["Retry-After"], headers["RateLimit"]) == (429, "20", '"minute";r=0;t=20')
    assert headers["RateLimit-Policy"] == '"minute";q=3;w=60'
    assert refused == {
        "title": "Too Many Requests",
        "status": 429,
        "detail": "rate limit exceeded for the minute window",
    }

    clock.advance(19.5)
    status, headers, _ = await call(session, fake, "GET", "/pods")
    assert (status, headers["Retry-After"]) == (429, "1")  # refused requests count against nothing
    clock.advance(0.5)
    status, headers, _ = await call(session, fake, "GET", "/pods")
    assert (status, headers["RateLimit"]) == (200, '"minute";r=2;t=60')


async def test_any_used_up_window_refuses_and_retry_after_is_its_reset(
    fake: FakeRunPod, clock: ManualClock, session: aiohttp.ClientSession
) -> None:
    await fake.control.set_rate_limits([RateLimitWindow("minute", 10, 60), RateLimitWindow("hour", 2, 3600)])
    assert [(await call(session, fake, "GET", "/pods"))[0] for _ in range(3)] == [200, 200, 429]
    status, headers, refused = await call(session, fake, "GET", "/pods")
    assert (status, headers["Retry-After"]) == (429, "2600")
    assert refused["detail"] == "rate limit exceeded for the hour window"
    clock.advance(2600)
    assert (await call(session, fake, "GET", "/pods"))[0] == 200


async def test_the_log_stream_carries_the_headers_and_unauthenticated_requests_count_nothing(
    fake: FakeRunPod, session: aiohttp.ClientSession
) -> None:
    _, _, pod = await call(session, fake, "POST", "/pods", pod_body())
    headers = {"Authorization": f"Bearer {fake.api_key}"}
    async with session.get(f"{fake.api_url}/pods/{pod['id']}/logs", headers=headers) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        assert response.headers["RateLimit"].startswith('"minute";r=58;')
    async with session.get(f"{fake.api_url}/pods") as response:
        assert response.status == 401
        assert "RateLimit" not in response.headers
    _, headers_after, _ = await call(session, fake, "GET", "/pods")
    assert headers_after["RateLimit"].startswith('"minute";r=57;')


async def test_no_windows_means_no_limit_and_no_headers(
    fake: FakeRunPod, session: aiohttp.ClientSession
) -> None:
    await fake.control.set_rate_limits([])
    for _ in range(70):
        status, headers, _ = await call(session, fake, "GET", "/pods")
        assert status == 200
        assert "RateLimit" not in headers
