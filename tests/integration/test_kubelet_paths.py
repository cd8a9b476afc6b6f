"""The kubelet API's paths through the apiserver's node proxy, with and without a trailing slash as the
kubelet answers them; and a daemon whose kubelet port is taken stops at once and leaves nothing behind.

The node listens on an address of the dev pod network (routed to this host, and not loopback, which
the node proxy refuses), so no network namespace is needed."""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from tests.integration.conftest import Kubectl
from tests.integration.daemons import NodeDaemon
from tests.integration.migration_rig import StartNode, pod_range
from vk_devtools.devcluster import cluster, podnetwork
from vk_devtools.devcluster.ports import PortPicker

pytestmark = pytest.mark.integration


def routable_address() -> str:
    """The last address of a test /24 of the dev pod network: no pod of a test node is given it first."""
    podnetwork.ensure_local_route()
    return str(ipaddress.IPv4Network(pod_range())[-2])


async def proxied(plane: cluster.ClusterState, path: str) -> tuple[int, str, str]:
    """GET `path` through the apiserver as admin, redirects not followed: status, Location, body."""
    context = ssl.create_default_context(cafile=str(plane.ca_cert))
    pki = plane.directory / "pki"
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    async with (
        aiohttp.ClientSession() as session,
        session.get(plane.server + path, ssl=context, allow_redirects=False) as response,
    ):
        return response.status, response.headers.get("Location", ""), await response.text()


def pod_names(body: str) -> list[str]:
    items: list[dict[str, Any]] = json.loads(body)["items"]
    return sorted(item["metadata"]["name"] for item in items)


async def test_kubelet_paths_with_and_without_a_trailing_slash_through_the_node_proxy(
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    kubectl: Kubectl,
    control_plane: cluster.ClusterState,
) -> None:
    address = routable_address()
    daemon = await start_node(
        "mock", addresses=[address], kubelet_bind_address=address, kubelet_port=PortPicker().pick()
    )
    await client.CoreV1Api(kube_api).create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "app"},
            "spec": {
                "nodeName": daemon.node_name,
                "containers": [{"name": "c", "image": "busybox"}],
                "tolerations": [{"operator": "Exists"}],
            },
        },
    )
    proxy = f"/api/v1/nodes/{daemon.node_name}/proxy"

    # Served with and without the slash (go-restful's WebServices in the kubelet; `/metrics/resource/`
    # as virtual-kubelet serves it).
    for path in ("pods", "stats/summary", "metrics/resource"):
        plain = await proxied(control_plane, f"{proxy}/{path}")
        slashed = await proxied(control_plane, f"{proxy}/{path}/")
        assert plain[0] == slashed[0] == 200, (path, plain, slashed)
    pods = (await proxied(control_plane, f"{proxy}/pods/"))[2]
    assert "app" in pod_names(pods)
    summary = json.loads((await proxied(control_plane, f"{proxy}/stats/summary/"))[2])
    assert summary["node"]["nodeName"] == daemon.node_name

    # `/runningpods` is redirected to `/runningpods/`, the apiserver rewriting the Location into its
    # proxy path, so a client that follows it (kubectl does) lands on the node again.
    status, location, _ = await proxied(control_plane, f"{proxy}/runningpods?x=1")
    assert status == 307
    assert location.endswith(f"{proxy}/runningpods/?x=1"), location
    assert "app" in pod_names(kubectl("get", "--raw", f"{proxy}/runningpods").stdout)

    # Only without the slash, as the kubelet's ServeMux has them.
    assert (await proxied(control_plane, f"{proxy}/healthz"))[0] == 200
    assert (await proxied(control_plane, f"{proxy}/healthz/"))[0] == 404


async def test_a_daemon_on_a_taken_kubelet_port_exits_at_once_and_leaves_no_node_or_csr(
    kube_api: client.ApiClient, control_plane: cluster.ClusterState, tmp_path: Path
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        daemon = NodeDaemon(
            folder=tmp_path / "busy",
            provider="mock",
            kubeconfig=str(control_plane.kubeconfig),
            kubelet_port=port,
        )
        started = time.monotonic()
        daemon.start()
        try:
            assert daemon.process is not None
            assert daemon.process.wait(30) == 1
            took = time.monotonic() - started
        finally:
            daemon.close()
    log = daemon.log_tail()
    assert f"the kubelet API cannot listen on 127.0.0.1:{port}" in log
    assert "Address already in use" in log
    assert took < 15, f"the daemon took {took:.1f}s to give up"  # start-up of Python alone, no retries
    nodes = await client.CoreV1Api(kube_api).list_node()
    assert daemon.node_name not in [node.metadata.name for node in nodes.items]
    csrs = await client.CertificatesV1Api(kube_api).list_certificate_signing_request()
    assert not [csr for csr in csrs.items if csr.metadata.name.startswith(f"{daemon.node_name}-")]
    assert "created CSR" not in log
