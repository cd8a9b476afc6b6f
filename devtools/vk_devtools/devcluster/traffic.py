"""The demo's traffic half in the development cluster: the CRD, the example service, router, controller.

Router and controller run as host processes next to the control plane (like the nodes), with the
admin kubeconfig; in a real cluster they run from `manifests/traffic` with their own ServiceAccounts.
The manifests are read from the source tree (`make demo` runs from a clone).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SOURCE_TREE = Path(__file__).resolve().parents[3]
"""The repository: this file is `devtools/vk_devtools/devcluster/traffic.py` in it."""
MANIFESTS = SOURCE_TREE / "manifests"
CRD = MANIFESTS / "crds" / "offload.yaml"
EXAMPLE = MANIFESTS / "examples" / "inference.yaml"
EXAMPLE_NAME = "tokens"
EXAMPLE_HOST = "tokens.demo"
LEASE_NAMESPACE = "default"


def kubectl_apply(bin_dir: Path, kubeconfig: Path, *arguments: str) -> None:
    command = [str(bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", *arguments]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"`kubectl {' '.join(arguments)}` failed: {completed.stderr.strip()}")


def install(bin_dir: Path, kubeconfig: Path) -> None:
    """The CRD (established before anything uses it), then the example service and its Offload."""
    kubectl_apply(bin_dir, kubeconfig, "apply", "-f", str(CRD))
    kubectl_apply(
        bin_dir,
        kubeconfig,
        "wait",
        "--for=condition=Established",
        "crd/offloads.offload.vk-provider.dev",
        "--timeout=60s",
    )
    kubectl_apply(bin_dir, kubeconfig, "apply", "-f", str(EXAMPLE))


def router_argv(kubeconfig: Path, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vk_provider",
        "router",
        "--kubeconfig",
        str(kubeconfig),
        "--listen",
        f"127.0.0.1:{port}",
    ]


def controller_argv(kubeconfig: Path, router_port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vk_provider",
        "controller",
        "--kubeconfig",
        str(kubeconfig),
        "--router-url",
        f"http://127.0.0.1:{router_port}",
        "--leader-election-namespace",
        LEASE_NAMESPACE,
    ]
