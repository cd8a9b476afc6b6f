"""A work queue keyed by pod UID, for level-based reconciliation.

A key is queued at most once; one worker at a time holds it; a key marked dirty while a worker holds
it is queued again when the worker is done, so the latest state is always reconciled and never
concurrently. Failing keys come back after a capped, jittered exponential backoff and never block the
others. Nothing is ever dropped: a key that keeps failing keeps being retried.
"""

from __future__ import annotations

import asyncio

from vk_provider.kit.backoff import jittered_backoff_seconds


class KeyedQueue:
    def __init__(self) -> None:
        self._ready: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._dirty: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def add(self, key: str) -> None:
        if key in self._active:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._ready.put_nowait(key)

    def add_after(self, key: str, delay_seconds: float) -> None:
        """Queue `key` after a delay; an earlier pending delay for the same key wins."""
        loop = asyncio.get_running_loop()
        when = loop.time() + delay_seconds
        existing = self._timers.get(key)
        if existing is not None:
            if existing.when() <= when:
                return
            existing.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> str:
        key = await self._ready.get()
        self._queued.discard(key)
        self._active.add(key)
        return key

    def done(self, key: str) -> None:
        self._active.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def forget(self, key: str) -> None:
        """Drop any pending delayed retry (the key's object is gone)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    @property
    def depth(self) -> int:
        return self._ready.qsize()

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


class Backoff:
    """Per-key exponential backoff with jitter, capped; reset on success."""

    def __init__(self, *, initial_seconds: float, max_seconds: float) -> None:
        self._initial = initial_seconds
        self._max = max_seconds
        self._failures: dict[str, int] = {}

    def next_delay(self, key: str) -> float:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        return jittered_backoff_seconds(failures, initial_seconds=self._initial, max_seconds=self._max)

    def failures(self, key: str) -> int:
        return self._failures.get(key, 0)

    def reset(self, key: str) -> None:
        self._failures.pop(key, None)
