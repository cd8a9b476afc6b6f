"""The Offload's API paths, as every client of the resource builds them."""

from __future__ import annotations

from vk_provider.offload.names import offload_path, offloads_path


def test_the_collection_is_per_namespace_or_cluster_wide() -> None:
    assert offloads_path(None) == "/apis/offload.vk-provider.dev/v1alpha1/offloads"
    assert offloads_path("ml") == "/apis/offload.vk-provider.dev/v1alpha1/namespaces/ml/offloads"


def test_one_offload_and_its_status_subresource() -> None:
    assert offload_path("ml", "chat") == "/apis/offload.vk-provider.dev/v1alpha1/namespaces/ml/offloads/chat"
    assert offload_path("ml", "chat", status=True).endswith("/offloads/chat/status")
