"""The stand-in's time: the event loop's clock by default, a `ManualClock` in tests that study time.

Every delay the stand-in simulates (a pod's provisioning, its image pull and model load, the proxy's
request timeout, the rate-limit windows) is read from and slept on a `Clock` (the provider kit's
protocol: `now()` and `sleep()`), so a test can hold a seven-minute cold start still and move it on
by hand instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from vk_provider.kit.apibudget import Clock, LoopClock

__all__ = ["Clock", "LoopClock", "ManualClock"]


class ManualClock:
    """A clock that moves only when told: `sleep` returns once `advance` has carried `now` past its end.

    `sleepers` counts the sleeps still waiting, and `wait_for_sleepers` waits (on a condition, not a
    fixed time) until that many have started, so a test knows the stand-in is waiting before it moves
    the clock.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._order = itertools.count()
        self._sleeps: list[tuple[float, int, asyncio.Future[None]]] = []
        self._changed = asyncio.Event()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        wake = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleeps, (self._now + seconds, next(self._order), wake))
        self._notify()
        try:
            await wake
        finally:
            if not wake.done():
                wake.cancel()
            self._notify()

    def advance(self, seconds: float) -> None:
        """Move the clock on; every sleep that ends by the new time is woken (earliest first)."""
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._now += seconds
        while self._sleeps and self._sleeps[0][0] <= self._now:
            _, _, wake = heapq.heappop(self._sleeps)
            if not wake.done():
                wake.set_result(None)
        self._notify()

    @property
    def sleepers(self) -> int:
        return sum(1 for _, _, wake in self._sleeps if not wake.done())

    async def wait_for_sleepers(self, count: int = 1) -> None:
        """Wait until at least `count` sleeps are waiting on this clock."""
        while self.sleepers < count:
            changed = self._changed
            await changed.wait()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
