"""The daemons' event loop: uvloop's when it is installed (it is, with the test extra), else asyncio's."""

from __future__ import annotations

import asyncio

import uvloop

from vk_provider.runtime import eventloop


def test_uvloop_runs_the_daemons_when_it_is_installed() -> None:
    async def loop_type() -> type[asyncio.AbstractEventLoop]:
        return type(asyncio.get_running_loop())

    assert eventloop.run(loop_type()) is uvloop.Loop
    assert eventloop.loop_name().startswith("uvloop ")
