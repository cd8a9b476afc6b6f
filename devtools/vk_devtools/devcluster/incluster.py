"""`dev up --in-cluster`: the node daemon, the router and the controller as Pods, from the real manifests.

By default the demo's burst node, router and controller are host processes with the admin kubeconfig.
With `--in-cluster` they are what a user's cluster runs: `manifests/base` (the node daemon's Deployment,
ServiceAccount, RBAC) with the `self-approve` component, and `manifests/traffic` (router, controller),
applied by kustomize from an overlay written into the cluster folder. Their Pods run on the home node
`local-gpu`, whose `local` provider runs the image `vk-provider:0.1.0` as this Python's `vk_provider`
(the image's entrypoint) and mounts the Pods' volumes: the ServiceAccount token it requests for each
Pod, the ConfigMap of the node's settings. So each component talks to the apiserver as its own
ServiceAccount, through the `kubernetes` Service (`servicenetwork`), and the virtual node `burst-gpu`
in `kubectl get nodes` is the one its Pod registered.

The overlay changes only what one host needs: every Pod here shares the host's network, so each
listens on its own Pod address instead of 0.0.0.0; the node's settings are those of the demo's burst
node; and its `local` provider keeps its workloads in a folder of the cluster (a hostPath), as a
real provider keeps them at the cloud: a replacement daemon Pod finds them there and adopts them.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from vk_devtools.devcluster import localnode
from vk_devtools.devcluster.traffic import MANIFESTS, kubectl_apply
from vk_provider.offload.names import ROUTER_ADMIN_PORT

NAMESPACE = "vk-provider-system"
NODE_DEPLOYMENT = "vk-provider-node"
ROUTER_DEPLOYMENT = "vk-provider-router"
CONTROLLER_DEPLOYMENT = "vk-provider-controller"
DEPLOYMENTS = (NODE_DEPLOYMENT, ROUTER_DEPLOYMENT, CONTROLLER_DEPLOYMENT)
ROUTER_PORT = 8080
PROVIDER_STATE_PATH = "/var/lib/vk-provider/provider"
"""Where the node daemon keeps its provider's state (`<state_dir>/provider`)."""


def overlay_folder(directory: Path) -> Path:
    return directory / "in-cluster"


def provider_folder(directory: Path) -> Path:
    """The burst node's `local` provider state, kept on the host across daemon Pods."""
    return directory / "nodes" / f"{localnode.AWAY.name}-provider"


def node_settings(group: int) -> dict[str, Any]:
    """The node daemon Pod's node.yaml: the demo's burst node, a `local` node on its own /24 of the
    plane's address `group`."""
    node = localnode.AWAY
    return {
        "node_name": node.name,
        "provider": "local",
        "state_dir": "/var/lib/vk-provider",
        "leader_elect": True,
        "labels": node.labels,
        "capacity": localnode.CAPACITY,
        # The Pod's address (VK_PROVIDER_ADDRESSES) is the Node's InternalIP; the serving certificate
        # the daemon requests names it, and the dev cluster lets the daemon approve it.
        "kubelet_csr_self_approve": True,
        # The Deployment's probes ask here (manifests/base/config.yaml sets the same), on the address
        # the kubelet API binds: the Pod's own.
        "health_port": 10248,
        "provider_config": localnode.local_provider_config(group, node),
    }


def _pod_address_variable(name: str) -> dict[str, Any]:
    """An env entry holding the Pod's address (the downward API's status.podIP)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def _listen_on_pod_address(
    name: str, replacements: Mapping[int, tuple[str, str]], *, has_env: bool = False
) -> dict[str, Any]:
    """A JSON patch replacing arguments (index -> (expected, replacement)), after testing that each
    is the one the manifest has: if the manifest changes, kustomize fails here instead of the overlay
    quietly patching something else. `has_env`: the container has env entries already, which an `add`
    at `env` would replace."""
    container = "/spec/template/spec/containers/0"
    pod_ip = _pod_address_variable("POD_IP")
    add_env = (
        {"op": "add", "path": f"{container}/env/-", "value": pod_ip}
        if has_env
        else {"op": "add", "path": f"{container}/env", "value": [pod_ip]}
    )
    operations: list[dict[str, Any]] = []
    for index, (expected, replacement) in replacements.items():
        operations.append({"op": "test", "path": f"{container}/args/{index}", "value": expected})
        operations.append({"op": "replace", "path": f"{container}/args/{index}", "value": replacement})
    return {
        "target": {"kind": "Deployment", "name": name},
        "patch": json.dumps([*operations, add_env]),
    }


def _relative(target: Path, folder: Path) -> str:
    """`target` as kustomize takes a base: relative to the overlay's `folder` (it refuses absolute paths)."""
    return os.path.relpath(target, folder)


def kustomization(
    directory: Path, *, folder: Path | None = None, resources: Sequence[str] = ()
) -> dict[str, Any]:
    """The overlay in `folder` (default `overlay_folder`) on `resources` (default: the source tree's
    `manifests/base` and `manifests/traffic`; a release's install.yaml copied beside it instead)."""
    folder = overlay_folder(directory) if folder is None else folder
    node_patch = [
        # Both replicas share the host's network: each serves the kubelet API on its own address.
        {
            "op": "add",
            "path": "/spec/template/spec/containers/0/env/-",
            "value": _pod_address_variable("VK_PROVIDER_KUBELET_BIND_ADDRESS"),
        },
        {
            "op": "add",
            "path": "/spec/template/spec/volumes/-",
            "value": {
                "name": "provider-state",
                "hostPath": {"path": str(provider_folder(directory)), "type": "DirectoryOrCreate"},
            },
        },
        {
            "op": "add",
            "path": "/spec/template/spec/containers/0/volumeMounts/-",
            "value": {"name": "provider-state", "mountPath": PROVIDER_STATE_PATH},
        },
    ]
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # The overlay lives in the cluster folder, the manifests in the source tree.
        "resources": list(resources)
        or [_relative(MANIFESTS / "base", folder), _relative(MANIFESTS / "traffic", folder)],
        "components": [_relative(MANIFESTS / "components" / "self-approve", folder)],
        "configMapGenerator": [
            {
                "name": NODE_DEPLOYMENT,
                "namespace": NAMESPACE,
                "behavior": "replace",
                "files": ["node.yaml"],
                "options": {"disableNameSuffixHash": True},
            }
        ],
        "patches": [
            {"target": {"kind": "Deployment", "name": NODE_DEPLOYMENT}, "patch": json.dumps(node_patch)},
            _listen_on_pod_address(
                ROUTER_DEPLOYMENT,
                {
                    1: (f"--listen=0.0.0.0:{ROUTER_PORT}", f"--listen=$(POD_IP):{ROUTER_PORT}"),
                    2: (
                        f"--admin-listen=0.0.0.0:{ROUTER_ADMIN_PORT}",
                        f"--admin-listen=$(POD_IP):{ROUTER_ADMIN_PORT}",
                    ),
                },
            ),
            _listen_on_pod_address(
                CONTROLLER_DEPLOYMENT,
                {5: ("--admin-listen=0.0.0.0:8081", "--admin-listen=$(POD_IP):8081")},
                has_env=True,  # POD_NAME, its identity in the leader Lease
            ),
        ],
    }


def write_overlay(directory: Path, group: int, *, install_manifest: Path | None = None) -> Path:
    """The overlay on the source tree's manifests, or with `install_manifest` (a release's install.yaml,
    copied into the folder, as kustomize loads files only from below it) on that."""
    folder = overlay_folder(directory)
    folder.mkdir(parents=True, exist_ok=True)
    provider_folder(directory).mkdir(parents=True, exist_ok=True)
    resources: list[str] = []
    if install_manifest is not None:
        shutil.copy2(install_manifest, folder / install_manifest.name)
        resources = [install_manifest.name]
    (folder / "node.yaml").write_text(yaml.safe_dump(node_settings(group), sort_keys=False))
    written = kustomization(directory, folder=folder, resources=resources)
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(written, sort_keys=False))
    return folder


def install(bin_dir: Path, kubeconfig: Path, directory: Path, *, group: int, timeout_seconds: float) -> None:
    """Apply the overlay and wait until every Deployment is rolled out and the burst node is Ready."""
    kubectl_apply(bin_dir, kubeconfig, "apply", "--server-side", "-k", str(write_overlay(directory, group)))
    for deployment in DEPLOYMENTS:
        kubectl_apply(
            bin_dir,
            kubeconfig,
            "rollout",
            "status",
            f"deployment/{deployment}",
            "-n",
            NAMESPACE,
            f"--timeout={int(timeout_seconds)}s",
        )
    wait_for_burst_node(bin_dir, kubeconfig, timeout_seconds=timeout_seconds)


def wait_for_burst_node(bin_dir: Path, kubeconfig: Path, *, timeout_seconds: float) -> None:
    """Until the virtual node the stack's daemon Pods register is Ready."""
    kubectl_apply(
        bin_dir,
        kubeconfig,
        "wait",
        "--for=condition=Ready",
        f"node/{localnode.AWAY.name}",
        f"--timeout={int(timeout_seconds)}s",
    )


def router_urls(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """The base URLs of the router Pods that are Ready, from a `kubectl get pods -o json` list."""
    urls = []
    for pod in pods:
        status = pod.get("status") or {}
        ready = any(
            condition.get("type") == "Ready" and condition.get("status") == "True"
            for condition in status.get("conditions") or []
        )
        address = status.get("podIP")
        if ready and address and pod.get("metadata", {}).get("deletionTimestamp") is None:
            urls.append(f"http://{address}:{ROUTER_PORT}")
    return sorted(urls)


def wait_for_router_urls(bin_dir: Path, kubeconfig: Path, *, timeout_seconds: float) -> list[str]:
    """The Ready router Pods' URLs once there is at least one."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        listed = kubectl_json(
            bin_dir,
            kubeconfig,
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            f"app.kubernetes.io/name={ROUTER_DEPLOYMENT}",
            "-o",
            "json",
        )
        urls = router_urls(listed.get("items") or [])
        if urls:
            return urls
        if time.monotonic() > deadline:
            raise RuntimeError(f"no router Pod in {NAMESPACE} was Ready within {timeout_seconds:.0f}s")
        time.sleep(1.0)


def kubectl_json(bin_dir: Path, kubeconfig: Path, *arguments: str) -> dict[str, Any]:
    loaded = json.loads(kubectl_apply(bin_dir, kubeconfig, *arguments))
    if not isinstance(loaded, dict):
        raise RuntimeError(f"`kubectl {' '.join(arguments)}` printed no object")
    return loaded
