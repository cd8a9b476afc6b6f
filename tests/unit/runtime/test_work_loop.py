"""The one worker loop: what a pass returns, or raises, decides when its key comes back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from vk_provider.runtime.queueing import Backoff, KeyedQueue, Requeue, Retry, WorkLoop

BACKOFF = Backoff(initial_seconds=0.01, max_seconds=0.02)


def loop_over(
    reconcile: Callable[[str], Awaitable[Requeue]],
    *,
    on_failure: Callable[[str, Exception], Awaitable[Retry | None]] | None = None,
    backoff: Backoff | None = None,
) -> WorkLoop:
    kwargs = {} if on_failure is None else {"on_failure": on_failure}
    return WorkLoop(KeyedQueue(), reconcile, backoff=backoff or BACKOFF, what="thing", **kwargs)


async def test_a_pass_that_is_done_leaves_its_key_alone() -> None:
    async def done(_key: str) -> Requeue:
        return None

    work = loop_over(done)
    await work.process("a")
    assert work.queue.depth == 0
    assert not work.queue._timers


async def test_a_pass_asking_to_look_again_requeues_its_key_after_that_long() -> None:
    async def again(_key: str) -> Requeue:
        return 0.01

    work = loop_over(again)
    await work.process("a")
    assert work.queue.depth == 0  # not at once
    async with asyncio.timeout(5):
        assert await work.queue.get() == "a"


async def test_a_failing_pass_backs_off_and_its_success_resets_the_backoff() -> None:
    outcomes: list[Exception | None] = [OSError("apiserver away"), OSError("still away"), None]
    backoff = Backoff(initial_seconds=0.01, max_seconds=0.02)

    async def flaky(_key: str) -> Requeue:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return None

    work = loop_over(flaky, backoff=backoff)
    await work.process("a")
    assert backoff.failures("a") == 1
    async with asyncio.timeout(5):
        key = await work.queue.get()
    work.queue.done(key)
    await work.process(key)
    assert backoff.failures("a") == 2
    async with asyncio.timeout(5):
        key = await work.queue.get()
    work.queue.done(key)
    await work.process(key)
    assert backoff.failures("a") == 0
    assert not outcomes


async def test_a_retry_hint_longer_than_the_backoff_wins() -> None:
    async def throttled(_key: str) -> Requeue:
        raise OSError("429")

    async def wait_a_minute(_key: str, _error: Exception) -> Retry | None:
        return Retry(not_before_seconds=60.0)

    work = loop_over(throttled, on_failure=wait_a_minute)
    loop = asyncio.get_running_loop()
    before = loop.time()
    await work.process("a")
    assert work.queue._timers["a"].when() - before >= 60.0
    work.queue.close()


async def test_a_failure_the_handler_calls_terminal_is_never_retried() -> None:
    told: list[tuple[str, str]] = []

    async def broken(_key: str) -> Requeue:
        raise ValueError("refused for good")

    async def give_up(key: str, error: Exception) -> Retry | None:
        told.append((key, str(error)))
        return None

    work = loop_over(broken, on_failure=give_up)
    await work.process("a")
    assert told == [("a", "refused for good")]
    assert work.queue.depth == 0
    assert not work.queue._timers


async def test_an_unexpected_error_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    async def crashes(_key: str) -> Requeue:
        raise KeyError("a bug")

    work = loop_over(crashes)
    await work.process("a")
    work.queue.close()
    crashed = [record for record in caplog.records if "failed unexpectedly" in record.getMessage()]
    assert crashed
    assert crashed[0].exc_info is not None


async def test_workers_never_hold_the_same_key_at_once() -> None:
    running: set[str] = set()
    overlaps: list[str] = []
    passes = 0
    started = asyncio.Event()
    second_finished = asyncio.Event()
    release = asyncio.Event()

    async def slow(key: str) -> Requeue:
        nonlocal passes
        if key in running:
            overlaps.append(key)
        running.add(key)
        passes += 1
        started.set()
        await release.wait()
        running.discard(key)
        if passes == 2:
            second_finished.set()
        return None

    work = loop_over(slow)
    workers = [asyncio.create_task(work.run_worker()) for _ in range(3)]
    try:
        work.queue.add("a")
        async with asyncio.timeout(5):
            await started.wait()
        work.queue.add("a")  # changed while held: must wait for the first pass
        work.queue.add("a")
        await asyncio.sleep(0.01)  # noqa: sleep-ok (give the idle workers a chance to misbehave)
        assert passes == 1
        release.set()
        async with asyncio.timeout(5):
            await second_finished.wait()
    finally:
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    assert passes == 2  # the two changes while held make one more pass, not two
    assert work.queue.depth == 0
    assert overlaps == []


async def test_each_key_reports_its_wait_for_a_worker_and_the_length_of_its_pass() -> None:
    """What an operator reads when steps land late: time queued for a worker, time in the pass."""
    waits: list[float] = []
    passes: list[float] = []
    release, both_passed = asyncio.Event(), asyncio.Event()

    def measured(seconds: float) -> None:
        passes.append(seconds)
        if len(passes) == 2:
            both_passed.set()

    async def slow_then_failing(key: str) -> Requeue:
        await release.wait()
        if key == "b":
            raise RuntimeError("b fails")
        return None

    work = WorkLoop(
        KeyedQueue(on_wait=waits.append),
        slow_then_failing,
        backoff=BACKOFF,
        what="thing",
        on_pass=measured,
        expected_errors=(RuntimeError,),
    )
    work.queue.add("a")
    work.queue.add("b")
    worker = asyncio.create_task(work.run_worker())  # one worker: b waits while a's pass runs
    try:
        await asyncio.sleep(0.05)  # a's pass holds the worker (noqa: sleep-ok)
        release.set()
        await asyncio.wait_for(both_passed.wait(), 5)
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
        work.queue.close()
    assert len(waits) == 2
    assert waits[0] < 0.05 <= waits[1]  # b was ready all along, and waited for a's pass
    assert passes[0] >= 0.05  # a's pass, with its wait on `release`
    assert len(passes) == 2  # a failing pass is measured too
