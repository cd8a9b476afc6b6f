"""A pod the provider already runs gets update_pod when its labels, annotations or images change.

The reconciler is driven directly, with the provider in memory and a recording stand-in for our own
KubeApi wrapper (the boundary it writes through); the real API path is covered by the integration tests.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vk_provider._kube.events import EventRecorder
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.node.pods import PodReconciler
from vk_provider.node.settings import NodeSettings
from vk_provider.offload.names import TRAFFIC_ADDRESS_ANNOTATION
from vk_provider.provider import PodRequest, ProviderContext
from vk_provider.runtime.queueing import KeyedQueue
from vk_providers.mock import MockProvider


class RecordingApi:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []

    async def patch(self, path: str, body: Any, *, content_type: str = "") -> dict[str, Any]:
        self.patches.append((path, body))
        return {}

    async def create(self, path: str, body: Any) -> dict[str, Any]:
        return {}


class NoReferences:
    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return None

    async def config_map_files(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        return None

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        return None

    async def services(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        return []


class CachedPods:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.synced = asyncio.Event()


class RecordingMock(MockProvider):
    def __init__(self, context: ProviderContext) -> None:
        super().__init__(context)
        self.updates: list[PodRequest] = []

    async def update_pod(self, pod: PodRequest) -> None:
        self.updates.append(pod)


def pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "uid": "u1",
            "labels": {"app": "web"},
            "annotations": {},
        },
        "spec": {
            "nodeName": "n",
            "enableServiceLinks": False,
            "containers": [{"name": "app", "image": "img:1"}],
        },
        "status": {},
    }


def make_reconciler(
    api: RecordingApi,
    provider: MockProvider,
    pods: CachedPods,
    *,
    events: EventRecorder | None = None,
    metrics: DaemonMetrics | None = None,
    settings: NodeSettings | None = None,
) -> PodReconciler:
    """The reconciler of node `n`, on these stand-ins (driven with `reconcile(uid)`, no workers)."""
    return PodReconciler(
        api=api,  # type: ignore[arg-type]
        settings=settings or NodeSettings(node_name="n"),
        provider=provider,
        pods=pods,  # type: ignore[arg-type]
        reader=NoReferences(),
        events=events or EventRecorder(api, host="n"),  # type: ignore[arg-type]
        queue=KeyedQueue(),
        node_allocatable={},
        metrics=metrics or DaemonMetrics(),
    )


async def test_changed_labels_and_images_reach_the_provider_and_an_old_traffic_annotation_does_not(
    tmp_path: Path,
) -> None:
    api = RecordingApi()
    provider = RecordingMock(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    pods = CachedPods()
    reconciler = make_reconciler(api, provider, pods)
    pods.objects["u1"] = pod()
    await reconciler.reconcile("u1")
    assert await provider.get_pod_state(reconciler.known["u1"]) is not None
    assert provider.updates == []

    # Left over from an older node, or forged: the router ignores it, and it is no change to run.
    annotated = copy.deepcopy(pods.objects["u1"])
    annotated["metadata"]["annotations"][TRAFFIC_ADDRESS_ANNOTATION] = "http://10.200.0.1:8080"
    pods.objects["u1"] = annotated
    await reconciler.reconcile("u1")
    assert provider.updates == []

    relabelled = copy.deepcopy(annotated)
    relabelled["metadata"]["labels"]["tier"] = "gpu"
    pods.objects["u1"] = relabelled
    await reconciler.reconcile("u1")
    assert [dict(update.labels) for update in provider.updates] == [{"app": "web", "tier": "gpu"}]

    new_image = copy.deepcopy(relabelled)
    new_image["spec"]["containers"][0]["image"] = "img:2"
    pods.objects["u1"] = new_image
    await reconciler.reconcile("u1")
    assert [update.containers[0].image for update in provider.updates] == ["img:1", "img:2"]
    await reconciler.reconcile("u1")
    assert len(provider.updates) == 2  # unchanged since: no further update
