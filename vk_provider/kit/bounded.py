"""Run awaitable calls a few at a time: many independent API writes without flooding the apiserver."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

Result = TypeVar("Result")


async def gather_bounded(
    calls: Iterable[Callable[[], Awaitable[Result]]], concurrency: int
) -> list[Result | BaseException]:
    """Each call's result or exception, in the calls' order; at most `concurrency` run at once, and
    one failing stops none of the others."""
    gate = asyncio.Semaphore(concurrency)

    async def one(call: Callable[[], Awaitable[Result]]) -> Result:
        async with gate:
            return await call()

    return await asyncio.gather(*(one(call) for call in calls), return_exceptions=True)


async def run_bounded(calls: Iterable[Callable[[], Awaitable[object]]], concurrency: int) -> None:
    """Run the calls at most `concurrency` at a time; the first error is raised once all are done."""
    for result in await gather_bounded(calls, concurrency):
        if isinstance(result, BaseException):
            raise result
