"""Wait for a condition in the cluster instead of sleeping for a fixed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
POLL_INTERVAL_SECONDS = 0.25


async def wait_for(
    probe: Callable[[], Awaitable[T]], *, timeout_seconds: float, what: str | Callable[[], str]
) -> T:
    """Call `probe` until it returns something truthy and return that; fail with `what` on timeout.

    Exceptions from the probe count as "not yet" (the object may not exist yet); the last one is
    shown if time runs out. A `what` that quotes a log must be a callable: an f-string is rendered
    when the wait starts, so its log would end where the wait began and hide what went wrong during it.
    """
    deadline = time.monotonic() + timeout_seconds
    last_error: BaseException | None = None
    while True:
        try:
            result = await probe()
        except Exception as error:
            last_error = error
        else:
            if result:
                return result
        if time.monotonic() > deadline:
            detail = f"; last error: {last_error!r}" if last_error else ""
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout_seconds:.0f}s waiting for {described}{detail}")
        await asyncio.sleep(POLL_INTERVAL_SECONDS)
