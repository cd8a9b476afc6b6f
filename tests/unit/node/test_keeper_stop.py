"""The node's status loop stops when cancelled, even as a status update falls due at that moment."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from vk_provider._kube.events import EventRecorder
from vk_provider.kit.kube import KubeApi
from vk_provider.node.keeper import NodeKeeper
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.node.settings import NodeSettings
from vk_provider.provider import ProviderContext
from vk_providers.mock import MockProvider


class RecordingApi:
    """Answers the keeper's node reads and status patches; counts the patches."""

    def __init__(self) -> None:
        self.patches = 0
        self.patched = asyncio.Event()

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        return {"metadata": {"name": "n", "uid": "u", "labels": {}}, "spec": {"taints": []}}

    async def patch(self, path: str, body: Any, **_: Any) -> dict[str, Any]:
        self.patches += 1
        self.patched.set()
        return {}


async def test_a_status_update_falling_due_as_the_loop_is_cancelled_does_not_keep_it_alive(
    tmp_path: Path,
) -> None:
    api = RecordingApi()
    kube = cast(KubeApi, api)
    settings = NodeSettings(node_name="n", node_status_interval_seconds=60.0, no_taint=True)
    provider = MockProvider(ProviderContext("n", {}, "10.0.0.1", tmp_path))
    keeper = NodeKeeper(kube, settings, provider, EventRecorder(kube, host="n"), metrics=DaemonMetrics())
    loop = asyncio.create_task(keeper.run_status())
    async with asyncio.timeout(5):
        await api.patched.wait()  # the first status update is written
    for _ in range(5):  # a few turns of the loop: the status loop is now waiting for the next update
        await asyncio.sleep(0)
    keeper._status_due.set()  # a health change makes an update due ...
    loop.cancel()  # ... in the same moment the daemon stops
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await loop
