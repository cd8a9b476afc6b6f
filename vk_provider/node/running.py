"""Run the node daemon from the command line: logging, signals, exit codes.

The first SIGTERM or SIGINT stops the daemon gracefully (workloads keep running at the provider and
are adopted by the next start); a second one exits at once.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from vk_provider.kubelet.server import KubeletApiError
from vk_provider.node.daemon import run_node
from vk_provider.node.settings import NodeSettings
from vk_provider.plugins import UnknownProviderError
from vk_provider.runtime.logsetup import configure_logging
from vk_provider.runtime.signals import until_signalled

logger = logging.getLogger(__name__)


def run_node_command(settings: NodeSettings) -> int:
    configure_logging(settings.log_level, settings.log_format)
    try:
        settings.state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        logger.error(
            "node %s: cannot create --state-dir %s: %s",
            settings.node_name,
            settings.state_dir,
            error.strerror,
        )
        return 1

    async def main(stop: asyncio.Event) -> None:
        await run_node(settings, stop=stop)

    exit_code = 0
    try:
        asyncio.run(until_signalled(main))
    except* UnknownProviderError as unknown:
        logger.error("%s", _first_leaf(unknown))
        exit_code = 2
    except* KubeletApiError as unservable:
        logger.error("%s", _first_leaf(unservable))
        exit_code = 1
    except* aiohttp.ClientConnectionError as unreachable:
        # With a leader Lease the node retries the apiserver until it answers (one line per attempt);
        # without one (--leader-elect=false) it cannot register its Node: one line, and the kubelet or
        # the operator starts it again.
        logger.error("node %s: cannot reach the apiserver: %s", settings.node_name, _first_leaf(unreachable))
        exit_code = 1
    return exit_code


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first error itself: task groups nest (the node's inside the leader's), `except*` keeps that."""
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first
