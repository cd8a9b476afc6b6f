"""A provider that cannot say its capacity does not stop the node's status: the last answer stands."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from tests.unit.node.test_keeper_stop import RecordingApi
from vk_provider._kube.events import EventRecorder
from vk_provider.errors import TemporaryProviderError
from vk_provider.kit.kube import KubeApi
from vk_provider.node.keeper import NodeKeeper
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.node.settings import NodeSettings
from vk_provider.provider import ProviderContext
from vk_providers.mock import MockProvider


class FlakyCapacity(MockProvider):
    def __init__(self, state_dir: Path) -> None:
        super().__init__(ProviderContext("n", {}, "10.0.0.1", state_dir))
        self.failure: Exception | None = None

    async def node_capacity(self) -> Mapping[str, str]:
        if self.failure is not None:
            raise self.failure
        return {"nvidia.com/gpu": "8"}


async def test_the_last_capacity_stands_while_the_provider_cannot_say_it(tmp_path: Path) -> None:
    kube = cast(KubeApi, RecordingApi())
    provider = FlakyCapacity(tmp_path)
    keeper = NodeKeeper(
        kube,
        NodeSettings(node_name="n", no_taint=True),
        provider,
        EventRecorder(kube, host="n"),
        metrics=DaemonMetrics(),
    )
    assert await keeper._provider_capacity() == {"nvidia.com/gpu": "8"}
    for failure in (TemporaryProviderError("the plugin is gone"), RuntimeError("a bug in the provider")):
        provider.failure = failure
        assert await keeper._provider_capacity() == {"nvidia.com/gpu": "8"}
    provider.failure = None
    assert await keeper._provider_capacity() == {"nvidia.com/gpu": "8"}
    await provider.aclose()
