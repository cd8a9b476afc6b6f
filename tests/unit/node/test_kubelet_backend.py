"""What the node hands the kubelet API: its watch cache, its provider's capabilities, its metrics."""

from __future__ import annotations

from pathlib import Path

from tests.unit.kubelet import BareProvider
from tests.unit.node.test_pod_updates import CachedPods, pod
from vk_provider.node.daemon import kubelet_backend
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.provider import ProviderContext
from vk_providers.mock import MockProvider


async def test_the_kubelet_serves_the_watch_cache_and_the_providers_capabilities(tmp_path: Path) -> None:
    pods = CachedPods()
    provider = MockProvider(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    metrics = DaemonMetrics()
    backend = kubelet_backend("n", provider, pods, metrics)  # type: ignore[arg-type]
    assert backend.bound_pods() == []
    pods.objects["u1"] = pod()
    assert backend.bound_pods() == [pod()]  # read at each request, not copied once
    assert backend.running_pods == provider.list_pods
    assert backend.stream_logs == provider.stream_logs
    assert backend.pod_usage == provider.usage
    assert backend.metrics is not None
    assert backend.metrics() == metrics.exposition()


def test_a_capability_the_provider_lacks_is_left_out() -> None:
    backend = kubelet_backend("n", BareProvider(), CachedPods(), DaemonMetrics())  # type: ignore[arg-type]
    assert backend.stream_logs is None
    assert backend.pod_usage is None
