"""A node limited to some namespaces collects orphans only there: the workload of a pod in another
namespace, which it cannot see, is kept (and said so once), never deleted as if its pod were gone.

Driven as tests/unit/node/test_pod_updates drives the reconciler: the provider in memory, stand-ins
for our KubeApi wrapper and the pod cache.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from tests.unit.node.test_pod_updates import CachedPods, RecordingApi, make_reconciler, pod
from vk_provider.node.settings import NodeSettings
from vk_provider.provider import ProviderContext
from vk_providers.mock import MockProvider


class CountingMock(MockProvider):
    """Counts the provider lists, one per orphan sweep, so the test can wait for sweeps to pass."""

    def __init__(self, context: ProviderContext) -> None:
        super().__init__(context)
        self.lists = 0
        self.listed = asyncio.Condition()

    async def list_pods(self):  # type: ignore[no-untyped-def]
        states = await super().list_pods()
        async with self.listed:
            self.lists += 1
            self.listed.notify_all()
        return states


async def test_an_unserved_namespace_s_workload_is_kept_while_a_served_orphan_is_collected(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = CountingMock(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    pods = CachedPods()
    reconciler = make_reconciler(RecordingApi(), provider, pods)
    served, elsewhere = pod(), pod()
    served["metadata"].update(namespace="served", uid="gone")
    elsewhere["metadata"].update(namespace="elsewhere", uid="unseen")
    for item in (served, elsewhere):  # both ran while the node served every namespace
        pods.objects[item["metadata"]["uid"]] = item
        await reconciler.reconcile(item["metadata"]["uid"])
    pods.objects.clear()  # now neither is in the cache: one deleted, the other out of sight
    pods.synced.set()
    limited = NodeSettings(node_name="n", namespaces=("served",), orphan_sweep_interval_seconds=0.001)
    restarted = make_reconciler(RecordingApi(), provider, pods, settings=limited)

    sweeping = asyncio.create_task(restarted.run_orphan_sweeps())
    try:
        async with provider.listed:
            await asyncio.wait_for(provider.listed.wait_for(lambda: provider.lists >= 5), 5)
    finally:
        sweeping.cancel()
        await asyncio.gather(sweeping, return_exceptions=True)
    left = {state.ref.uid for state in await MockProvider.list_pods(provider)}
    assert left == {"unseen"}
    kept = [record for record in caplog.records if "keeping workload" in record.getMessage()]
    assert len(kept) == 1
    assert kept[0].levelno == logging.WARNING
    assert "serves only the namespaces served" in kept[0].getMessage()
