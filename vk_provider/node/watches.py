"""What the node watches: the pods bound to it and the Services for service-link variables.

Cluster-wide by default. With `namespaces` set, one watch per listed namespace and never a
cluster-wide list, so the node runs with RBAC granted in those namespaces only (a leaked token then
reads no Secret elsewhere). A pod of another namespace bound to this node is then never seen: it stays
Pending with its node name set, until it is deleted, unless an admission policy refuses the binding
(manifests/examples/namespaced-node/binding-guard.yaml; the chart's with `node.namespaces`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from vk_provider._kube.combined import CombinedReflector, Mirror
from vk_provider._kube.watching import Reflector
from vk_provider.kit.kube import KubeApi, resource_path
from vk_provider.node.settings import NodeSettings


def _per_namespace(
    api: KubeApi,
    settings: NodeSettings,
    resource: str,
    *,
    query: dict[str, str],
    on_change: Callable[[str], Awaitable[None]],
    description: str,
) -> Mirror:
    if not settings.namespaces:
        return Reflector(
            api, resource_path("v1", resource), query=query, on_change=on_change, description=description
        )
    return CombinedReflector(
        [
            Reflector(
                api,
                resource_path("v1", resource, namespace=namespace),
                query=query,
                on_change=on_change,
                description=f"{description} in namespace {namespace}",
            )
            for namespace in settings.namespaces
        ]
    )


def bound_pods(api: KubeApi, settings: NodeSettings, on_change: Callable[[str], Awaitable[None]]) -> Mirror:
    """The pods bound to this node (in its namespaces, when it has some)."""
    return _per_namespace(
        api,
        settings,
        "pods",
        query={"fieldSelector": f"spec.nodeName={settings.node_name}"},
        on_change=on_change,
        description=f"pods bound to {settings.node_name}",
    )


def services(api: KubeApi, settings: NodeSettings) -> Mirror:
    """The Services a pod's service-link variables name (only its own namespace's are ever read)."""

    async def ignore(uid: str) -> None:
        return None

    return _per_namespace(api, settings, "services", query={}, on_change=ignore, description="services")
