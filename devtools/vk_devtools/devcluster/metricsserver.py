"""metrics-server in the development cluster, so `kubectl top pods` and `kubectl top nodes` work.

metrics-server is built from our pinned Go module (`gomod-metrics-server/`, `METRICS_SERVER`) and runs as
a host process next to the control plane, as the nodes do. It scrapes each node's `/metrics/resource`
through the node's kubelet API and serves the aggregated `metrics.k8s.io` API, which `kubectl top`
reads through the apiserver. What that takes, each piece as in a kubeadm cluster:

- an address the apiserver may proxy to: the APIService names a Service, and with
  `--enable-aggregator-routing` the apiserver dials the Service's endpoint rather than its cluster IP
  (nothing here routes cluster IPs). EndpointSlices refuse loopback, so metrics-server listens on a
  host address of the dev pod network (`podnetwork.host_address`), published in the EndpointSlice of
  a selector-less Service;
- a serving certificate for `metrics-server.kube-system.svc` from the cluster CA, which the APIService's
  `caBundle` names, so the apiserver verifies it (no `insecureSkipTLSVerify`);
- an identity of its own (`system:metrics-server`, a client certificate of the cluster CA) with
  upstream's RBAC: read nodes and pods, `nodes/metrics` (the virtual nodes authorize the scrape with a
  SubjectAccessReview, as kubelets do), delegated authentication and authorization, and the
  `extension-apiserver-authentication` ConfigMap, from which it learns the front-proxy CA that signs
  the apiserver's proxied requests (`pki.py` makes that CA).

It verifies the nodes' serving certificates against the cluster CA (their CSRs name the nodes'
addresses) and scrapes every `SCRAPE_SECONDS` (10 s, metrics-server's minimum): a pod's CPU is a rate,
so it appears after two scrapes.
"""

from __future__ import annotations

import base64
import ipaddress
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vk_devtools.devcluster import podnetwork
from vk_devtools.devcluster.building import Component, GoBuild, VersionStamp
from vk_devtools.devcluster.pki import CertificateAuthority, ClientIdentity, KeyPair

MODULE = "sigs.k8s.io/metrics-server"
COMPONENT = "metrics-server"
"""The component name `dev up`, `status`, `down` and `restart` know it by."""
NAMESPACE = "kube-system"
SERVICE = "metrics-server"
API_GROUP = "metrics.k8s.io"
API_VERSION = "v1beta1"
APISERVICE = f"{API_VERSION}.{API_GROUP}"
APISERVICE_PATH = f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE}"
HOST_SLOT = 3
"""metrics-server's host address in the cluster's block (`podnetwork.host_address`)."""
SCRAPE_SECONDS = 10
IDENTITY = ClientIdentity("metrics-server", "system:metrics-server")
SERVING_STEM = "metrics-server-serving"


def _version_variables(version: str) -> dict[str, str]:
    # What upstream's Makefile stamps (VERSION_LDFLAGS): client-go's version package.
    return {
        "k8s.io/client-go/pkg/version.gitVersion": version,
        "k8s.io/client-go/pkg/version.gitTreeState": "clean",
    }


METRICS_SERVER = GoBuild(
    name="metrics-server",
    cache_folder="metrics-server",
    gomod_dir=Path(__file__).with_name("gomod-metrics-server"),
    components=(
        Component("metrics-server", f"{MODULE}/cmd/metrics-server", VersionStamp(MODULE, _version_variables)),
    ),
    folder_modules=(("metrics-server", MODULE),),
    cold_build_note="A cold build takes 5 to 9 minutes on 2 cores (about 5 minutes of CPU).",
)


def address(group: int) -> str:
    """Where metrics-server listens in the plane holding address `group`: the EndpointSlice's address."""
    return podnetwork.host_address(group, HOST_SLOT)


def service_dns_names() -> tuple[str, ...]:
    return (SERVICE, f"{SERVICE}.{NAMESPACE}", f"{SERVICE}.{NAMESPACE}.svc")


def issue_certificates(ca: CertificateAuthority, directory: Path, group: int) -> dict[str, KeyPair]:
    """Its serving certificate (the name the apiserver verifies, and its address in the plane's address
    `group`) and client identity."""
    folder = directory / "pki" / "metrics-server"
    folder.mkdir(parents=True, exist_ok=True)
    return {
        SERVING_STEM: ca.issue_serving(
            folder,
            SERVING_STEM,
            common_name=f"{SERVICE}.{NAMESPACE}.svc",
            dns_names=service_dns_names(),
            ip_addresses=(ipaddress.ip_address(address(group)),),
        ),
        IDENTITY.file_stem: ca.issue_client(folder, IDENTITY),
    }


def argv(
    binary: Path,
    *,
    kubeconfig: Path,
    pki: Mapping[str, KeyPair],
    ca_cert: Path | None,
    listen_address: str,
    port: int,
) -> list[str]:
    """`ca_cert`: the CA the nodes' serving certificates must verify against; None: not verified
    (`--kubelet-insecure-tls`), which a self-signed serving certificate needs."""
    serving, client = pki[SERVING_STEM], pki[IDENTITY.file_stem]
    verification = (
        f"--kubelet-certificate-authority={ca_cert}" if ca_cert is not None else "--kubelet-insecure-tls"
    )
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={listen_address}",
        f"--secure-port={port}",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        # The virtual nodes: their InternalIP and port, their serving certificates from the cluster CA.
        "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port",
        verification,
        f"--kubelet-client-certificate={client.cert}",
        f"--kubelet-client-key={client.key}",
        f"--metric-resolution={SCRAPE_SECONDS}s",
        # Must be below the resolution; the nodes are on this host and answer in milliseconds.
        f"--kubelet-request-timeout={SCRAPE_SECONDS // 2}s",
        "--v=1",
    ]


def manifests(*, ca_pem: bytes, listen_address: str, port: int) -> list[dict[str, Any]]:
    """Upstream's RBAC for its identity, the selector-less Service and its EndpointSlice, the APIService."""
    user = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": IDENTITY.user}
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:metrics-server"},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            # `kubectl top` for everyone who may view pods, as upstream's manifest grants it.
            "metadata": {
                "name": "system:aggregated-metrics-reader",
                "labels": {
                    "rbac.authorization.k8s.io/aggregate-to-admin": "true",
                    "rbac.authorization.k8s.io/aggregate-to-edit": "true",
                    "rbac.authorization.k8s.io/aggregate-to-view": "true",
                },
            },
            "rules": [
                {"apiGroups": [API_GROUP], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]}
            ],
        },
        _cluster_role_binding("system:metrics-server", "system:metrics-server", user),
        _cluster_role_binding("metrics-server:system:auth-delegator", "system:auth-delegator", user),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "metrics-server-auth-reader", "namespace": NAMESPACE},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "extension-apiserver-authentication-reader",
            },
            "subjects": [user],
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
            # No selector: the endpoint is the host process, published below.
            "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": SERVICE,
                "namespace": NAMESPACE,
                "labels": {
                    "kubernetes.io/service-name": SERVICE,
                    "endpointslice.kubernetes.io/managed-by": "vk-provider-dev",
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [listen_address], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": APISERVICE},
            "spec": {
                "group": API_GROUP,
                "version": API_VERSION,
                "service": {"name": SERVICE, "namespace": NAMESPACE, "port": 443},
                "caBundle": base64.b64encode(ca_pem).decode(),
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
    ]


def _cluster_role_binding(name: str, role: str, subject: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [dict(subject)],
    }


def write_manifests(directory: Path, objects: list[dict[str, Any]]) -> Path:
    """The objects as one List file, for `kubectl apply -f` (and for a person to read)."""
    path = directory / "metrics-server.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n")
    return path


def is_available(apiservice_json: str | None) -> bool:
    """Whether the APIService says the apiserver reaches metrics-server (condition Available)."""
    if not apiservice_json:
        return False
    conditions = json.loads(apiservice_json).get("status", {}).get("conditions", [])
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)
