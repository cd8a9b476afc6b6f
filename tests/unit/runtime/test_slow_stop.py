"""A node that does not stop promptly says which tasks it is still waiting for."""

from __future__ import annotations

import asyncio
import logging

import pytest

from vk_provider.runtime.signals import report_slow_stop


async def test_the_slow_stop_report_names_each_pending_task_and_where_it_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def waiting_on_the_provider() -> None:
        await asyncio.Event().wait()

    stuck = asyncio.create_task(waiting_on_the_provider(), name="pod worker 3")
    await asyncio.sleep(0)  # let it start, so it has a frame to show
    try:
        with caplog.at_level(logging.WARNING, logger="vk_provider.runtime.signals"):
            report_slow_stop()
    finally:
        stuck.cancel()
    lines = [record.getMessage() for record in caplog.records]
    assert any(line.startswith("still stopping after") for line in lines)
    assert any("pod worker 3: waiting_on_the_provider (" in line for line in lines), lines
