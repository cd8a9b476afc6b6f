"""Kubeconfigs for ServiceAccounts, so daemons under test run with exactly the RBAC the manifests grant."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes_asyncio import client

from vk_devtools.devcluster import cluster


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
