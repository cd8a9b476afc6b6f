"""The keyed queue: one worker per key, no duplicates, dirty keys come back, delays keep the earliest."""

from __future__ import annotations

import asyncio

from vk_provider.runtime.queueing import Backoff, KeyedQueue


async def test_a_key_added_twice_is_queued_once() -> None:
    queue = KeyedQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert queue.depth == 2


async def test_a_key_changed_while_held_comes_back_after_done() -> None:
    queue = KeyedQueue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")  # the object changed while a worker holds it
    assert queue.depth == 0  # never handed to a second worker at the same time
    queue.done(key)
    assert queue.depth == 1
    assert await queue.get() == "a"


async def test_a_delayed_key_arrives_and_the_earliest_delay_wins() -> None:
    queue = KeyedQueue()
    queue.add_after("a", 60)
    queue.add_after("a", 0.01)
    assert await asyncio.wait_for(queue.get(), 5) == "a"
    queue.close()


async def test_forget_cancels_a_pending_retry() -> None:
    queue = KeyedQueue()
    queue.add_after("a", 0.01)
    queue.forget("a")
    queue.add_after("b", 0.05)
    # "b" was due after "a" would have been; had "a" not been cancelled, it would come first.
    assert await asyncio.wait_for(queue.get(), 5) == "b"
    assert queue.depth == 0


def test_backoff_doubles_up_to_its_cap_with_jitter_and_resets() -> None:
    backoff = Backoff(initial_seconds=1, max_seconds=8)
    delays = [backoff.next_delay("k") for _ in range(6)]
    for delay, ceiling in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert ceiling / 2 <= delay <= ceiling
    assert backoff.failures("k") == 6
    backoff.reset("k")
    assert backoff.next_delay("k") <= 1


async def test_urgent_keys_go_first_and_a_queued_key_made_urgent_moves_up() -> None:
    urgent: set[str] = set()
    queue = KeyedQueue(priority=lambda key: 0 if key in urgent else 1)
    for key in ("watched-1", "watched-2", "watched-3"):
        queue.add(key)
    urgent.add("moving")
    queue.add("moving")
    urgent.add("watched-3")  # its flip arrived while it waited as a watched key
    queue.add("watched-3")
    queue.add("watched-1")  # queued again at the same rank: keeps its place
    assert queue.depth == 4
    taken = [await queue.get() for _ in range(4)]
    assert taken == ["moving", "watched-3", "watched-1", "watched-2"]
    assert queue.depth == 0
    for key in taken:
        queue.done(key)
    queue.add("watched-3")  # its stale low-rank entry is gone: it is queued once, and taken once
    assert await queue.get() == "watched-3"
    assert queue.depth == 0
