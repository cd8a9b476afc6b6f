"""Shared pieces of the demo tests: token servers on free local ports, and waiting on conditions."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import AsyncIterator

from aiohttp import web

from vk_devtools.demo import tokens

LOOPBACK = "127.0.0.1"


@contextlib.asynccontextmanager
async def serving(app: web.Application, grace: float = 5.0) -> AsyncIterator[str]:
    """Serve `app` through the token server's own runner on a free port; yields its base URL."""
    runner = await tokens.start(app, LOOPBACK, 0, shutdown_timeout=grace)
    try:
        (url,) = tokens.listening_urls(runner)
        yield url
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def token_server(settings: tokens.TokenServerSettings) -> AsyncIterator[str]:
    async with serving(tokens.make_app(settings)) as url:
        yield url


async def start_module(module: str, *args: str) -> asyncio.subprocess.Process:
    """Run `python -m module args` with piped output, as the demo and the cluster run it."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def listening_url(process: asyncio.subprocess.Process, within: float = 10.0) -> str:
    """The URL a `tokens` subprocess started with `--port 0` announces on stderr."""
    assert process.stderr is not None
    async with asyncio.timeout(within):
        while line := (await process.stderr.readline()).decode():
            if found := re.search(r"serving on (http://\S+)", line):
                return found.group(1)
    raise AssertionError("the token server exited without announcing where it listens")


async def stopped(process: asyncio.subprocess.Process) -> None:
    """Make sure a subprocess a test started is gone, whatever the test did."""
    if process.returncode is None:
        process.kill()
        await process.communicate()
