"""Serving certificates on a plane whose apiserver verifies them (--kubelet-certificate-authority, as
the run's shared plane is started): a self-signed fallback cannot work there and the node says so,
naming the fix; `csr` with self-approval works."""

from __future__ import annotations

import sys
import time

import pytest
from kubernetes_asyncio import client

from tests.integration.conftest import Kubectl
from tests.integration.migration_rig import StartNode
from tests.integration.netns import NodeAddress
from tests.integration.servingcert import delete_csrs_of, run_talker, wait_for_condition, wait_for_event
from tests.integration.test_kubelet_api import node_address  # noqa: F401 - a fixture
from vk_provider.kit.kube import KubeApi

pytestmark = pytest.mark.integration


async def test_a_self_signed_fallback_refused_by_the_apiserver_is_reported_with_the_fix(
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    kubectl: Kubectl,
    node_address: NodeAddress,  # noqa: F811 - the fixture imported above
) -> None:
    """Found by the node's own check through the apiserver's node proxy (which needs a routable node
    address), before anyone runs `kubectl logs`; the condition quotes the apiserver's words."""
    core = client.CoreV1Api(kube_api)
    started = time.monotonic()
    daemon = await start_node(
        "local",
        **node_address.node_settings(),
        kubelet_csr_self_approve=False,
        serving_certificate_wait_seconds=2,
    )
    node = daemon.node_name
    try:
        condition = await wait_for_condition(core, node, "RejectedByClients", timeout_seconds=60)
        print(
            f"RejectedByClients {time.monotonic() - started:.1f}s after the daemon started", file=sys.stderr
        )
        assert condition.status == "False"
        assert "the apiserver refuses" in condition.message
        assert "x509" in condition.message  # the apiserver's own words
        assert "--kubelet-certificate-authority" in condition.message
        assert "serving_certificate csr" in condition.message
        assert "file" in condition.message
        event = await wait_for_event(core, node, "ServingCertificateRejectedByClients")
        assert event.type == "Warning"

        await run_talker(core, namespace, node)
        logs = kubectl("logs", "-n", namespace, "talker", check=False)
        assert logs.returncode != 0
        assert "x509" in logs.stderr or "certificate" in logs.stderr, logs.stderr
    finally:
        await delete_csrs_of(KubeApi(kube_api), node)


async def test_csr_with_self_approval_serves_the_issued_certificate_and_logs_work(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, kubectl: Kubectl
) -> None:
    core = client.CoreV1Api(kube_api)
    daemon = await start_node("local", serving_certificate="csr", kubelet_csr_self_approve=True)
    node = daemon.node_name
    try:
        condition = await wait_for_condition(core, node, "Issued")
        assert condition.status == "True"
        assert f"{node}-serving-" in condition.message
        await run_talker(core, namespace, node)
        assert "line 5" in kubectl("logs", "-n", namespace, "talker").stdout
    finally:
        await delete_csrs_of(KubeApi(kube_api), node)
