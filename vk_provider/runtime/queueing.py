"""A keyed work queue and the one worker loop over it, for level-based reconciliation.

A key (a pod UID, an Offload's namespace/name) is queued at most once; one worker at a time holds it;
a key queued again while a worker holds it comes back when the worker is done, so the latest state is
always reconciled and never concurrently. `WorkLoop` maps what a pass returns onto the queue in one
place (as controller-runtime's reconcileHandler does): a number of seconds requeues the key then,
None leaves it until something queues it again, and an exception backs it off (capped, jittered,
per key, never blocking the others) unless the failure handler says it must not be retried. Nothing
is dropped quietly: a key that keeps failing keeps being retried, and every failure is logged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections.abc import Awaitable, Callable

from vk_provider.kit.backoff import jittered_backoff_seconds

logger = logging.getLogger(__name__)

Requeue = float | None
"""What a pass returns: seconds until the key's next pass, or None to wait for it to be queued again."""


class KeyedQueue:
    """Keys ready for a worker, most urgent first, then in the order they became ready.

    `priority(key)`, asked when a key is queued, ranks it (lower first; 0 by default): a controller
    that watches a thousand objects every few seconds can put the few with work to do ahead of the
    many it only looks at. A key queued again with a more urgent rank moves up; a less urgent one
    keeps its place.
    """

    def __init__(
        self,
        *,
        on_wait: Callable[[float], None] | None = None,
        priority: Callable[[str], int] | None = None,
    ) -> None:
        """`on_wait(seconds)` is told, for each key a worker takes, how long it waited ready for one."""
        self._on_wait = on_wait
        self._priority = priority
        self._ready: asyncio.PriorityQueue[tuple[int, int, str]] = asyncio.PriorityQueue()
        self._order = itertools.count()
        self._ready_since: dict[str, float] = {}
        self._queued: dict[str, int] = {}
        """Key -> the rank it is queued at (an entry of another rank in `_ready` is stale)."""
        self._active: set[str] = set()
        self._dirty: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def add(self, key: str) -> None:
        if key in self._active:
            self._dirty.add(key)
            return
        rank = self._priority(key) if self._priority is not None else 0
        queued = self._queued.get(key)
        if queued is not None and queued <= rank:
            return
        self._queued[key] = rank
        self._ready_since.setdefault(key, time.monotonic())
        self._ready.put_nowait((rank, next(self._order), key))

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
        while True:
            rank, _, key = await self._ready.get()
            if self._queued.get(key) == rank:
                break  # else a stale entry: the key moved up, or was taken already
        del self._queued[key]
        self._active.add(key)
        since = self._ready_since.pop(key, None)
        if self._on_wait is not None and since is not None:
            self._on_wait(time.monotonic() - since)
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
        return len(self._queued)

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


@dataclasses.dataclass(frozen=True)
class Retry:
    """A failed pass comes back after its key's backoff, and never sooner than `not_before_seconds`
    (a provider's Retry-After, for example)."""

    not_before_seconds: float = 0.0


Reconcile = Callable[[str], Awaitable[Requeue]]
FailureHandler = Callable[[str, Exception], Awaitable[Retry | None]]
"""Told of a failed pass (to record events, write a status); says how to retry, or None for never."""


async def retry_after_backoff(_key: str, _error: Exception) -> Retry | None:
    """The failure handler of a loop that has nothing to add: retry after the backoff."""
    return Retry()


class WorkLoop:
    """Workers that take keys from a queue, run one pass each, and requeue, back off or forget them."""

    def __init__(
        self,
        queue: KeyedQueue,
        reconcile: Reconcile,
        *,
        backoff: Backoff,
        what: str,
        on_failure: FailureHandler = retry_after_backoff,
        expected_errors: tuple[type[Exception], ...] = (),
        on_pass: Callable[[float], None] | None = None,
    ) -> None:
        """`what` names a key in log lines ("pod", "offload"); failures of `expected_errors` are logged
        in one line, any other with its traceback. `on_pass(seconds)` is told each pass's length."""
        self._on_pass = on_pass
        self.queue = queue
        self._reconcile = reconcile
        self._backoff = backoff
        self._what = what
        self._on_failure = on_failure
        self._expected = expected_errors

    async def run_worker(self) -> None:
        """One worker; run as many as should reconcile at once. Returns only by cancellation."""
        while True:
            key = await self.queue.get()
            try:
                await self.process(key)
            finally:
                self.queue.done(key)

    async def process(self, key: str) -> None:
        """One pass for `key`, and what its outcome means for the queue."""
        started = time.monotonic()
        try:
            requeue = await self._reconcile(key)
        except Exception as error:
            self._passed(started)
            if not isinstance(error, self._expected):
                logger.exception("%s %s: the pass failed unexpectedly", self._what, key)
            retry = await self._on_failure(key, error)
            if retry is None:
                return
            delay = max(self._backoff.next_delay(key), retry.not_before_seconds)
            logger.info(
                "%s %s: attempt %d failed (%s); retrying in %.1fs",
                self._what,
                key,
                self._backoff.failures(key),
                error,
                delay,
            )
            self.queue.add_after(key, delay)
        else:
            self._passed(started)
            self._backoff.reset(key)
            if requeue is not None:
                self.queue.add_after(key, requeue)

    def _passed(self, started: float) -> None:
        if self._on_pass is not None:
            self._on_pass(time.monotonic() - started)

    def forget(self, key: str) -> None:
        """The key's object is gone: drop its backoff and any pending retry."""
        self._backoff.reset(key)
        self.queue.forget(key)
