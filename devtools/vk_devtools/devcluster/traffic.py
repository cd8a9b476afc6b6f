"""The demo's traffic half in the development cluster: the CRD, the example service, router, controller.

Router and controller run as host processes next to the control plane (like the nodes), with the
admin kubeconfig; in a real cluster they run from `manifests/traffic` with their own ServiceAccounts.
The manifests are read from the source tree (`make demo` runs from a clone).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from vk_devtools.standins.dcgm import exporter_pod

SOURCE_TREE = Path(__file__).resolve().parents[3]
"""The repository: this file is `devtools/vk_devtools/devcluster/traffic.py` in it."""
MANIFESTS = SOURCE_TREE / "manifests"
CRD = MANIFESTS / "crds" / "offload.yaml"
EXAMPLE = MANIFESTS / "examples" / "inference.yaml"
POLICY_CRD = MANIFESTS / "crds" / "offloadpolicy.yaml"
KEPT_ROUTE_CRD = MANIFESTS / "crds" / "keptroute.yaml"
TRAINING = MANIFESTS / "examples" / "training.yaml"
"""The PriorityClass `training` and the OffloadPolicy that moves the example service for it."""
TRAINING_JOB = MANIFESTS / "examples" / "training-job.yaml"
"""The demo's training: a gang (a PodGroup and its Job) that needs every GPU of the home node."""
EXAMPLE_NAME = "tokens"
EXAMPLE_POOL = "tokens-pool"
"""The InferencePool over the example's pods (`dev up --data-plane inferencepool`)."""
EXAMPLE_HOST = "tokens.demo"
LEASE_NAMESPACE = "default"


def kubectl_apply(bin_dir: Path, kubeconfig: Path, *arguments: str) -> str:
    """Run kubectl against the plane; its output, or RuntimeError with its message."""
    command = [str(bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", *arguments]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"`kubectl {' '.join(arguments)}` failed: {completed.stderr.strip()}")
    return completed.stdout


def install_crds(bin_dir: Path, kubeconfig: Path) -> None:
    """The Offload, KeptRoute and OffloadPolicy CRDs, established before anything uses them."""
    kubectl_apply(
        bin_dir, kubeconfig, "apply", "-f", str(CRD), "-f", str(KEPT_ROUTE_CRD), "-f", str(POLICY_CRD)
    )
    kubectl_apply(
        bin_dir,
        kubeconfig,
        "wait",
        "--for=condition=Established",
        "crd/offloads.offload.vk-provider.dev",
        "crd/keptroutes.offload.vk-provider.dev",
        "crd/offloadpolicies.offload.vk-provider.dev",
        "--timeout=60s",
    )


def apply_crds(bin_dir: Path, kubeconfig: Path, path: Path, crds: list[dict[str, Any]]) -> list[str]:
    """Write `crds` to `path`, apply them server-side (a CRD may be larger than a client-side apply's
    annotation may be, and a later pin's takes its fields over) and wait until they are Established;
    their names."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(crds))
    kubectl_apply(bin_dir, kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(path))
    names = [str(crd["metadata"]["name"]) for crd in crds]
    kubectl_apply(
        bin_dir,
        kubeconfig,
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        *(f"crd/{name}" for name in names),
    )
    return names


def install(bin_dir: Path, kubeconfig: Path, *, data_plane: str = "builtin") -> None:
    """The CRDs, then the example service and its Offload (its traffic on `data_plane`), the training
    PriorityClass and the OffloadPolicy."""
    install_crds(bin_dir, kubeconfig)
    kubectl_apply(bin_dir, kubeconfig, "apply", "-f", str(EXAMPLE), "-f", str(TRAINING))
    if data_plane != "builtin":
        pool = {"inferencePool": {"name": EXAMPLE_POOL}} if data_plane == "inferencepool" else {}
        traffic = json.dumps({"spec": {"traffic": {"dataPlane": data_plane, **pool}}})
        kubectl_apply(
            bin_dir,
            kubeconfig,
            "patch",
            "offload",
            EXAMPLE_NAME,
            "-n",
            "default",
            "--type=merge",
            "-p",
            traffic,
        )


def install_gpu_exporter(bin_dir: Path, kubeconfig: Path, directory: Path, node: str, gpus: int) -> None:
    """The dcgm-exporter stand-in as a pod on the home GPU node, where the OffloadPolicy scrapes its
    GPUs' health (manifests/examples/training.yaml selects it by its labels)."""
    manifest = directory / f"dcgm-exporter-{node}.json"
    manifest.write_text(json.dumps(exporter_pod(f"dcgm-exporter-{node}", node, gpus=gpus)))
    kubectl_apply(bin_dir, kubeconfig, "apply", "-f", str(manifest))


def load_manifests(path: Path) -> list[dict[str, Any]]:
    """The objects of a manifest file, in its order, as JSON-like data."""
    loaded = [document for document in yaml.safe_load_all(path.read_text()) if document is not None]
    if not loaded or not all(isinstance(document, dict) for document in loaded):
        raise ValueError(f"{path} holds no objects, or something else than objects")
    return loaded


def router_argv(kubeconfig: Path, port: int, *, admin_port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vk_provider",
        "router",
        "--kubeconfig",
        str(kubeconfig),
        "--listen",
        f"127.0.0.1:{port}",
        "--admin-listen",
        f"127.0.0.1:{admin_port}",
    ]


def xds_argv(
    kubeconfig: Path,
    *,
    port: int,
    status_port: int,
    envoy_port: int,
    tls_arguments: list[str],
    inference_pools: bool = False,
) -> list[str]:
    """`vk-provider xds` for the Envoys of `dev up --data-plane envoy` (or `inferencepool`: then it
    watches InferencePools too), on loopback, with the mutual TLS flags `tls_arguments`
    (`XdsCertificates.server_arguments`)."""
    return [
        sys.executable,
        "-m",
        "vk_provider",
        "xds",
        "--kubeconfig",
        str(kubeconfig),
        "--listen",
        f"127.0.0.1:{port}",
        "--admin-listen",
        f"127.0.0.1:{status_port}",
        "--envoy-port",
        str(envoy_port),
        *tls_arguments,
        *(["--inference-pools"] if inference_pools else []),
    ]


def controller_argv(kubeconfig: Path, router_admin_port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vk_provider",
        "controller",
        "--kubeconfig",
        str(kubeconfig),
        "--router-url",
        f"http://127.0.0.1:{router_admin_port}",
        "--leader-election-namespace",
        LEASE_NAMESPACE,
    ]
