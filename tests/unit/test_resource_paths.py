"""REST paths of Kubernetes objects, built in one place for every client of the API."""

from __future__ import annotations

from vk_provider.kit.kube import resource_path


def test_core_objects_live_under_api_v1() -> None:
    assert resource_path("v1", "nodes", name="gpu-1") == "/api/v1/nodes/gpu-1"
    assert resource_path("v1", "pods", namespace="ml", name="p") == "/api/v1/namespaces/ml/pods/p"
    assert resource_path("v1", "pods") == "/api/v1/pods"


def test_grouped_objects_live_under_apis_with_their_group() -> None:
    assert (
        resource_path("coordination.k8s.io/v1", "leases", namespace="kube-node-lease", name="n")
        == "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n"
    )
    assert (
        resource_path("apps/v1", "deployments", namespace="ml") == "/apis/apps/v1/namespaces/ml/deployments"
    )


def test_a_subresource_follows_its_object() -> None:
    assert (
        resource_path("v1", "pods", namespace="ml", name="p", subresource="status")
        == "/api/v1/namespaces/ml/pods/p/status"
    )
