"""The development cluster's own virtual node: a `local` provider node that plays the home GPU nodes.

There are no real kubelets in the development cluster, so without this node nothing could run. It is
untainted (ordinary Deployments land on it, as on a home GPU node), advertises GPUs, and runs each
container's command as a real process on its own 127.x address.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

NODE_NAME = "local-gpu"
CAPACITY = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}


def write_config(directory: Path, *, kubeconfig: Path, kubelet_port: int) -> Path:
    config = {
        "node_name": NODE_NAME,
        "provider": "local",
        "kubeconfig": str(kubeconfig),
        "no_taint": True,
        "labels": {"vk-provider.dev/role": "home-gpu"},
        "capacity": CAPACITY,
        "kubelet_port": kubelet_port,
        "kubelet_bind_address": "127.0.0.1",
        # The development cluster approves its node's serving certificate itself.
        "kubelet_csr_self_approve": True,
        "state_dir": str(directory / "nodes" / NODE_NAME),
        "provider_config": {"capacity": {"nvidia.com/gpu": CAPACITY["nvidia.com/gpu"]}},
    }
    path = directory / "nodes" / f"{NODE_NAME}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def argv(config: Path) -> list[str]:
    return [sys.executable, "-m", "vk_provider", "node", "--config", str(config)]


def is_ready(node_json: str | None) -> bool:
    if not node_json:
        return False
    conditions = json.loads(node_json).get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
