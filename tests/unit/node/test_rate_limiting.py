"""The client-side token bucket lets a burst through at once and then paces requests at its rate."""

from __future__ import annotations

import asyncio

from vk_provider.kit.kube import RateLimiter


async def test_a_burst_passes_at_once_and_the_rest_are_paced() -> None:
    limiter = RateLimiter(qps=200, burst=5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(5):
        await limiter.acquire()
    assert limiter.waited_seconds == 0
    for _ in range(20):
        await limiter.acquire()
    elapsed = loop.time() - started
    # 20 requests beyond the burst at 200/s need at least 0.1 s in all.
    assert elapsed >= 0.095
    assert 0.095 <= limiter.waited_seconds <= 0.2
