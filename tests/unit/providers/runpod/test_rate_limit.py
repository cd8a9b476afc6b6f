"""429s wait as long as RunPod asks: `Retry-After` (seconds or an HTTP date) or the `RateLimit` header."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from vk_provider.kit.credentials import SecretSource
from vk_provider.kit.resilience import ApiStatusError
from vk_providers.runpod.api import RunPodApi, rate_limit_reset_seconds


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ('"default";r=0;t=30', 30.0),
        ('"default";r=5;t=30', None),  # quota left: no wait
        ('"burst";r=0;t=2, "daily";r=0;t=3600', 3600.0),  # every spent policy counts, the longest wins
        ('"burst";r=3;t=2, "minute";r=0;t=45', 45.0),
        ("limit=10, remaining=0, reset=12", 12.0),  # the older draft's shape
        ("limit=10, remaining=4, reset=12", None),
        ("", None),
        (None, None),
        ("nonsense", None),
    ],
)
def test_rate_limit_reset(header: str | None, seconds: float | None) -> None:
    assert rate_limit_reset_seconds(header) == seconds


@pytest.fixture
async def throttling_server() -> AsyncIterator[TestServer]:
    answers = iter(
        [
            ({"RateLimit": '"default";r=0;t=90'}, "no Retry-After"),
            ({"Retry-After": "5", "RateLimit": '"default";r=0;t=40'}, "both"),
            ({"Retry-After": "50", "RateLimit": '"default";r=0;t=40'}, "Retry-After longer"),
        ]
    )

    async def throttle(request: web.Request) -> web.Response:
        headers, detail = next(answers)
        return web.json_response({"status": 429, "detail": detail}, status=429, headers=headers)

    app = web.Application()
    app.router.add_get("/v2/pods", throttle)
    server = TestServer(app)
    await server.start_server()
    yield server
    await server.close()


async def test_a_429_asks_for_the_longer_of_retry_after_and_rate_limit(
    throttling_server: TestServer,
) -> None:
    api = RunPodApi(
        str(throttling_server.make_url("/v2")),
        SecretSource(env_var="RUNPOD_API_KEY", environ={"RUNPOD_API_KEY": "rp_key"}),
    )
    waits = []
    try:
        for _ in range(3):
            with pytest.raises(ApiStatusError) as throttled:
                await api.list_pods()
            assert throttled.value.status == 429
            waits.append(throttled.value.retry_after_seconds)
    finally:
        await api.aclose()
    assert waits == [90.0, 40.0, 50.0]
