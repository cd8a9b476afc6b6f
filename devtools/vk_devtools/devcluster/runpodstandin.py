"""The demo's away side on the offline RunPod stand-in (`dev up --burst-provider runpod-standin`).

The stand-in (`python -m vk_devtools.standins.runpod.server`) is one more component of the development
cluster, started before the burst node and stopped after it. `burst-gpu` is then a `runpod` node: the
real provider creates, polls and deletes RunPod pods through the stand-in's REST API, and the router
reaches them through its proxy front, which serves each RUNNING pod's HTTP port with the demo's token
server (`vk_devtools.standins.runpod.workloads`). No account, no network: every address is on loopback.

The stand-in picks its own ports and writes them to `runpod/addresses.json` in the cluster's folder
once they answer; the API key is generated per `up` and handed over in a file, never on a command line.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from vk_devtools.devcluster import localnode

COMPONENT = "runpod-standin"
PROVIDER_CHOICE = "runpod-standin"
"""The `--burst-provider` value that selects this away side."""
GPU_TYPE = "NVIDIA GeForce RTX 4090"
"""One of the stand-in's catalog (`vk_devtools.standins.runpod.catalog.DEFAULT_GPU_TYPES`)."""
PROVISIONING_SECONDS = 1.0
STARTING_SECONDS = 1.0
"""A RunPod pod's PROVISIONING and STARTING phases: long enough to be seen in `kubectl get pods`, short
enough that a flip still takes seconds (real RunPod takes minutes)."""
# Faster than the provider's defaults so a flip is not held up waiting: checks through the proxy once a
# second, and a hung call gives up after 10 s rather than 30.
RUNPOD_SETTINGS: dict[str, Any] = {
    "readiness_interval_seconds": 1.0,
    "call_timeout_seconds": 10.0,
}
STATUS_POLL_INTERVAL_SECONDS = 1.0
"""RunPod cannot push pod state changes, so the node polls: every second rather than every five."""


@dataclasses.dataclass(frozen=True, slots=True)
class Addresses:
    """Where the running stand-in answers, as it wrote them to its addresses file."""

    api_url: str
    proxy_url_template: str
    control_url: str


def folder(directory: Path) -> Path:
    return directory / "runpod"


def addresses_file(directory: Path) -> Path:
    return folder(directory) / "addresses.json"


def api_key_file(directory: Path) -> Path:
    return folder(directory) / "api-key"


def write_api_key(directory: Path) -> Path:
    """A fresh key for this `up`, readable by its owner only (as a mounted Secret would be)."""
    path = api_key_file(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(f"rp_standin_{secrets.token_hex(16)}\n")
    return path


def argv(directory: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vk_devtools.standins.runpod.server",
        "--api-key-file",
        str(api_key_file(directory)),
        "--pod-app",
        "tokens",
        "--addresses-file",
        str(addresses_file(directory)),
        "--provisioning-seconds",
        str(PROVISIONING_SECONDS),
        "--starting-seconds",
        str(STARTING_SECONDS),
    ]


def read_addresses(directory: Path) -> Addresses | None:
    """The running stand-in's addresses; None until it has written them."""
    try:
        raw = json.loads(addresses_file(directory).read_text())
        return Addresses(raw["api_url"], raw["proxy_url_template"], raw["control_url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_answering(directory: Path) -> bool:
    """True once the stand-in has written its addresses and its API accepts our key."""
    addresses = read_addresses(directory)
    if addresses is None:
        return False
    request = urllib.request.Request(  # noqa: S310 (our own loopback URL)
        f"{addresses.api_url}/catalog/gpus",
        headers={"Authorization": f"Bearer {api_key_file(directory).read_text().strip()}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=3) as response:  # noqa: S310
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def write_node_config(
    directory: Path, node: localnode.DevNode, *, group: int, kubeconfig: Path, kubelet_port: int
) -> Path:
    """The configuration of `node` as a `runpod` node on the running stand-in."""
    return localnode.write_config(
        directory,
        node,
        group=group,
        kubeconfig=kubeconfig,
        kubelet_port=kubelet_port,
        provider="runpod",
        provider_config=provider_config(directory, localnode.GPU_CAPACITY),
        extra={"status_poll_interval_seconds": STATUS_POLL_INTERVAL_SECONDS},
    )


def provider_config(directory: Path, capacity: dict[str, str]) -> dict[str, Any]:
    """The `runpod` provider's section of the burst node's configuration: pointed at the stand-in."""
    addresses = read_addresses(directory)
    if addresses is None:
        raise RuntimeError(f"the RunPod stand-in has not written {addresses_file(directory)}")
    return {
        "api_url": addresses.api_url,
        "proxy_url_template": addresses.proxy_url_template,
        "api_key_file": str(api_key_file(directory)),
        "gpu_type": GPU_TYPE,
        "capacity": capacity,
        **RUNPOD_SETTINGS,
    }
