"""Plugins served in the test's own event loop over unix sockets, and `grpc` providers connected to them."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from vk_provider.plugin import serving
from vk_provider.provider import PodLifecycle
from vk_providers.grpc.provider import GrpcSettings, plugin_info, provider_for


@contextlib.asynccontextmanager
async def socket_folder() -> AsyncIterator[Path]:
    """A short folder for sockets (a unix socket's path has at most 107 bytes; pytest's are long)."""
    folder = Path(tempfile.mkdtemp(prefix="vkp-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.asynccontextmanager
async def plugin_for(
    provider: PodLifecycle, socket: Path, *, name: str = "test-plugin", call_timeout_seconds: float = 10.0
) -> AsyncIterator[tuple[PodLifecycle, GrpcSettings]]:
    """`provider` served as a plugin on `socket`, and a `grpc` provider connected to it."""
    settings = GrpcSettings(
        f"unix://{socket}", call_timeout_seconds=call_timeout_seconds, connect_timeout_seconds=10
    )
    async with serving(provider, settings.address, name=name):
        # GetPluginInfo blocks (the node calls it once, at start): off the loop that serves the plugin.
        info = await asyncio.to_thread(plugin_info, settings, "test-node")
        client = provider_for(settings, info)
        try:
            yield client, settings
        finally:
            await client.aclose()
