"""`auto` on a plane like most managed ones: nobody approves kubelet-serving CSRs and the apiserver does
not verify kubelet certificates (no --kubelet-certificate-authority). The node serves its own
certificate after the bounded wait, says so, and `kubectl logs`, `exec` and `kubectl top` (through a
metrics-server run with --kubelet-insecure-tls) work. A client that verifies kubelet certificates (as
upstream's metrics-server does) refuses it, and the node tells that apart from the apiserver: its
check through the node proxy succeeded. Approving the CSR later switches it to the issued
certificate without a restart.

The module starts a plane of its own (the run's shared plane verifies kubelet certificates), so it
runs in the dev-cluster group, one plane at a time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from kubernetes_asyncio import client

from tests.integration import conftest as rigs
from tests.integration.conftest import DEV_CLUSTER_GROUP, Kubectl
from tests.integration.migration_rig import StartNode
from tests.integration.netns import NodeAddress
from tests.integration.servingcert import (
    csrs_of,
    delete_csrs_of,
    run_talker,
    served_certificate,
    wait_for_condition,
    wait_for_event,
)
from tests.integration.test_kubelet_api import node_address  # noqa: F401 - a fixture
from tests.integration.top import has_figures, top
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster, metricsserver
from vk_devtools.devcluster.building import DEFAULT_KUBERNETES_VERSION, BinaryCache
from vk_provider.kit.kube import KubeApi

pytestmark = [pytest.mark.integration, DEV_CLUSTER_GROUP]

WAIT_SECONDS = 3.0


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterState]:
    """A plane whose apiserver dials kubelets without verifying their certificates (the flag, given
    again empty, overrides the dev plane's)."""
    directory = tmp_path_factory.mktemp("unverifying-plane")
    settings = dataclasses.replace(
        rigs.test_plane_settings(directory, DEFAULT_KUBERNETES_VERSION),
        extra_args={"kube-apiserver": ("--kubelet-certificate-authority=",)},
        metrics_server_verifies_kubelets=False,
    )
    cache = BinaryCache.default()
    bin_dir = cache.ensure(wait=True, out=sys.stderr)
    metrics_server = BinaryCache.for_build(metricsserver.METRICS_SERVER).ensure(wait=True, out=sys.stderr)
    started = time.monotonic()
    result = cluster.up(
        settings,
        bin_dir=bin_dir,
        kubernetes_version=cache.pins.kubernetes_version,
        out=sys.stderr,
        metrics_server_bin_dir=metrics_server,
    )
    print(f"the unverifying plane started in {time.monotonic() - started:.1f}s", file=sys.stderr)
    rigs.create_system_namespace(result.state)
    try:
        yield result.state
    finally:
        cluster.down(directory)


def busy_pod(node: str) -> dict[str, Any]:
    """A pod that uses a little CPU every second, so metrics-server has a rate to show."""
    script = "while true; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 1; done"
    container = {"name": "c1", "image": "local", "command": ["sh", "-c", script]}
    return {"metadata": {"name": "busy"}, "spec": {"nodeName": node, "containers": [container]}}


def refuse_as_a_verifying_client(address: NodeAddress, ca_cert: Path) -> None:
    """One TLS handshake that verifies the node's certificate against `ca_cert` and fails. Blocking on
    purpose: a blocking socket sends the alert (as Go's crypto/tls does), asyncio's drops it."""
    verifying = ssl.create_default_context(cafile=str(ca_cert))
    with (
        socket.create_connection((address.bind_ip, address.port), timeout=10) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        verifying.wrap_socket(raw, server_hostname=address.node_ip)


@pytest.fixture(scope="module")
def kubectl(control_plane: cluster.ClusterState) -> Kubectl:
    """This module's plane's kubectl (the run's is bound to the shared plane)."""
    return rigs.kubectl_for(control_plane)


async def test_auto_serves_its_own_certificate_then_switches_to_the_approved_one(
    *,
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    kubectl: Kubectl,
    node_address: NodeAddress,  # noqa: F811 - the fixture imported above
    control_plane: cluster.ClusterState,
) -> None:
    core = client.CoreV1Api(kube_api)
    admin = KubeApi(kube_api)
    started = time.monotonic()
    daemon = await start_node(
        "local",
        **node_address.node_settings(),
        kubelet_csr_self_approve=False,
        serving_certificate_wait_seconds=WAIT_SECONDS,
    )
    node = daemon.node_name
    try:
        condition = await wait_for_condition(core, node, "SelfSigned")
        fell_back_after = time.monotonic() - started
        print(f"SelfSigned on the Node {fell_back_after:.1f}s after the daemon started", file=sys.stderr)
        [csr] = await csrs_of(admin, node)
        csr_name = csr["metadata"]["name"]
        assert condition.status == "True"
        assert csr_name in condition.message
        assert f"within {WAIT_SECONDS:g}s" in condition.message
        event = await wait_for_event(core, node, "ServingCertificateSelfSigned")
        assert event.type == "Warning"
        assert csr_name in event.message
        presented = await served_certificate(node_address.bind_ip, node_address.port)
        assert presented.issuer == presented.subject

        await run_talker(core, namespace, node)
        assert "line 5" in kubectl("logs", "-n", namespace, "talker").stdout
        exec_out = kubectl("exec", "-n", namespace, "talker", "--", "echo", "through-exec").stdout
        assert exec_out.strip() == "through-exec"
        summary = json.loads(kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/stats/summary").stdout)
        assert summary["node"]["nodeName"] == node
        # metrics-server leaves out a pod whose CPU counter has not moved: the talker only sleeps.
        await core.create_namespaced_pod(namespace, busy_pod(node))
        measuring = time.monotonic()

        async def busy_measured() -> tuple[str, str] | None:
            figures = top(control_plane, "pods", f"--namespace={namespace}").get("busy")
            return figures if figures is not None and has_figures(*figures) else None

        cpu, memory = await wait_for(busy_measured, timeout_seconds=120, what="`kubectl top pods` for busy")
        print(
            f"`kubectl top pods`: busy {cpu} {memory} {time.monotonic() - measuring:.1f}s after its creation",
            file=sys.stderr,
        )

        # A client that verifies kubelet certificates against the cluster CA, as upstream's
        # metrics-server does: the node's check through the apiserver says it is not the apiserver.
        await asyncio.to_thread(refuse_as_a_verifying_client, node_address, control_plane.ca_cert)
        other = await wait_for_condition(core, node, "RejectedByOtherClients")
        assert other.status == "True"
        assert "the apiserver accepts" in other.message
        assert "--kubelet-insecure-tls" in other.message
        assert "line 5" in kubectl("logs", "-n", namespace, "talker").stdout

        approved_at = time.monotonic()
        kubectl("certificate", "approve", csr_name)
        issued = await wait_for_condition(core, node, "Issued")
        print(f"Issued on the Node {time.monotonic() - approved_at:.1f}s after the approval", file=sys.stderr)
        assert issued.status == "True"
        assert csr_name in issued.message
        ca = x509.load_pem_x509_certificate(control_plane.ca_cert.read_bytes())

        async def switched() -> bool:
            presented = await served_certificate(node_address.bind_ip, node_address.port)
            return presented.issuer == ca.subject

        await wait_for(switched, timeout_seconds=10, what="the issued certificate on the kubelet port")
        assert "line 5" in kubectl("logs", "-n", namespace, "talker").stdout
        assert daemon.starts == 1  # no restart
    finally:
        await delete_csrs_of(admin, node)
