"""Find the cluster CA a client trusts: from the kubeconfig's current context, or the in-cluster bundle.

The kubelet API verifies client certificates (the apiserver's kubelet client, for one) against the same
CA the cluster's apiserver certificate chains to; for a node daemon that is the CA its own client trusts.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from vk_provider.kit.kubeconfigs import KubeconfigError

IN_CLUSTER_CA = Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")


def cluster_ca_pem(kubeconfig: str | None) -> bytes:
    if kubeconfig is None:
        return IN_CLUSTER_CA.read_bytes()
    path = Path(kubeconfig)
    document: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
    context_name = document.get("current-context")
    contexts = {entry["name"]: entry.get("context", {}) for entry in document.get("contexts") or []}
    clusters = {entry["name"]: entry.get("cluster", {}) for entry in document.get("clusters") or []}
    context = contexts.get(context_name, {})
    cluster = clusters.get(context.get("cluster"), {})
    if "certificate-authority-data" in cluster:
        return base64.b64decode(cluster["certificate-authority-data"])
    if "certificate-authority" in cluster:
        ca_path = Path(cluster["certificate-authority"])
        return (ca_path if ca_path.is_absolute() else path.parent / ca_path).read_bytes()
    raise KubeconfigError(f"{kubeconfig}: the current context's cluster names no certificate authority")
