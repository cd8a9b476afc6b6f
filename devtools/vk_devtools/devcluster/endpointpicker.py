"""The Gateway API Inference Extension's endpoint picker (EPP) and its InferencePool CRD, for the dev cluster.

`ENDPOINT_PICKER` is the GoBuild (`gomod-endpoint-picker/` pins `sigs.k8s.io/gateway-api-inference-extension`
v1.5.0; `dev build` builds it). An InferencePool names the model-server pods of one model and the EPP
that picks among them; a gateway asks that EPP, over Envoy's ext_proc gRPC, which pod serves each
request, and the EPP answers from the metrics it scrapes off the pods (queue length, KV-cache use).

Why v1.5.0 and not the newer v1.6.2: v1.5.0 is the last release whose `cmd/epp` is the full picker.
From v1.6 the module ships only `cmd/lwepp`, a round-robin picker that reads no metrics; the full one
moved to llm-d, whose module the Go module proxy we build from refuses (403). In v1.5.0 the
InferencePool is `inference.networking.k8s.io/v1` and `spec.endpointPickerRef` is required.

How it runs in the development cluster: as a pod on the home node (`local-gpu`, of the `local`
provider), which runs container commands as real processes of this host. Those share the host's
network: the EPP binds its ports on every interface, so each EPP is given free ports of its own
(`picker_argv`), and its Service sends to the named container port. It finds the plane through the
`KUBECONFIG` environment variable: it has no `--kubeconfig` flag (controller-runtime's is registered on
a flag set the EPP never parses), and a `local` pod has no in-cluster service account files where
client-go looks for them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from vk_devtools.devcluster.building import Component, GoBuild, VersionStamp, module_source, read_pins
from vk_devtools.devcluster.traffic import apply_crds

MODULE = "sigs.k8s.io/gateway-api-inference-extension"
GOMOD_DIR = Path(__file__).with_name("gomod-endpoint-picker")
CRD_FILE = Path("config", "crd", "bases", "inference.networking.k8s.io_inferencepools.yaml")
"""The InferencePool CRD in the module (the `x-k8s.io` CRDs beside it are alpha extras we do not use)."""

GRPC_PORT = 9002
"""The EPP's defaults: ext_proc gRPC (what a gateway calls; TLS with a self-signed certificate), gRPC
health, and Prometheus metrics. Each binds on every interface."""
HEALTH_PORT = 9003
METRICS_PORT = 9090


def _tag_commit(version: str) -> str:
    """The commit the module proxy says `version` was tagged at (its `.info` origin), for the EPP's
    startup log and `inference_extension_info` metric; "unknown" when the proxy does not say."""
    completed = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{version}"],
        cwd=GOMOD_DIR,
        env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    try:
        commit = json.loads(completed.stdout)["Origin"]["Hash"]
    except (ValueError, KeyError, TypeError):
        return "unknown"
    return commit if isinstance(commit, str) and commit else "unknown"


def _version_variables(version: str) -> dict[str, str]:
    # What upstream's Dockerfile stamps (`version.CommitSHA`, `version.BuildRef`).
    return {f"{MODULE}/version.CommitSHA": _tag_commit(version), f"{MODULE}/version.BuildRef": version}


ENDPOINT_PICKER = GoBuild(
    name="endpoint picker",
    cache_folder="endpoint-picker",
    gomod_dir=GOMOD_DIR,
    components=(Component("epp", f"{MODULE}/cmd/epp", VersionStamp(MODULE, _version_variables)),),
    folder_modules=(("epp", MODULE),),
    cold_build_note=(
        "A cold build of the endpoint picker takes about 2 minutes on 2 cores (3 minutes of CPU, 1 GB "
        "of memory)."
    ),
)
VERSION = read_pins(ENDPOINT_PICKER).version(MODULE)
"""The pinned release, read from `gomod-endpoint-picker/go.mod` (the one source of truth)."""


def module_dir() -> Path:
    """The pinned module's source in the Go module cache (its CRDs live there)."""
    return module_source(MODULE, VERSION, cwd=GOMOD_DIR)


def inference_pool_crds(source: Path | None = None) -> list[dict[str, Any]]:
    """The InferencePool CustomResourceDefinition of the pinned module (`source`: its folder, by
    default the one in the Go module cache)."""
    path = (source or module_dir()) / CRD_FILE
    documents = [
        document
        for document in yaml.safe_load_all(path.read_text())
        if document and document.get("kind") == "CustomResourceDefinition"
    ]
    if not documents:
        raise RuntimeError(f"no CustomResourceDefinition in {path}")
    return documents


def install_crds(bin_dir: Path, kubeconfig: Path, folder: Path) -> list[str]:
    """Apply the InferencePool CRD server-side, as the Gateway API's are (a later pin's CRD takes its
    fields over without a last-applied annotation), and wait until it is Established; its names."""
    return apply_crds(
        bin_dir,
        kubeconfig,
        folder / f"gateway-api-inference-extension-{VERSION}-inferencepools.yaml",
        inference_pool_crds(),
    )


def picker_argv(
    binary: Path,
    *,
    pool_name: str,
    pool_namespace: str,
    grpc_port: int = GRPC_PORT,
    health_port: int = HEALTH_PORT,
    metrics_port: int = METRICS_PORT,
) -> list[str]:
    """The EPP's command line, serving the InferencePool `pool_namespace/pool_name`; the plane is the
    one `KUBECONFIG` names in its environment (see the module's docstring).

    Off: tracing (it would export to an OpenTelemetry collector there is none of), the metrics
    endpoint's authentication (it asks the apiserver to review each scraper's token), pprof. Secure
    serving stays on, with the EPP's self-signed certificate, as a gateway expects of it."""
    return [
        str(binary),
        f"--pool-name={pool_name}",
        f"--pool-namespace={pool_namespace}",
        "--tracing=false",
        "--metrics-endpoint-auth=false",
        "--enable-pprof=false",
        "--zap-log-level=info",
        f"--refresh-metrics-interval={REFRESH_METRICS_INTERVAL}",
        f"--grpc-port={grpc_port}",
        f"--grpc-health-port={health_port}",
        f"--metrics-port={metrics_port}",
    ]


REFRESH_METRICS_INTERVAL = "250ms"
"""How often the picker scrapes each model server (its default is 50 ms). Our token servers are Python
processes on the same two cores as everything else in a test run: 20 scrapes a second each took a
share of them that slowed unrelated tests, and a queue seen within a quarter of a second is soon enough
for the picker to steer by."""

PICKER_SERVICE_PORT = GRPC_PORT
"""The port of the picker's Service, which the pool's `endpointPickerRef` names (its container port is
whatever free port the picker was given)."""
PICKER_IMAGE = f"registry.k8s.io/gateway-api-inference-extension/epp:{VERSION}"
"""Named for the record only: a `local` node runs the container's command."""


@dataclasses.dataclass(frozen=True)
class PickerPorts:
    """The ports one picker listens on (every interface of the host: see the module's docstring)."""

    grpc: int
    health: int
    metrics: int


def pool_objects(
    *,
    namespace: str,
    pool: str,
    app: str,
    target_port: int,
    node: str,
    binary: Path,
    kubeconfig: Path,
    ports: PickerPorts,
    fail_open: bool = False,
) -> list[dict[str, Any]]:
    """An InferencePool `pool` over the pods labelled app=`app` (at `target_port`), and its picker: a
    Deployment of one pod on `node` and a Service `<pool>-epp`, which the pool names."""
    picker = f"{pool}-epp"
    command = picker_argv(
        binary,
        pool_name=pool,
        pool_namespace=namespace,
        grpc_port=ports.grpc,
        health_port=ports.health,
        metrics_port=ports.metrics,
    )
    container = {
        "name": "epp",
        "image": PICKER_IMAGE,
        "command": command,
        "env": [{"name": "KUBECONFIG", "value": str(kubeconfig)}],
        "ports": [
            {"name": "grpc", "containerPort": ports.grpc},
            {"name": "metrics", "containerPort": ports.metrics},
        ],
        # Ready once it serves: its metrics listener starts with its manager.
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": ports.metrics}, "periodSeconds": 1},
    }
    return [
        {
            "apiVersion": "inference.networking.k8s.io/v1",
            "kind": "InferencePool",
            "metadata": {"name": pool, "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": {"app": app}},
                "targetPorts": [{"number": target_port}],
                "endpointPickerRef": {
                    "name": picker,
                    "port": {"number": PICKER_SERVICE_PORT},
                    "failureMode": "FailOpen" if fail_open else "FailClose",
                },
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": picker, "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": picker}},
                "template": {
                    "metadata": {"labels": {"app": picker}},
                    "spec": {"nodeName": node, "containers": [container]},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": picker, "namespace": namespace},
            "spec": {
                "selector": {"app": picker},
                "ports": [{"name": "grpc", "port": PICKER_SERVICE_PORT, "targetPort": "grpc"}],
            },
        },
    ]
