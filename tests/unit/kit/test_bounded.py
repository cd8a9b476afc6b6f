"""Calls run a few at a time: the cap holds, results keep their order, one failure stops no other."""

from __future__ import annotations

import asyncio
import functools

import pytest

from vk_provider.kit.bounded import gather_bounded, run_bounded

pytestmark = pytest.mark.unit


async def test_at_most_the_cap_run_at_once_and_results_keep_the_calls_order() -> None:
    running = 0
    most = 0

    async def call(number: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001 * (number % 5))  # finishing out of order (noqa: sleep-ok)
        running -= 1
        if number == 7:
            raise ValueError("seven")
        return number * 2

    results = await gather_bounded([functools.partial(call, number) for number in range(50)], 16)
    assert most == 16
    assert [result for result in results if not isinstance(result, BaseException)] == [
        number * 2 for number in range(50) if number != 7
    ]
    assert isinstance(results[7], ValueError)  # in its place; the other 49 all ran


async def test_run_bounded_raises_the_first_failure_once_every_call_has_run() -> None:
    ran: list[int] = []

    async def call(number: int) -> None:
        ran.append(number)
        if number in (3, 5):
            raise RuntimeError(f"failed {number}")

    with pytest.raises(RuntimeError, match="failed 3"):
        await run_bounded([functools.partial(call, number) for number in range(10)], 2)
    assert sorted(ran) == list(range(10))
