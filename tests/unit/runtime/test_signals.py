"""Every daemon stops the same way: the first signal drains, a second exits at once."""

from __future__ import annotations

import asyncio
import os
import signal

from vk_provider.runtime.signals import until_signalled


async def test_the_first_signal_sets_stop_and_main_returns_its_result() -> None:
    seen: list[str] = []

    async def main(stop: asyncio.Event) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        async with asyncio.timeout(5):
            await stop.wait()
        seen.append("drained")
        return 7

    assert await until_signalled(main, slow_stop_seconds=None, exit_now=lambda code: seen.append("exit")) == 7
    assert seen == ["drained"]


async def test_a_second_signal_exits_at_once_without_waiting_for_the_drain() -> None:
    exits: list[int] = []
    exited = asyncio.Event()

    def exit_now(code: int) -> None:
        exits.append(code)
        exited.set()

    async def main(stop: asyncio.Event) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        async with asyncio.timeout(5):
            await stop.wait()
        os.kill(os.getpid(), signal.SIGINT)  # an impatient second Ctrl-C while draining
        async with asyncio.timeout(5):
            await exited.wait()

    await until_signalled(main, slow_stop_seconds=None, exit_now=exit_now)
    assert exits == [1]


async def test_the_handlers_are_removed_when_main_returns() -> None:
    async def main(_stop: asyncio.Event) -> None:
        return None

    await until_signalled(main, slow_stop_seconds=None)
    loop = asyncio.get_running_loop()
    assert not loop.remove_signal_handler(signal.SIGTERM)  # nothing left to remove
