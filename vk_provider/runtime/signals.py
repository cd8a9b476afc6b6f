"""Run a daemon until it is signalled: the first SIGTERM or SIGINT drains it, a second exits at once.

Every process of the project (node, router, controller, the demo's workloads) stops the same way,
because Kubernetes stops them all the same way: SIGTERM, a grace period, then SIGKILL. The first signal
sets the `stop` event the daemon's coroutine watches, so it can finish in-flight work; a second one
(an impatient operator, a second Ctrl-C) ends the process with exit code 1 without waiting. A drain
that takes longer than `slow_stop_seconds` logs every task still running and where it waits, so a
hang at shutdown can be diagnosed from the log alone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

SLOW_STOP_SECONDS = 10.0
"""A stop that takes longer names what it is waiting for."""
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def report_slow_stop(after_seconds: float = SLOW_STOP_SECONDS) -> None:
    """Log each task still running, with the innermost frames it waits in."""
    tasks = [task for task in asyncio.all_tasks() if not task.done()]
    logger.warning("still stopping after %gs; %d task(s) left:", after_seconds, len(tasks))
    for task in tasks:
        frames = task.get_stack(limit=3)
        where = " <- ".join(
            f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno})" for frame in frames
        )
        logger.warning("  %s: %s", task.get_name(), where or "(not started)")


async def until_signalled(
    main: Callable[[asyncio.Event], Coroutine[Any, Any, T]],
    *,
    slow_stop_seconds: float | None = SLOW_STOP_SECONDS,
    exit_now: Callable[[int], object] = os._exit,
) -> T:
    """Run `main(stop)` with SIGTERM and SIGINT setting `stop`; a second signal calls `exit_now(1)`.

    Call it inside the event loop (`asyncio.run(until_signalled(main))`): the handlers are the loop's,
    and they are removed again when `main` returns.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if stop.is_set():
            logger.warning("second %s: exiting now", name)
            exit_now(1)
            return
        logger.info("%s received: stopping", name)
        stop.set()
        if slow_stop_seconds is not None:
            loop.call_later(slow_stop_seconds, report_slow_stop, slow_stop_seconds)

    for signum in SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        return await main(stop)
    finally:
        for signum in SIGNALS:
            loop.remove_signal_handler(signum)
