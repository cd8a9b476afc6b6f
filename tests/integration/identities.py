"""Kubeconfigs for ServiceAccounts, so daemons under test run with exactly the RBAC the manifests grant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client

from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster
from vk_provider.kit.kube import KubeApi


async def service_account_kubeconfig(
    api: client.ApiClient, control_plane: cluster.ClusterState, namespace: str, name: str, path: Path
) -> Path:
    """Write a kubeconfig that authenticates as `namespace/name` with a fresh one-hour token."""
    token = await client.CoreV1Api(api).create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}
    )
    write_token_kubeconfig(path, control_plane, name, token.status.token)
    return path


def write_token_kubeconfig(path: Path, control_plane: cluster.ClusterState, user: str, token: str) -> None:
    cluster_entry = {"server": control_plane.server, "certificate-authority": str(control_plane.ca_cert)}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "plane", "cluster": cluster_entry}],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [{"name": user, "context": {"cluster": "plane", "user": user}}],
                "current-context": user,
            }
        )
    )


async def account_with_rules(
    kube_api: client.ApiClient,
    control_plane: cluster.ClusterState,
    namespace: str,
    name: str,
    *,
    rules: list[dict[str, Any]],
    path: Path,
) -> KubeApi:
    """A ServiceAccount in `namespace` holding a Role of `rules` there and nothing else, and a client
    that authenticates as it (its kubeconfig written to `path`); close the client when done."""
    admin = client.RbacAuthorizationV1Api(kube_api)
    await client.CoreV1Api(kube_api).create_namespaced_service_account(
        namespace, {"metadata": {"name": name}}
    )
    await admin.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    await admin.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )

    async def token() -> Path | None:
        try:
            return await service_account_kubeconfig(kube_api, control_plane, namespace, name, path)
        except client.ApiException:
            return None  # the ServiceAccount is not served yet

    kubeconfig = await wait_for(token, timeout_seconds=30, what=f"a token for {namespace}/{name}")
    return await KubeApi.from_kubeconfig(str(kubeconfig))
