"""The development cluster's own virtual nodes, backed by the `local` provider (or `runpod`, for burst).

There are no real kubelets in the development cluster, so without these nodes nothing could run:

- `local-gpu` plays the home GPU nodes: untainted (ordinary Deployments land on it, as on a home GPU
  node), labelled `vk-provider.dev/role=home-gpu`, advertising 8 GPUs;
- `burst-gpu` plays the external GPU provider of the demo: tainted like every virtual node and
  labelled `vk-provider.dev/role=burst-gpu`, so only the Offloads' away pods go there. By default a
  `local` node too; with `--burst-provider runpod-standin` a `runpod` node (see `runpodstandin`).

A `local` node runs container commands as real processes, each pod on an address of its own from a /24
of the dev pod network (see `podnetwork`), so Services get real endpoints. The node itself (its
InternalIP, and where its kubelet API listens) has an address of that network too, not loopback, so
the apiserver's node proxy and metrics-server reach it. Containers that set no
`command` (as RunPod requires) run their image's entrypoint, which `IMAGE_ENTRYPOINTS` stands in for.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from vk_devtools.devcluster import podnetwork
from vk_devtools.standins.dcgm import DCGM_STANDIN_ENTRYPOINT, DCGM_STANDIN_IMAGE
from vk_devtools.standins.interconnect import INTERCONNECT_EXPORTER_ENTRYPOINT, INTERCONNECT_EXPORTER_IMAGE
from vk_provider import __version__
from vk_providers.local.config import DEFAULT_INHERITED_ENV

CAPACITY = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}
GPU_CAPACITY = {"nvidia.com/gpu": CAPACITY["nvidia.com/gpu"]}
TOKENS_IMAGE = "vk-provider/tokens:0.1.0"
"""The example service's image (manifests/examples/inference.yaml): its container passes `args` only."""
VK_PROVIDER_REPOSITORY = "vk-provider"
VK_PROVIDER_IMAGE = f"{VK_PROVIDER_REPOSITORY}:{__version__}"
"""vk-provider's own image, as manifests/ name it: node daemon, router and controller (`--in-cluster`)."""
IMAGE_ENTRYPOINTS = {
    TOKENS_IMAGE: [sys.executable, "-m", "vk_devtools.demo.tokens"],
    DCGM_STANDIN_IMAGE: list(DCGM_STANDIN_ENTRYPOINT),
    INTERCONNECT_EXPORTER_IMAGE: list(INTERCONNECT_EXPORTER_ENTRYPOINT),
    # By repository, so every tag and digest of it: a release's chart names the image by digest.
    VK_PROVIDER_REPOSITORY: [sys.executable, "-m", "vk_provider"],
}
"""What those images' ENTRYPOINTs would run, for `local` nodes, which run no images: this Python, so
vk-provider is importable, as in the image. The dcgm-exporter stand-in's lets the GPU policy scrape a
home node's (pretend) GPUs from a pod on it, the interconnect exporter's its (pretend) links."""


FIRST_DEV_SUBNET = 2
FIRST_TEST_SUBNET = FIRST_DEV_SUBNET + 2 * podnetwork.ADDRESS_GROUPS
"""Development planes give their nodes /24s 2..33 of the pod network, a pair per address group, so two
running planes never share a pod address; the tests' own nodes take /24s from here up."""


@dataclasses.dataclass(frozen=True)
class DevNode:
    name: str
    role: str
    tainted: bool
    pair_offset: int
    host_slot: int
    """Which of the cluster's host addresses is the node's (`podnetwork.host_address`)."""

    @property
    def labels(self) -> dict[str, str]:
        return {"vk-provider.dev/role": self.role}

    def subnet(self, group: int) -> str:
        """The node's pod range in the plane holding address `group`."""
        return str(podnetwork.subnet(FIRST_DEV_SUBNET + 2 * group + self.pair_offset))

    def address(self, group: int) -> str:
        """The node's InternalIP, where its kubelet API listens."""
        return podnetwork.host_address(group, self.host_slot)


HOME = DevNode(name="local-gpu", role="home-gpu", tainted=False, pair_offset=0, host_slot=1)
AWAY = DevNode(name="burst-gpu", role="burst-gpu", tainted=True, pair_offset=1, host_slot=2)
NODE_NAME = HOME.name


def local_provider_config(group: int, node: DevNode) -> dict[str, Any]:
    return {
        "capacity": GPU_CAPACITY,
        "address_range": node.subnet(group),
        "image_entrypoints": IMAGE_ENTRYPOINTS,
    }


def stack_provider_config(group: int, node: DevNode, cluster_mark: str) -> dict[str, Any]:
    """A home node that runs vk-provider's own Pods (`dev up --in-cluster`): it mounts their volumes
    (the ServiceAccount token, the node's ConfigMap), and passes `cluster_mark` to its containers, so
    the workloads a node daemon Pod starts carry it too and `dev down` finds them."""
    return {
        **local_provider_config(group, node),
        "mount_volumes": True,
        "inherited_env": [*DEFAULT_INHERITED_ENV, cluster_mark],
    }


def write_config(
    directory: Path,
    node: DevNode,
    *,
    group: int,
    kubeconfig: Path,
    kubelet_port: int,
    provider: str = "local",
    provider_config: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """The node's configuration file in the plane holding address `group`; `provider_config` defaults
    to a `local` node's, `extra` adds node settings."""
    config: dict[str, Any] = {
        "node_name": node.name,
        "provider": provider,
        "kubeconfig": str(kubeconfig),
        "labels": node.labels,
        "capacity": CAPACITY,
        "kubelet_port": kubelet_port,
        # Not loopback: the apiserver's node proxy (`kubectl get --raw /api/v1/nodes/<node>/proxy/...`)
        # and metrics-server refuse or cannot use a loopback node address. The serving certificate
        # names this address (the CSR's IP SAN), so the apiserver can verify it.
        "addresses": [node.address(group)],
        "kubelet_bind_address": node.address(group),
        # The development cluster approves its nodes' serving certificates itself.
        "kubelet_csr_self_approve": True,
        "state_dir": str(directory / "nodes" / node.name),
        # The node's leader Lease: the development cluster has no vk-provider-system namespace.
        "leader_election_namespace": "default",
        # One replica per dev node, under a fixed identity: a daemon restarted after a kill -9 takes
        # back its own Lease at once instead of waiting out the dead process's 15 s.
        "leader_election_identity": f"{node.name}-dev",
        "provider_config": (
            local_provider_config(group, node) if provider_config is None else provider_config
        ),
        **(extra or {}),
    }
    if not node.tainted:
        config["no_taint"] = True
    path = directory / "nodes" / f"{node.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def argv(config: Path) -> list[str]:
    return [sys.executable, "-m", "vk_provider", "node", "--config", str(config)]


def workload_path() -> str:
    """PATH for the nodes (and so their workloads): this Python's folder first, so a container command
    such as `python3 -m vk_devtools.demo.tokens` runs with vk-provider importable, as in its image."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")])


def is_ready(node_json: str | None) -> bool:
    if not node_json:
        return False
    conditions = json.loads(node_json).get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def renewed_since(lease_json: str | None, since: datetime) -> bool:
    """Whether the node's Lease (its heartbeat) was renewed at or after `since`: after a restart, the
    node's Ready condition may still be the old process's, the renewal can only be the new one's."""
    if not lease_json:
        return False
    renewed = json.loads(lease_json).get("spec", {}).get("renewTime")
    if not isinstance(renewed, str):
        return False
    try:
        return datetime.fromisoformat(renewed) >= since
    except ValueError:
        return False
