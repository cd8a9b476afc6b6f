"""Which event loop a daemon runs on: uvloop's when it is installed, else asyncio's own.

Why uvloop: the router's data path spends about a third less CPU per proxied request on it
(`pip install 'vk-provider[router]'`). It stays optional, because plain asyncio works the same, only
slower; so every daemon asks here instead of importing uvloop, and logs `loop_name()` at start, so
a log says which loop its numbers came from.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def loop_factory() -> LoopFactory | None:
    """uvloop's `new_event_loop` when uvloop is importable; None (asyncio's default loop) otherwise."""
    try:
        import uvloop  # noqa: PLC0415 - optional: importing it is how its presence is found
    except ImportError:
        return None
    return uvloop.new_event_loop


def loop_name() -> str:
    """What `run` runs on, for the log: `uvloop 0.21.0` or `asyncio`."""
    if loop_factory() is None:
        return "asyncio"
    return f"uvloop {importlib.metadata.version('uvloop')}"


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` makes (Python 3.11's `asyncio.run` takes no
    loop factory; its `Runner` does)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
