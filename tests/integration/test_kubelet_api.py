"""The node's kubelet API on the real plane: through the apiserver, and directly with each kind of client."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client

from tests.integration.conftest import Kubectl
from tests.integration.daemons import NodeDaemon
from tests.integration.netns import NodeAddress, routable_node_address, unavailable_reason
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster
from vk_devtools.devcluster.pki import CertificateAuthority, ClientIdentity
from vk_devtools.devcluster.ports import PortPicker

StartNode = Callable[..., Awaitable[NodeDaemon]]
TALKER_SCRIPT = 'for i in $(seq 1 20); do echo "line $i from $0"; done; exec sleep 3600'


def talker_pod(node: str) -> dict[str, Any]:
    containers = [
        {"name": name, "image": "local", "command": ["sh", "-c", TALKER_SCRIPT, name]}
        for name in ("c1", "c2", "c3")
    ]
    return {"metadata": {"name": "talker"}, "spec": {"nodeName": node, "containers": containers}}


@pytest.fixture
async def talker(start_node: StartNode, kube_api: client.ApiClient, namespace: str) -> tuple[NodeDaemon, str]:
    daemon = await start_node("local")
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod(namespace, talker_pod(daemon.node_name))

    async def logged() -> bool:
        pod = await core.read_namespaced_pod("talker", namespace)
        if pod.status.phase != "Running":
            return False
        text = await core.read_namespaced_pod_log("talker", namespace, container="c3")
        return "line 20 from c3" in text

    await wait_for(logged, timeout_seconds=60, what="the talker's output")
    return daemon, namespace


def kubelet_url(daemon: NodeDaemon, path: str) -> str:
    config = yaml.safe_load(daemon.config_path.read_text())
    return f"https://127.0.0.1:{config['kubelet_port']}{path}"


def tls_context(
    plane: cluster.ClusterState, *, client_cert: tuple[Path, Path] | None = None
) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(plane.ca_cert))
    context.check_hostname = False  # the serving certificate names the node's IPs; we dial 127.0.0.1 too
    if client_cert is not None:
        context.load_cert_chain(*map(str, client_cert))
    return context


def admin_cert(plane: cluster.ClusterState) -> tuple[Path, Path]:
    return plane.directory / "pki" / "admin.crt", plane.directory / "pki" / "admin.key"


async def get(url: str, context: ssl.SSLContext, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as session, session.get(url, ssl=context, headers=headers) as response:
        return response.status, await response.read()


# -- through the apiserver, as users do ------------------------------------------------------------


def test_kubectl_logs_shows_the_processes_real_output(
    talker: tuple[NodeDaemon, str], kubectl: Kubectl
) -> None:
    _, namespace = talker
    full = kubectl("logs", "talker", "-c", "c1", "-n", namespace).stdout.splitlines()
    assert full == [f"line {i} from c1" for i in range(1, 21)]
    tail = kubectl("logs", "talker", "-c", "c2", "-n", namespace, "--tail=3").stdout.splitlines()
    assert tail == ["line 18 from c2", "line 19 from c2", "line 20 from c2"]
    recent = kubectl("logs", "talker", "-c", "c3", "-n", namespace, "--since=10m").stdout.splitlines()
    assert recent[-1] == "line 20 from c3"
    assert kubectl("logs", "talker", "-c", "c3", "-n", namespace, "--since=10s", check=False).returncode == 0


async def test_kubectl_logs_follow_streams_new_output(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, control_plane: cluster.ClusterState
) -> None:
    daemon = await start_node("local")
    script = 'i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 0.2; done'
    pod = {
        "metadata": {"name": "ticker"},
        "spec": {
            "nodeName": daemon.node_name,
            "containers": [{"name": "main", "image": "local", "command": ["sh", "-c", script]}],
        },
    }
    await client.CoreV1Api(kube_api).create_namespaced_pod(namespace, pod)
    kubectl = [str(control_plane.bin_dir / "kubectl"), f"--kubeconfig={control_plane.kubeconfig}"]

    async def first_ticks() -> list[str]:
        follower = await asyncio.create_subprocess_exec(
            *kubectl, "logs", "-f", "ticker", "-n", namespace, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            assert follower.stdout is not None
            return [
                (await asyncio.wait_for(follower.stdout.readline(), 30)).decode().strip() for _ in range(5)
            ]
        finally:
            follower.terminate()
            await follower.wait()

    async def streaming() -> list[str]:
        lines = await first_ticks()
        return lines if lines[-1] else []

    lines = await wait_for(streaming, timeout_seconds=60, what="kubectl logs -f to stream")
    numbers = [int(line.split()[1]) for line in lines]
    assert numbers == list(range(numbers[0], numbers[0] + 5))  # consecutive, as they were written


async def test_stats_and_resource_metrics_have_one_entry_per_container(
    talker: tuple[NodeDaemon, str], control_plane: cluster.ClusterState
) -> None:
    # Read directly with the admin client certificate: the apiserver's node proxy refuses loopback
    # node addresses ("address not allowed"), and every node of the test plane lives on 127.0.0.1.
    daemon, namespace = talker
    context = tls_context(control_plane, client_cert=admin_cert(control_plane))
    status, body = await get(kubelet_url(daemon, "/stats/summary"), context)
    assert status == 200
    summary = json.loads(body)
    assert summary["node"]["nodeName"] == daemon.node_name
    (pod,) = [p for p in summary["pods"] if p["podRef"]["namespace"] == namespace]
    assert pod["podRef"]["name"] == "talker"
    assert sorted(c["name"] for c in pod["containers"]) == ["c1", "c2", "c3"]
    for container in pod["containers"]:
        assert container["memory"]["workingSetBytes"] > 0
    status, body = await get(kubelet_url(daemon, "/metrics/resource"), context)
    assert status == 200
    prefix = f'container_memory_working_set_bytes{{namespace="{namespace}",pod="talker",container="c'
    assert len([line for line in body.decode().splitlines() if line.startswith(prefix)]) == 3


# -- directly at the kubelet port: authentication and authorization -------------------------------


async def test_a_request_without_credentials_is_unauthorized(
    talker: tuple[NodeDaemon, str], control_plane: cluster.ClusterState
) -> None:
    daemon, namespace = talker
    status, _ = await get(
        kubelet_url(daemon, f"/containerLogs/{namespace}/talker/c1"), tls_context(control_plane)
    )
    assert status == 401


async def test_a_service_account_needs_nodes_log_to_read_logs(
    talker: tuple[NodeDaemon, str], control_plane: cluster.ClusterState, kube_api: client.ApiClient
) -> None:
    daemon, namespace = talker
    core = client.CoreV1Api(kube_api)
    rbac = client.RbacAuthorizationV1Api(kube_api)
    await core.create_namespaced_service_account(namespace, {"metadata": {"name": "reader"}})
    token = (
        await core.create_namespaced_service_account_token("reader", namespace, {"spec": {}})
    ).status.token
    url = kubelet_url(daemon, f"/containerLogs/{namespace}/talker/c1?tailLines=1")
    headers = {"Authorization": f"Bearer {token}"}
    status, body = await get(url, tls_context(control_plane), headers)
    assert status == 403
    assert b"subresource=log" in body
    role = f"{namespace}-node-log-reader"
    await rbac.create_cluster_role(
        {
            "metadata": {"name": role},
            "rules": [{"apiGroups": [""], "resources": ["nodes/log"], "verbs": ["get"]}],
        }
    )
    await rbac.create_cluster_role_binding(
        {
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        }
    )
    try:

        async def allowed() -> bool:
            # The denial is cached for 30 s, as the kubelet does; a fresh token is a fresh question.
            fresh = (
                await core.create_namespaced_service_account_token("reader", namespace, {"spec": {}})
            ).status.token
            status, body = await get(url, tls_context(control_plane), {"Authorization": f"Bearer {fresh}"})
            return status == 200 and body == b"line 20 from c1\n"

        await wait_for(allowed, timeout_seconds=60, what="nodes/log to allow the log read")
    finally:
        await rbac.delete_cluster_role_binding(role)
        await rbac.delete_cluster_role(role)


async def test_a_client_certificate_from_another_ca_is_refused(
    talker: tuple[NodeDaemon, str], control_plane: cluster.ClusterState, tmp_path: Path
) -> None:
    daemon, namespace = talker
    foreign = CertificateAuthority.create(tmp_path / "foreign", common_name="someone-else")
    pair = foreign.issue_client(
        tmp_path / "foreign", ClientIdentity("intruder", "system:admin", ("system:masters",))
    )
    context = tls_context(control_plane, client_cert=(pair.cert, pair.key))
    url = kubelet_url(daemon, f"/containerLogs/{namespace}/talker/c1")
    # Python's TLS cannot request a certificate without verifying it, so the refusal comes as a failed
    # handshake (unknown CA) rather than the kubelet's HTTP 401: stricter, and never authenticated.
    with pytest.raises(aiohttp.ClientError):
        await get(url, context)


async def test_tls_below_1_2_is_refused(
    talker: tuple[NodeDaemon, str], control_plane: cluster.ClusterState
) -> None:
    daemon, _ = talker
    context = tls_context(control_plane)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # asking for TLS 1.1 is the point
        context.minimum_version = ssl.TLSVersion.TLSv1_1
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.raises(aiohttp.ClientError):
        await get(kubelet_url(daemon, "/healthz"), context)
    status, body = await get(
        kubelet_url(daemon, "/healthz"), tls_context(control_plane, client_cert=admin_cert(control_plane))
    )
    assert (status, body) == (200, b"ok")


# -- logs: exact bytes, big files, closed streams, running pods ------------------------------------


async def test_invalid_utf8_and_very_long_lines_pass_through_intact(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, control_plane: cluster.ClusterState
) -> None:
    daemon = await start_node("local")
    core = client.CoreV1Api(kube_api)
    script = (
        "printf 'bad \\377\\376 bytes\\n'; head -c 200000 /dev/zero | tr '\\0' 'y'; "
        "printf '\\nend\\n'; exec sleep 3600"
    )
    pod = {
        "metadata": {"name": "odd"},
        "spec": {
            "nodeName": daemon.node_name,
            "containers": [{"name": "main", "image": "local", "command": ["sh", "-c", script]}],
        },
    }
    await core.create_namespaced_pod(namespace, pod)
    context = tls_context(control_plane, client_cert=admin_cert(control_plane))
    url = kubelet_url(daemon, f"/containerLogs/{namespace}/odd/main")
    expected = b"bad \xff\xfe bytes\n" + b"y" * 200_000 + b"\nend\n"

    async def complete() -> bool:
        status, body = await get(url, context)
        return status == 200 and body == expected

    await wait_for(complete, timeout_seconds=60, what="the exact bytes back")


async def test_a_gigabyte_log_with_limit_bytes_returns_exactly_1024_bytes_quickly(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, control_plane: cluster.ClusterState
) -> None:
    daemon = await start_node("local")
    core = client.CoreV1Api(kube_api)
    script = "head -c 1073741824 /dev/zero | tr '\\0' 'z'"
    pod = {
        "metadata": {"name": "flood"},
        "spec": {
            "nodeName": daemon.node_name,
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "local", "command": ["sh", "-c", script]}],
        },
    }
    await core.create_namespaced_pod(namespace, pod)

    async def finished() -> bool:
        return (await core.read_namespaced_pod("flood", namespace)).status.phase == "Succeeded"

    await wait_for(finished, timeout_seconds=300, what="1 GiB of output to be written")
    assert daemon.process is not None
    rss_before = _rss_bytes(daemon.process.pid)
    context = tls_context(control_plane, client_cert=admin_cert(control_plane))
    started = time.monotonic()
    status, body = await get(
        kubelet_url(daemon, f"/containerLogs/{namespace}/flood/main?limitBytes=1024"), context
    )
    elapsed = time.monotonic() - started
    assert status == 200
    assert body == b"z" * 1024
    assert elapsed < 5  # generous: reading the head of the file, not the gigabyte behind it
    assert _rss_bytes(daemon.process.pid) - rss_before < 64 * 2**20


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_a_follow_stream_closed_by_the_client_frees_its_file_handles(
    talker: tuple[NodeDaemon, str], control_plane: cluster.ClusterState
) -> None:
    daemon, namespace = talker
    assert daemon.process is not None
    fds = Path(f"/proc/{daemon.process.pid}/fd")
    context = tls_context(control_plane, client_cert=admin_cert(control_plane))

    def log_files_open() -> int:
        return sum(1 for fd in fds.iterdir() if _points_at_a_log(fd))

    baseline = log_files_open()
    async with aiohttp.ClientSession() as session:
        response = await session.get(
            kubelet_url(daemon, f"/containerLogs/{namespace}/talker/c1?follow=true"), ssl=context
        )
        assert response.status == 200
        assert (await response.content.readline()).startswith(b"line 1 from c1")
        assert log_files_open() > baseline
        response.close()

    async def released() -> bool:
        return log_files_open() == baseline

    await wait_for(released, timeout_seconds=30, what="the follow stream's file handles to be released")


def _points_at_a_log(fd: Path) -> bool:
    try:
        return fd.readlink().suffix == ".log"
    except OSError:
        return False


async def test_a_deleted_pod_leaves_running_pods_within_a_second(
    talker: tuple[NodeDaemon, str], control_plane: cluster.ClusterState, kube_api: client.ApiClient
) -> None:
    daemon, namespace = talker
    context = tls_context(control_plane, client_cert=admin_cert(control_plane))
    url = kubelet_url(daemon, "/runningpods/")

    async def talker_listed() -> bool:
        status, body = await get(url, context)
        return status == 200 and any(
            item["metadata"]["name"] == "talker" for item in json.loads(body)["items"]
        )

    assert await talker_listed()
    await client.CoreV1Api(kube_api).delete_namespaced_pod("talker", namespace, grace_period_seconds=0)
    deleted_at = time.monotonic()

    async def gone() -> bool:
        return not await talker_listed()

    await wait_for(gone, timeout_seconds=30, what="the pod to leave /runningpods/")
    assert time.monotonic() - deleted_at < 1.0


@pytest.fixture
def node_address() -> Iterator[NodeAddress]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"the node proxy needs a routable node address in a network namespace: {reason}")
    with routable_node_address(PortPicker().pick()) as address:
        yield address


async def test_stats_metrics_and_logs_through_the_apiservers_node_proxy(
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    kubectl: Kubectl,
    node_address: NodeAddress,
) -> None:
    """The path metrics-server and `kubectl get --raw .../proxy/...` take: apiserver -> node, verified TLS."""
    daemon = await start_node(
        "local",
        **node_address.node_settings(),
    )
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod(namespace, talker_pod(daemon.node_name))
    proxy = f"/api/v1/nodes/{daemon.node_name}/proxy"

    async def three_containers_in_summary() -> dict[str, Any]:
        # Each "not yet" raises, so that a timeout shows the last reason (wait_for keeps the last error).
        result = kubectl("get", "--raw", f"{proxy}/stats/summary", check=False)
        if result.returncode != 0:
            raise AssertionError(f"kubectl get --raw exited {result.returncode}: {result.stderr.strip()}")
        pods = [p for p in json.loads(result.stdout)["pods"] if p["podRef"]["namespace"] == namespace]
        if not pods or len(pods[0]["containers"]) != 3:
            raise AssertionError(f"not three containers in the summary yet: {pods}")
        return pods[0]

    pod = await wait_for(
        three_containers_in_summary, timeout_seconds=60, what="the summary through the proxy"
    )
    assert pod["podRef"]["name"] == "talker"
    metrics = kubectl("get", "--raw", f"{proxy}/metrics/resource").stdout
    prefix = f'container_cpu_usage_seconds_total{{namespace="{namespace}",pod="talker",container="c'
    assert len([line for line in metrics.splitlines() if line.startswith(prefix)]) == 3
    assert kubectl("get", "--raw", f"{proxy}/healthz").stdout == "ok"
    logs = kubectl("get", "--raw", f"{proxy}/containerLogs/{namespace}/talker/c2?tailLines=1").stdout
    assert logs == "line 20 from c2\n"
