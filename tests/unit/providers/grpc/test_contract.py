"""The provider contract through the plugin API: the mock provider, served as a plugin by the Python
SDK, and the node's `grpc` provider talking to it over a unix socket, pass what the mock passes
in-process. Every call crosses real gRPC: the messages, the statuses and the error mapping."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.unit.providers.grpc.support import plugin_for, socket_folder
from tests.unit.providers.mock.test_contract import MockHarness
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import PodLifecycle
from vk_provider.testing.contract import ProviderContract, ProviderHarness
from vk_providers.grpc.provider import GrpcSettings, provider_for


class PluginHarness(MockHarness):
    """The mock's harness, its provider (and the other node's) behind a plugin each."""

    settings: GrpcSettings
    info: pb.PluginInfo

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir)
        self.served = self.provider
        self._other: PodLifecycle | None = None
        self._opened: list[PodLifecycle] = []

    def other_node(self) -> PodLifecycle:
        assert self._other is not None
        return self._other

    def restarted(self) -> PodLifecycle | None:
        """A new node process finds the plugin (and its pods) where it was: a second connection."""
        client = provider_for(self.settings, self.info)
        self._opened.append(client)
        return client


class TestPluginContract(ProviderContract):
    @pytest.fixture
    async def harness(self, tmp_path: Path) -> AsyncIterator[ProviderHarness]:
        harness = PluginHarness(tmp_path)
        async with contextlib.AsyncExitStack() as stack:
            sockets = await stack.enter_async_context(socket_folder())
            client, harness.settings = await stack.enter_async_context(
                plugin_for(harness.served, sockets / "a")
            )
            harness.info = client.info
            harness.provider = client
            other = harness._new("another-node")
            harness._other, _ = await stack.enter_async_context(plugin_for(other, sockets / "b"))
            yield harness
            for opened in harness._opened:
                await opened.aclose()
            await other.aclose()
            await harness.served.aclose()
