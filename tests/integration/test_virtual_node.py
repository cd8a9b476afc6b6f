"""The virtual node on the real control plane: registration, heartbeats, health, pods, environment."""

from __future__ import annotations

import contextlib
import socket
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from tests.integration.conftest import NODE_MONITOR_GRACE_PERIOD_SECONDS
from tests.integration.daemons import ManagedProcess, NodeDaemon
from tests.integration.nodes import TOLERATE_ALL
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster
from vk_devtools.devcluster.ports import PortPicker
from vk_provider.node.leadership import lease_name
from vk_provider.offload.names import OFFLOAD_LABEL

StartNode = Callable[..., Awaitable[NodeDaemon]]


def deployment(name: str, node: str, *, replicas: int = 2, **container: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "tolerations": TOLERATE_ALL,
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "main", "image": "example/app:1", **container}],
                },
            },
        },
    }


def pod(name: str, node: str, **container: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": TOLERATE_ALL,
            "containers": [{"name": "main", "image": "example/app:1", **container}],
        },
    }


async def events_of(core: client.CoreV1Api, namespace: str, name: str) -> list[client.CoreV1Event]:
    listing = await core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    return listing.items


async def test_the_node_registers_ready_with_its_capacity_labels_and_taint_and_renews_its_lease(
    start_node: StartNode, kube_api: client.ApiClient
) -> None:
    port = PortPicker().pick()
    daemon = await start_node(
        "mock",
        capacity={"cpu": "64", "memory": "256Gi", "pods": "500", "nvidia.com/gpu": "8"},
        labels={"gpu.example.com/pool": "burst"},
        kubelet_port=port,
        lease_renew_interval_seconds=2.0,
    )
    core = client.CoreV1Api(kube_api)
    node = await core.read_node(daemon.node_name)
    assert node.status.capacity == {"cpu": "64", "memory": "256Gi", "pods": "500", "nvidia.com/gpu": "8"}
    assert node.status.allocatable == node.status.capacity
    labels = node.metadata.labels
    assert labels["type"] == "virtual-kubelet"
    assert labels["node-restriction.kubernetes.io/vk-provider"] == "true"  # ours alone carry it
    assert labels["kubernetes.io/role"] == "agent"
    assert labels["kubernetes.io/hostname"] == daemon.node_name
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["node.kubernetes.io/exclude-from-external-load-balancers"] == "true"
    assert labels["gpu.example.com/pool"] == "burst"
    taints = [(t.key, t.value, t.effect) for t in node.spec.taints or []]
    assert ("vk-provider.dev/virtual-node", "mock", "NoSchedule") in taints
    assert not any(effect == "NoExecute" for _, _, effect in taints)
    assert node.status.daemon_endpoints.kubelet_endpoint.port == port
    assert next((a.type, a.address) for a in node.status.addresses) == ("InternalIP", "127.0.0.1")
    conditions = {c.type: c.status for c in node.status.conditions}
    assert conditions["Ready"] == "True"
    assert conditions["NetworkUnavailable"] == "False"
    assert "vk-provider" in node.status.node_info.kubelet_version

    coordination = client.CoordinationV1Api(kube_api)
    lease = await coordination.read_namespaced_lease(daemon.node_name, "kube-node-lease")
    assert lease.spec.lease_duration_seconds == 40
    assert lease.spec.holder_identity == daemon.node_name
    assert [(o.kind, o.uid) for o in lease.metadata.owner_references] == [("Node", node.metadata.uid)]
    first_renewal = lease.spec.renew_time

    async def renewed() -> bool:
        current = await coordination.read_namespaced_lease(daemon.node_name, "kube-node-lease")
        return bool(current.spec.renew_time > first_renewal)

    await wait_for(renewed, timeout_seconds=30, what="the lease to be renewed")


async def test_the_readmes_first_node_command_gets_a_ready_node_without_a_namespace_of_ours(
    control_plane: cluster.ClusterState, kube_api: client.ApiClient, tmp_path: Path
) -> None:
    """`vk-provider node` as the documentation runs it by hand: outside a pod, no --leader-election-namespace,
    no config file. Its leader Lease goes to kube-node-lease, which every cluster has, so it needs no
    vk-provider-system (the namespace of the Lease is what the test checks: other tests may create
    vk-provider-system on this shared plane, and a node that took its Lease there would still pass)."""
    name = f"vk-bare-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(kube_api)
    coordination = client.CoordinationV1Api(kube_api)
    readme_command = ["node", "--kubeconfig", str(control_plane.kubeconfig), "--node-name", name]
    readme_command += ["--provider", "mock", "--capacity", "nvidia.com/gpu=8", "--capacity", "cpu=64"]
    readme_command += ["--label", "pool=burst"]
    # Beyond the documentation: what a machine shared with other tests needs (a port and a state folder of
    # its own), and the CSR approval an operator would give by hand.
    shared_machine = ["--kubelet-port", str(PortPicker().pick()), "--kubelet-bind-address", "127.0.0.1"]
    shared_machine += ["--state-dir", str(tmp_path / "state"), "--kubelet-csr-self-approve"]
    daemon = ManagedProcess(folder=tmp_path, arguments=[*readme_command, *shared_machine])
    daemon.start()
    try:

        async def ready() -> bool:
            if not daemon.alive():
                raise AssertionError(f"the node daemon exited:\n{daemon.log_tail()}")
            node = await core.read_node(name)
            return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])

        try:
            await wait_for(ready, timeout_seconds=60, what=f"node {name} to be Ready")
        except AssertionError as error:
            raise AssertionError(f"{error}; the daemon's log:\n{daemon.log_tail(20)}") from None
        leader = await coordination.read_namespaced_lease(lease_name(name), "kube-node-lease")
        assert leader.spec.holder_identity.startswith(socket.gethostname())
        assert "does not exist" not in daemon.log_path.read_text()
    finally:
        daemon.stop()
        daemon.close()
        for delete in (
            core.delete_node(name),
            coordination.delete_namespaced_lease(lease_name(name), "kube-node-lease"),
        ):
            with contextlib.suppress(client.ApiException):
                await delete


async def test_a_deployment_runs_to_ready_on_the_mock_provider(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("mock")
    apps = client.AppsV1Api(kube_api)
    core = client.CoreV1Api(kube_api)
    web = deployment("web", daemon.node_name, replicas=3, ports=[{"containerPort": 8080}])
    # An Offload's away pods: the node publishes a traffic address only for those.
    web["spec"]["template"]["metadata"]["labels"][OFFLOAD_LABEL] = "web"
    await apps.create_namespaced_deployment(namespace, web)

    async def available() -> bool:
        current = await apps.read_namespaced_deployment("web", namespace)
        return bool(current.status.available_replicas == 3)

    await wait_for(available, timeout_seconds=60, what="3 available replicas")
    pods = (await core.list_namespaced_pod(namespace, label_selector="app=web")).items
    for item in pods:
        assert item.spec.node_name == daemon.node_name
        assert item.status.phase == "Running"
        assert item.status.pod_ip
        assert item.status.pod_ip.startswith("10.200.")
        assert item.status.host_ip == "127.0.0.1"
        assert item.status.start_time is not None
        conditions = {c.type: c.status for c in item.status.conditions}
        assert conditions == {
            "PodScheduled": "True",
            "Initialized": "True",
            "ContainersReady": "True",
            "Ready": "True",
            "vk-provider.dev/TrafficAddress": "True",  # published by the node, value in its message
            "vk-provider.dev/TrafficSignature": "True",  # the node's seal over it
        }
        (container,) = item.status.container_statuses
        assert (container.name, container.ready, container.started, container.restart_count) == (
            "main",
            True,
            True,
            0,
        )
        assert container.state.running is not None
        published = {c.type: c.message for c in item.status.conditions}
        assert published["vk-provider.dev/TrafficAddress"] == f"http://{item.status.pod_ip}:8080"


async def test_a_node_deleted_while_the_daemon_runs_is_registered_again(
    start_node: StartNode, kube_api: client.ApiClient
) -> None:
    daemon = await start_node("mock", lease_renew_interval_seconds=2.0)
    core = client.CoreV1Api(kube_api)
    original = await core.read_node(daemon.node_name)
    await core.delete_node(daemon.node_name)

    async def recreated() -> bool:
        node = await core.read_node(daemon.node_name)
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        return bool(node.metadata.uid != original.metadata.uid and ready)

    await wait_for(recreated, timeout_seconds=30, what="the node to be registered again")


async def test_a_stopped_daemon_turns_the_node_unknown_and_a_restart_makes_it_ready(
    start_node: StartNode, kube_api: client.ApiClient
) -> None:
    daemon = await start_node("mock")
    core = client.CoreV1Api(kube_api)
    assert daemon.stop() == 0

    async def ready_status() -> str:
        node = await core.read_node(daemon.node_name)
        return next(c.status for c in node.status.conditions if c.type == "Ready")

    async def unknown() -> bool:
        return await ready_status() == "Unknown"

    await wait_for(
        unknown,
        timeout_seconds=NODE_MONITOR_GRACE_PERIOD_SECONDS + 60,
        what="the controller-manager to mark it Unknown",
    )
    daemon.start()

    async def ready_again() -> bool:
        return await ready_status() == "True"

    await wait_for(ready_again, timeout_seconds=60, what="the node to be Ready after the restart")


async def test_a_missing_mandatory_config_map_creates_nothing_until_it_appears(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("mock")
    core = client.CoreV1Api(kube_api)
    reference = {"valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}
    await core.create_namespaced_pod(
        namespace, pod("needs-settings", daemon.node_name, env=[{"name": "MODE", **reference}])
    )

    async def reported() -> bool:
        reasons = {event.reason for event in await events_of(core, namespace, "needs-settings")}
        return "MandatoryConfigMapNotFound" in reasons

    await wait_for(reported, timeout_seconds=30, what="the MandatoryConfigMapNotFound event")
    current = await core.read_namespaced_pod("needs-settings", namespace)
    assert current.status.phase == "Pending"
    assert current.status.pod_ip is None
    assert "ProviderCreateSuccess" not in {
        e.reason for e in await events_of(core, namespace, "needs-settings")
    }

    await core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"mode": "fast"}}
    )

    async def running() -> bool:
        return (await core.read_namespaced_pod("needs-settings", namespace)).status.phase == "Running"

    await wait_for(running, timeout_seconds=30, what="the pod to run once the ConfigMap exists")


async def test_a_missing_mandatory_secret_is_reported_with_the_kubelet_reason(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("mock")
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod(
        namespace, pod("needs-token", daemon.node_name, envFrom=[{"secretRef": {"name": "api-token"}}])
    )

    async def reported() -> bool:
        reasons = {event.reason for event in await events_of(core, namespace, "needs-token")}
        return "MandatorySecretNotFound" in reasons

    await wait_for(reported, timeout_seconds=30, what="the MandatorySecretNotFound event")
    assert (await core.read_namespaced_pod("needs-token", namespace)).status.pod_ip is None


async def test_a_missing_optional_reference_is_reported_and_the_pod_runs(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("mock")
    core = client.CoreV1Api(kube_api)
    env = [
        {
            "name": "MODE",
            "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "mode", "optional": True}},
        },
        {
            "name": "TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "absent", "key": "token", "optional": True}},
        },
    ]
    await core.create_namespaced_pod(namespace, pod("relaxed", daemon.node_name, env=env))

    async def running_with_events() -> bool:
        reasons = {event.reason for event in await events_of(core, namespace, "relaxed")}
        phase = (await core.read_namespaced_pod("relaxed", namespace)).status.phase
        return phase == "Running" and {"OptionalConfigMapNotFound", "OptionalSecretNotFound"} <= reasons

    await wait_for(running_with_events, timeout_seconds=30, what="the optional events and a running pod")


async def test_a_provider_outage_taints_the_node_without_evicting_and_recovery_clears_it(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    marker = tmp_path / "provider-down"
    daemon = await start_node(
        "mock", provider_config={"unhealthy_marker_file": str(marker)}, lease_renew_interval_seconds=2.0
    )
    core = client.CoreV1Api(kube_api)
    coordination = client.CoordinationV1Api(kube_api)
    await core.create_namespaced_pod(namespace, pod("survivor", daemon.node_name))

    async def running() -> bool:
        return (await core.read_namespaced_pod("survivor", namespace)).status.phase == "Running"

    await wait_for(running, timeout_seconds=30, what="the pod to run")
    marker.touch()

    async def provider_state() -> tuple[str, bool, str]:
        node = await core.read_node(daemon.node_name)
        condition = next(c for c in node.status.conditions if c.type == "ProviderAvailable")
        tainted = any(t.key == "virtual-kubelet.io/provider-unavailable" for t in node.spec.taints or [])
        ready = next(c.status for c in node.status.conditions if c.type == "Ready")
        return condition.status, tainted, ready

    async def marked_unavailable() -> bool:
        return (await provider_state())[:2] == ("False", True)

    await wait_for(marked_unavailable, timeout_seconds=30, what="ProviderAvailable=False and the taint")
    node = await core.read_node(daemon.node_name)
    condition = next(c for c in node.status.conditions if c.type == "ProviderAvailable")
    assert str(marker) in condition.message
    unavailable_taint = next(
        t for t in node.spec.taints if t.key == "virtual-kubelet.io/provider-unavailable"
    )
    assert unavailable_taint.effect == "NoSchedule"

    # The lease keeps renewing through the outage, so the node stays Ready and nothing is evicted.
    before = (await coordination.read_namespaced_lease(daemon.node_name, "kube-node-lease")).spec.renew_time

    async def lease_renewed() -> bool:
        lease = await coordination.read_namespaced_lease(daemon.node_name, "kube-node-lease")
        return bool(lease.spec.renew_time > before)

    await wait_for(lease_renewed, timeout_seconds=30, what="a lease renewal during the outage")
    assert (await provider_state())[2] == "True"
    survivor = await core.read_namespaced_pod("survivor", namespace)
    assert survivor.metadata.deletion_timestamp is None
    assert survivor.status.phase == "Running"

    marker.unlink()

    async def recovered() -> bool:
        return (await provider_state())[:2] == ("True", False)

    await wait_for(recovered, timeout_seconds=30, what="ProviderAvailable=True and the taint lifted")


async def test_a_failing_pod_is_reported_and_retried_until_it_succeeds_without_delaying_others(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("mock")
    core = client.CoreV1Api(kube_api)
    failing = pod("unlucky", daemon.node_name)
    failing["metadata"]["labels"] = {"mock.vk-provider.dev/fail-create": "no-capacity-in-region"}
    await core.create_namespaced_pod(namespace, failing)
    for index in range(3):
        await core.create_namespaced_pod(namespace, pod(f"lucky-{index}", daemon.node_name))

    async def failure_reported() -> bool:
        current = await core.read_namespaced_pod("unlucky", namespace)
        reasons = {event.reason for event in await events_of(core, namespace, "unlucky")}
        return current.status.reason == "ProviderFailed" and "ProviderCreateFailed" in reasons

    await wait_for(failure_reported, timeout_seconds=30, what="ProviderFailed on the failing pod")
    current = await core.read_namespaced_pod("unlucky", namespace)
    assert current.status.phase == "Pending"
    assert "no-capacity-in-region" in current.status.message

    async def others_running() -> bool:
        pods = (
            await core.list_namespaced_pod(namespace, label_selector="!mock.vk-provider.dev/fail-create")
        ).items
        return len(pods) == 3 and all(item.status.phase == "Running" for item in pods)

    await wait_for(others_running, timeout_seconds=30, what="the other pods to run meanwhile")

    async def retried_again() -> bool:
        warnings = [
            e for e in await events_of(core, namespace, "unlucky") if e.reason == "ProviderCreateFailed"
        ]
        return sum(event.count or 1 for event in warnings) >= 3

    await wait_for(retried_again, timeout_seconds=60, what="repeated retries")
    await core.patch_namespaced_pod(
        "unlucky", namespace, {"metadata": {"labels": {"mock.vk-provider.dev/fail-create": None}}}
    )

    async def recovered() -> bool:
        current = await core.read_namespaced_pod("unlucky", namespace)
        return current.status.phase == "Running" and current.status.reason is None

    await wait_for(recovered, timeout_seconds=60, what="the pod to run once the provider accepts it")


async def test_a_refused_pod_that_never_restarts_fails_for_good(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await start_node("mock")
    core = client.CoreV1Api(kube_api)
    refused = pod("refused", daemon.node_name)
    refused["metadata"]["labels"] = {"mock.vk-provider.dev/fail-create": "invalid-gpu-type"}
    refused["spec"]["restartPolicy"] = "Never"
    await core.create_namespaced_pod(namespace, refused)

    async def failed() -> bool:
        current = await core.read_namespaced_pod("refused", namespace)
        return current.status.phase == "Failed" and current.status.reason == "ProviderFailed"

    await wait_for(failed, timeout_seconds=30, what="the pod to fail with ProviderFailed")
    message = (await core.read_namespaced_pod("refused", namespace)).status.message
    assert "invalid-gpu-type" in message


async def test_a_restart_reapplies_labels_taints_and_capacity(
    start_node: StartNode, kube_api: client.ApiClient
) -> None:
    daemon = await start_node("mock", capacity={"cpu": "32", "memory": "64Gi", "pods": "100"})
    core = client.CoreV1Api(kube_api)
    assert daemon.stop() == 0
    # Also the Node as an earlier version left it: without our label, with the generic taint.
    await core.patch_node(
        daemon.node_name,
        {
            "metadata": {"labels": {"type": "tampered", "node-restriction.kubernetes.io/vk-provider": None}},
            "spec": {
                "taints": [
                    {"key": "operator/own", "effect": "NoSchedule"},
                    {"key": "virtual-kubelet.io/provider", "value": "mock", "effect": "NoSchedule"},
                ]
            },
        },
    )
    daemon.start()

    async def restored() -> bool:
        node = await core.read_node(daemon.node_name)
        taints = {(t.key, t.effect) for t in node.spec.taints or []}
        return (
            node.metadata.labels["type"] == "virtual-kubelet"
            and node.metadata.labels["node-restriction.kubernetes.io/vk-provider"] == "true"
            and ("vk-provider.dev/virtual-node", "NoSchedule") in taints
            and ("operator/own", "NoSchedule") in taints  # someone else's taint is kept
            and ("virtual-kubelet.io/provider", "NoSchedule") not in taints  # the old one of ours is not
            and node.status.capacity["cpu"] == "32"
        )

    await wait_for(restored, timeout_seconds=30, what="labels, taints and capacity to be re-applied")


def test_a_kubelet_port_in_use_stops_the_daemon_with_a_clear_error(
    control_plane: cluster.ClusterState, tmp_path: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        daemon = NodeDaemon(
            folder=tmp_path / "busy",
            provider="mock",
            kubeconfig=str(control_plane.kubeconfig),
            kubelet_port=holder.getsockname()[1],
        )
        daemon.start()
        try:
            assert daemon.process is not None
            assert daemon.process.wait(60) == 1
        finally:
            daemon.close()
    assert "the kubelet API cannot listen on 127.0.0.1" in daemon.log_tail()
