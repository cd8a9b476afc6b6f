"""`vk-provider dev up --in-cluster`: the node daemon, router and controller as Pods from the real manifests.

One development plane for the module: its home node runs vk-provider's own Pods (`manifests/base`,
`manifests/traffic`), each talking to the apiserver with the ServiceAccount token the node projected
into it. The tests read what a user would: the Pods, their logs, the Lease, the Node the daemon Pod
registered, the certificate request it made; then the demo through the router Pods, and the node
daemon's Pod deleted under a migrated service.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import IN_CLUSTER_GROUP
from tests.integration.daemons import processes_with_argument
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings, failures
from vk_devtools.devcluster import cluster, incluster, localnode, processes, traffic
from vk_provider.kit import procfs

pytestmark = IN_CLUSTER_GROUP

NAMESPACE = incluster.NAMESPACE
SERVICE_ACCOUNTS = {
    incluster.NODE_DEPLOYMENT: "vk-provider-node",
    incluster.ROUTER_DEPLOYMENT: "vk-provider-router",
    incluster.CONTROLLER_DEPLOYMENT: "vk-provider-controller",
}
LOG_LINES = {
    incluster.NODE_DEPLOYMENT: "leader lease",
    incluster.ROUTER_DEPLOYMENT: "router serving on",
    incluster.CONTROLLER_DEPLOYMENT: "leader lease",
}
"""A word each component's log has from its start: `kubectl logs` reads the Pod's own output."""
BURST = localnode.AWAY.name
LEASE = f"vk-provider-node-{BURST}"
TIMEOUT_SECONDS = 180


def vk_provider(*arguments: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vk_provider", *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterState]:
    directory = tmp_path_factory.mktemp("in-cluster") / "plane"
    up = vk_provider("dev", "up", "--in-cluster", "--any-free-ports", "--dir", str(directory))
    state = cluster.ClusterState.load(directory)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert state is not None
        assert state.in_cluster
        print(up.stderr)
        yield state
    finally:
        down = vk_provider("dev", "down", "--dir", str(directory))
        assert down.returncode == 0, down.stderr
        if state is not None:
            assert not any(processes.is_running(record) for record in state.processes)
        # The Pods' processes and the workloads the node daemon's Pod started went with the nodes.
        assert procfs.processes_with_environment(cluster.DEV_CLUSTER_MARK, str(directory)) == []


def kubectl(state: cluster.ClusterState, *arguments: str) -> str:
    done = subprocess.run(
        [str(state.bin_dir / "kubectl"), f"--kubeconfig={state.kubeconfig}", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"kubectl {' '.join(arguments)}: {done.stderr}"
    return done.stdout


def get(state: cluster.ClusterState, *arguments: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(kubectl(state, "get", *arguments, "-o", "json"))
    return loaded


def stack_pods(state: cluster.ClusterState, deployment: str) -> list[dict[str, Any]]:
    listed = get(state, "pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={deployment}")
    return [pod for pod in listed["items"] if pod["metadata"].get("deletionTimestamp") is None]


def is_ready(item: dict[str, Any]) -> bool:
    conditions = item.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def lease_holder(state: cluster.ClusterState) -> str:
    holder: str = get(state, "lease", LEASE, "-n", NAMESPACE)["spec"].get("holderIdentity") or ""
    return holder


def pod_of_identity(pods: list[dict[str, Any]], identity: str) -> dict[str, Any] | None:
    """The Pod whose daemon holds `identity`: the manifests give it the Pod's name (so a restarted
    container takes its Lease back at once); a daemon left to its default uses its host name, the
    Pod's name, then `_` and a suffix."""
    return next(
        (
            pod
            for pod in pods
            if identity == pod["metadata"]["name"] or identity.startswith(pod["metadata"]["name"] + "_")
        ),
        None,
    )


def test_the_stack_runs_as_pods_of_the_home_node_under_its_own_service_accounts(
    stack: cluster.ClusterState,
) -> None:
    for deployment, account in SERVICE_ACCOUNTS.items():
        pods = stack_pods(stack, deployment)
        assert len(pods) == 2, [pod["metadata"]["name"] for pod in pods]
        for pod in pods:
            name = pod["metadata"]["name"]
            assert pod["status"]["phase"] == "Running", name
            assert pod["spec"]["nodeName"] == localnode.HOME.name
            assert pod["spec"]["serviceAccountName"] == account
            projected = [volume["projected"] for volume in pod["spec"]["volumes"] if "projected" in volume]
            assert any(
                "serviceAccountToken" in source for volume in projected for source in volume["sources"]
            ), name
            logs = kubectl(stack, "logs", "-n", NAMESPACE, name)
            assert LOG_LINES[deployment] in logs.lower(), f"{name}: {logs[-2000:]}"
    # The virtual node is the one the leading daemon Pod registered, at that Pod's address.
    node_pods = stack_pods(stack, incluster.NODE_DEPLOYMENT)
    leader = pod_of_identity(node_pods, lease_holder(stack))
    assert leader is not None, (lease_holder(stack), [pod["metadata"]["name"] for pod in node_pods])
    node = get(stack, "node", BURST)
    assert is_ready(node)
    internal = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
    assert internal == [leader["status"]["podIP"]]
    # It authenticated as its ServiceAccount: the serving certificate request names it.
    requests = get(stack, "certificatesigningrequests")["items"]
    requesters = {
        request["spec"]["username"]
        for request in requests
        if request["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
        and any(c["type"] == "Approved" for c in request.get("status", {}).get("conditions") or [])
    }
    assert f"system:serviceaccount:{NAMESPACE}:vk-provider-node" in requesters, requesters
    # The apiserver reaches the kubelet API the Pod serves, and trusts its certificate.
    healthz = kubectl(stack, "get", "--raw", f"/api/v1/nodes/{BURST}/proxy/healthz")
    assert healthz.strip() == "ok"


def test_the_demo_runs_through_the_router_pods_with_no_failed_request(stack: cluster.ClusterState) -> None:
    urls = stack.traffic_urls()
    assert len(urls) == 2
    demo = vk_provider("dev", "demo", "--dir", str(stack.directory))
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert " and ".join(urls) in demo.stdout
    assert re.search(r"failed 0 \(none\)", demo.stdout), demo.stdout


def away_pods(state: cluster.ClusterState) -> dict[str, dict[str, Any]]:
    listed = get(
        state, "pods", "-n", "default", "-l", f"offload.vk-provider.dev/offload={traffic.EXAMPLE_NAME}"
    )
    return {
        pod["metadata"]["uid"]: pod
        for pod in listed["items"]
        if pod["spec"].get("nodeName") == BURST and pod["metadata"].get("deletionTimestamp") is None
    }


def server_processes(pod_name: str) -> list[int]:
    """The token server processes of one away pod (each names its pod: `--name=<node>/<pod>`)."""
    return sorted(processes_with_argument(f"--name={BURST}/{pod_name}"))


def started_at(pod: dict[str, Any]) -> list[str]:
    return [status["state"]["running"]["startedAt"] for status in pod["status"]["containerStatuses"]]


async def test_deleting_the_node_daemon_pod_keeps_the_node_and_its_pods(stack: cluster.ClusterState) -> None:
    flip = vk_provider(
        "migrate",
        "flip",
        traffic.EXAMPLE_NAME,
        "--to",
        "away",
        "--wait",
        "--kubeconfig",
        str(stack.kubeconfig),
    )
    assert flip.returncode == 0, flip.stdout + flip.stderr
    before = away_pods(stack)
    assert len(before) == 2
    assert all(is_ready(pod) for pod in before.values())
    servers = {uid: server_processes(pod["metadata"]["name"]) for uid, pod in before.items()}
    assert all(len(pids) == 1 for pids in servers.values()), servers

    node_pods = stack_pods(stack, incluster.NODE_DEPLOYMENT)
    old_holder = lease_holder(stack)
    leader = pod_of_identity(node_pods, old_holder)
    assert leader is not None
    leader_name = leader["metadata"]["name"]

    not_ready: list[str] = []
    watching = True

    async def watch_node() -> None:
        while watching:
            node = await asyncio.to_thread(get, stack, "node", BURST)
            if not is_ready(node):
                not_ready.append(json.dumps(node["status"]["conditions"]))
            await asyncio.sleep(0.5)  # the watch's sampling period (noqa: sleep-ok)

    urls = stack.traffic_urls()
    load = LoadGenerator(
        LoadSettings(url=urls[0], more_urls=tuple(urls[1:]), host_header=traffic.EXAMPLE_HOST, rate=20)
    )
    await load.start()
    watcher = asyncio.create_task(watch_node())
    try:
        deleted_at = time.monotonic()
        # kubectl runs in threads from here on: the load generator shares this event loop.
        await asyncio.to_thread(kubectl, stack, "delete", "pod", "-n", NAMESPACE, leader_name, "--wait=false")

        def taken_over() -> str:
            holder = lease_holder(stack)
            return holder if holder and holder != old_holder else ""

        new_holder = await wait_for(
            lambda: asyncio.to_thread(taken_over),
            timeout_seconds=TIMEOUT_SECONDS,
            what="another daemon to lead",
        )
        print(f"the standby led {time.monotonic() - deleted_at:.1f}s after the leader's Pod was deleted")
        assert not new_holder.startswith(leader_name + "_")

        def replaced() -> bool:
            pods = stack_pods(stack, incluster.NODE_DEPLOYMENT)
            names = {pod["metadata"]["name"] for pod in pods}
            return (
                leader_name not in names
                and len(pods) == 2
                and all(pod["status"].get("phase") == "Running" for pod in pods)
            )

        await wait_for(
            lambda: asyncio.to_thread(replaced),
            timeout_seconds=TIMEOUT_SECONDS,
            what="the Deployment to replace the Pod",
        )

        def converged() -> bool:
            node = get(stack, "node", BURST)
            address = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
            holder_pod = pod_of_identity(stack_pods(stack, incluster.NODE_DEPLOYMENT), lease_holder(stack))
            return holder_pod is not None and address == [holder_pod["status"]["podIP"]]

        await wait_for(
            lambda: asyncio.to_thread(converged),
            timeout_seconds=TIMEOUT_SECONDS,
            what="the node to name its new daemon",
        )
    finally:
        watching = False
        await watcher
        await load.stop()
    # The away pods served all along, through the router Pods.
    assert load.outcomes
    print(f"{len(load.outcomes)} requests through the router Pods while the daemon's Pod was replaced")
    assert failures(load.outcomes) == [], failures(load.outcomes)[:5]
    assert not_ready == [], not_ready  # the Node never went NotReady or Unknown: nothing was evicted
    after = away_pods(stack)
    assert after.keys() == before.keys()  # adopted, not recreated
    for uid, pod in after.items():
        assert is_ready(pod)
        assert started_at(pod) == started_at(before[uid])  # not restarted
        assert server_processes(pod["metadata"]["name"]) == servers[uid]  # nothing duplicated
    back = vk_provider(
        "migrate",
        "flip",
        traffic.EXAMPLE_NAME,
        "--to",
        "home",
        "--wait",
        "--kubeconfig",
        str(stack.kubeconfig),
    )
    assert back.returncode == 0, back.stdout + back.stderr
