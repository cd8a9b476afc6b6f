"""Pieces the router and demo tests share: a refused local URL, and waiting on in-process conditions."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

LOOPBACK = "127.0.0.1"


def closed_port_url() -> str:
    """A local URL nobody listens on, so connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port = probe.getsockname()[1]
    return f"http://{LOOPBACK}:{port}"


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Wait (polling the loop, not sleeping a fixed time) until `condition` holds."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110 - the watched things are counters, not events
            await asyncio.sleep(0.001)  # a bounded poll (noqa: sleep-ok)
