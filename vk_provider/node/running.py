"""Run the node daemon from the command line: logging, signals, exit codes.

The first SIGTERM or SIGINT stops the daemon gracefully (workloads keep running at the provider and
are adopted by the next start); a second one exits at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from vk_provider.kubelet.server import KubeletApiError
from vk_provider.node.daemon import run_node
from vk_provider.node.settings import NodeSettings
from vk_provider.plugins import UnknownProviderError

logger = logging.getLogger(__name__)


SLOW_STOP_SECONDS = 10.0
"""A stop that takes longer names what it is waiting for: a hang at shutdown must be diagnosable."""


def report_slow_stop() -> None:
    tasks = [task for task in asyncio.all_tasks() if not task.done()]
    logger.warning("still stopping after %gs; %d task(s) left:", SLOW_STOP_SECONDS, len(tasks))
    for task in tasks:
        frames = task.get_stack(limit=3)
        where = " <- ".join(
            f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno})" for frame in frames
        )
        logger.warning("  %s: %s", task.get_name(), where or "(not started)")


def run_node_command(settings: NodeSettings) -> int:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(signum: int) -> None:
            if stop.is_set():
                logger.warning("second %s: exiting now", signal.Signals(signum).name)
                os._exit(1)
            logger.info("%s received: stopping", signal.Signals(signum).name)
            stop.set()
            loop.call_later(SLOW_STOP_SECONDS, report_slow_stop)

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, on_signal, signum)
        await run_node(settings, stop=stop)

    exit_code = 0
    try:
        asyncio.run(main())
    except* UnknownProviderError as unknown:
        logger.error("%s", unknown.exceptions[0])
        exit_code = 2
    except* KubeletApiError as unservable:
        logger.error("%s", unservable.exceptions[0])
        exit_code = 1
    return exit_code
