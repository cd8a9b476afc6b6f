"""`auto` on a plane like most managed ones: nobody approves kubelet-serving CSRs and the apiserver does
not verify kubelet certificates (no --kubelet-certificate-authority). The node serves its own
certificate after the bounded wait, says so, and `kubectl logs`, `exec` and the stats behind `top`
work; approving the CSR later switches it to the issued certificate without a restart.

The module starts a plane of its own (the run's shared plane verifies kubelet certificates), so it
runs in the dev-cluster group, one plane at a time.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Iterator

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
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster
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
    )
    cache = BinaryCache.default()
    bin_dir = cache.ensure(wait=True, out=sys.stderr)
    started = time.monotonic()
    result = cluster.up(
        settings, bin_dir=bin_dir, kubernetes_version=cache.pins.kubernetes_version, out=sys.stderr
    )
    print(f"the unverifying plane started in {time.monotonic() - started:.1f}s", file=sys.stderr)
    try:
        yield result.state
    finally:
        cluster.down(directory)


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
        addresses=[node_address.node_ip],
        kubelet_bind_address=node_address.bind_ip,
        kubelet_port=node_address.port,
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
