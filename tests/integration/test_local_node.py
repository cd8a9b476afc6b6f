"""A `local` virtual node on the real plane: real processes, their deletion, and crashes of the daemon."""

from __future__ import annotations

import asyncio
import random
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client

from tests.integration.daemons import NodeDaemon, processes_with_argument
from tests.integration.nodes import TOLERATE_ALL
from tests.integration.test_virtual_node import deployment
from tests.integration.waiting import wait_for
from vk_provider.offload.names import OFFLOAD_LABEL

StartNode = Callable[..., Awaitable[NodeDaemon]]
LOCAL_SETTINGS: dict[str, Any] = {
    "provider_config": {"restart_backoff_initial_seconds": 0.5, "restart_backoff_max_seconds": 2},
}


def sleeper(name: str, node: str, seconds: str, **spec: Any) -> dict[str, Any]:
    """A pod whose process is `sleep <seconds>`: a unique duration tags its process for the test."""
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "tolerations": TOLERATE_ALL,
            "terminationGracePeriodSeconds": 10,
            "containers": [{"name": "main", "image": "local", "command": ["sleep", seconds]}],
            **spec,
        },
    }


def fetch(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a test server on loopback
        return response.status, response.read().decode()


async def test_a_deployment_runs_on_the_local_provider_and_answers_on_the_pod_address(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("local", **LOCAL_SETTINGS)
    apps = client.AppsV1Api(kube_api)
    core = client.CoreV1Api(kube_api)
    server = {
        "command": ["python3", "-m", "http.server", "--bind", "$(MY_IP)", "8080"],
        "env": [{"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
    }
    web = deployment("web", daemon.node_name, replicas=2, **server)
    # An Offload's away pods: the node publishes a traffic address only for those.
    web["spec"]["template"]["metadata"]["labels"][OFFLOAD_LABEL] = "web"
    await apps.create_namespaced_deployment(namespace, web)

    async def available() -> bool:
        current = await apps.read_namespaced_deployment("web", namespace)
        return bool(current.status.available_replicas == 2)

    await wait_for(available, timeout_seconds=90, what="2 available replicas")
    pods = (await core.list_namespaced_pod(namespace, label_selector="app=web")).items
    addresses = {pod.status.pod_ip for pod in pods}
    assert len(addresses) == 2
    for pod in pods:
        assert pod.status.pod_ip.startswith("127.")
        published = {c.type: c.message for c in pod.status.conditions}
        assert published["vk-provider.dev/TrafficAddress"] == f"http://{pod.status.pod_ip}:8080"
        status, body = await asyncio.to_thread(fetch, f"http://{pod.status.pod_ip}:8080/")
        assert status == 200
        assert "Directory listing" in body


async def test_graceful_delete_stops_the_process_and_removes_the_pod(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("local", **LOCAL_SETTINGS)
    core = client.CoreV1Api(kube_api)
    tag = f"36{random.randrange(10**6):06d}.5"  # noqa: S311 - a tag, not a secret
    await core.create_namespaced_pod(namespace, sleeper("calm", daemon.node_name, tag))

    async def running() -> bool:
        phase = (await core.read_namespaced_pod("calm", namespace)).status.phase
        return phase == "Running" and len(processes_with_argument(tag)) == 1

    await wait_for(running, timeout_seconds=60, what="the pod and its process to run")
    await core.delete_namespaced_pod("calm", namespace)

    async def gone() -> bool:
        listing = await core.list_namespaced_pod(namespace, field_selector="metadata.name=calm")
        return not listing.items and not processes_with_argument(tag)

    # sleep dies of SIGTERM at once, so this is well inside the 10 s grace period.
    await wait_for(gone, timeout_seconds=30, what="the pod object and its process to be gone")


async def test_force_delete_removes_the_workload_at_the_provider(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("local", **LOCAL_SETTINGS)
    core = client.CoreV1Api(kube_api)
    tag = f"37{random.randrange(10**6):06d}.5"  # noqa: S311 - a tag, not a secret
    await core.create_namespaced_pod(namespace, sleeper("doomed", daemon.node_name, tag))

    async def running() -> bool:
        return len(processes_with_argument(tag)) == 1

    await wait_for(running, timeout_seconds=60, what="the process to run")
    await core.delete_namespaced_pod("doomed", namespace, grace_period_seconds=0)
    assert not (await core.list_namespaced_pod(namespace, field_selector="metadata.name=doomed")).items

    async def process_gone() -> bool:
        return not processes_with_argument(tag)

    await wait_for(
        process_gone, timeout_seconds=30, what="the provider to stop the force-deleted pod's process"
    )


async def test_kill_9_of_the_daemon_amid_creates_and_deletes_converges_without_duplicates_or_leftovers(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("local", **LOCAL_SETTINGS)
    core = client.CoreV1Api(kube_api)
    count = 50
    tags = {f"pod-{index:02d}": f"38{random.randrange(10**4):04d}{index:02d}.5" for index in range(count)}  # noqa: S311
    doomed = {name for index, name in enumerate(sorted(tags)) if index % 3 == 0}
    creator_semaphore = asyncio.Semaphore(10)

    async def create_then_maybe_delete(name: str) -> None:
        async with creator_semaphore:
            await core.create_namespaced_pod(namespace, sleeper(name, daemon.node_name, tags[name]))
            if name in doomed:
                await core.delete_namespaced_pod(name, namespace, grace_period_seconds=5)

    churn = asyncio.gather(*(create_then_maybe_delete(name) for name in sorted(tags)))

    async def some_pods_running() -> bool:
        pods = (await core.list_namespaced_pod(namespace)).items
        return sum(1 for pod in pods if pod.status.phase == "Running") >= 5

    await wait_for(some_pods_running, timeout_seconds=60, what="the first pods to run")
    daemon.kill()  # mid-churn: some pods created, some not yet, some deletions in flight
    await churn
    daemon.start()

    survivors = sorted(set(tags) - doomed)

    lagging: list[str] = []

    async def converged() -> bool:
        """True when converged; otherwise `lagging` says which pods are not, for the failure message."""
        if not daemon.alive():
            raise AssertionError(f"the daemon died:\n{daemon.log_tail()}")
        pods = {pod.metadata.name: pod for pod in (await core.list_namespaced_pod(namespace)).items}
        lagging[:] = [
            *(f"{name}: still exists" for name in sorted(set(pods) - set(survivors))),
            *(f"{name}: missing" for name in survivors if name not in pods),
            *(f"{name}: {pod.status.phase}" for name, pod in pods.items() if pod.status.phase != "Running"),
            *(
                f"{name}: {count} processes"
                for name in survivors
                if (count := len(processes_with_argument(tags[name]))) != 1
            ),
            *(
                f"{name}: deleted but its process runs"
                for name in doomed
                if processes_with_argument(tags[name])
            ),
        ]
        return not lagging

    try:
        await wait_for(converged, timeout_seconds=180, what="every pod to converge after the kill -9")
    except AssertionError as error:
        raise AssertionError(f"{error}; not converged: {lagging}\n{daemon.log_tail()}") from None
    duplicates = {name: processes_with_argument(tags[name]) for name in survivors}
    assert all(len(pids) == 1 for pids in duplicates.values()), duplicates

    for name in survivors:
        await core.delete_namespaced_pod(name, namespace, grace_period_seconds=5)

    async def nothing_left() -> bool:
        pods = (await core.list_namespaced_pod(namespace)).items
        return not pods and not any(processes_with_argument(tag) for tag in tags.values())

    await wait_for(nothing_left, timeout_seconds=120, what="every pod and process to be gone")
    pod_records = daemon.folder / "state" / "provider" / "pods"

    async def no_records() -> bool:
        return not any(pod_records.iterdir())

    await wait_for(no_records, timeout_seconds=30, what="the provider to forget every pod")


async def test_a_restart_adopts_running_workloads_and_collects_the_orphan_of_a_pod_deleted_meanwhile(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("local", **LOCAL_SETTINGS)
    core = client.CoreV1Api(kube_api)
    kept, orphaned = (f"39{random.randrange(10**6):06d}.{n}" for n in (1, 2))  # noqa: S311 - tags
    await core.create_namespaced_pod(namespace, sleeper("kept", daemon.node_name, kept))
    await core.create_namespaced_pod(namespace, sleeper("orphaned", daemon.node_name, orphaned))

    async def both_running() -> bool:
        return len(processes_with_argument(kept)) == 1 and len(processes_with_argument(orphaned)) == 1

    await wait_for(both_running, timeout_seconds=60, what="both processes to run")
    (kept_pid,) = processes_with_argument(kept)
    assert daemon.stop() == 0
    assert processes_with_argument(orphaned)  # workloads outlive the daemon on purpose
    await core.delete_namespaced_pod("orphaned", namespace, grace_period_seconds=0)
    daemon.start()

    async def orphan_collected() -> bool:
        return not processes_with_argument(orphaned)

    await wait_for(orphan_collected, timeout_seconds=60, what="the orphan to be collected")
    assert processes_with_argument(kept) == [kept_pid]  # adopted, not started a second time
    assert (await core.read_namespaced_pod("kept", namespace)).status.phase == "Running"
    assert "deleting orphan workload" in daemon.log_path.read_text()
