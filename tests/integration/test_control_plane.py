"""The local control plane is the real thing: upstream binaries, real controllers, real authorization."""

from __future__ import annotations

import json
import ssl
import uuid

import aiohttp
from kubernetes_asyncio import client

from tests.integration.conftest import Kubectl
from tests.integration.nodes import healthy_node
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster
from vk_devtools.devcluster.building import read_pins

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def pod_body(name: str, *, labels: dict[str, str] | None = None, **spec: object) -> dict[str, object]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "containers": [
                {"name": "main", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": "100m"}}}
            ],
            **spec,
        },
    }


async def test_the_server_runs_the_pinned_kubernetes_version(
    kube_api: client.ApiClient, kubectl: Kubectl
) -> None:
    pinned = read_pins().kubernetes_version
    version = await client.VersionApi(kube_api).get_code()
    assert version.git_version == pinned
    reported = json.loads(kubectl("version", "-o", "json").stdout)
    assert reported["serverVersion"]["gitVersion"] == pinned
    assert reported["clientVersion"]["gitVersion"] == pinned


def test_the_readyz_endpoint_answers_ok_through_kubectl(kubectl: Kubectl) -> None:
    assert kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"


async def test_a_deployment_gets_a_replicaset_and_pods(kube_api: client.ApiClient, namespace: str) -> None:
    apps = client.AppsV1Api(kube_api)
    core = client.CoreV1Api(kube_api)
    labels = {"app": "web"}
    deployment = await apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_body("unused")["spec"]},
            },
        },
    )

    async def replica_set_of_deployment() -> list[client.V1ReplicaSet]:
        sets = await apps.list_namespaced_replica_set(namespace)
        return [
            rs
            for rs in sets.items
            if any(owner.uid == deployment.metadata.uid for owner in rs.metadata.owner_references or [])
        ]

    (replica_set,) = await wait_for(replica_set_of_deployment, timeout_seconds=60, what="the ReplicaSet")

    async def pods_of_replica_set() -> list[client.V1Pod]:
        pods = await core.list_namespaced_pod(namespace)
        owned = [
            pod
            for pod in pods.items
            if any(owner.uid == replica_set.metadata.uid for owner in pod.metadata.owner_references or [])
        ]
        return owned if len(owned) == 2 else []

    pods = await wait_for(pods_of_replica_set, timeout_seconds=60, what="two pods owned by the ReplicaSet")
    assert {pod.metadata.labels["app"] for pod in pods} == {"web"}


async def test_a_pod_is_scheduled_once_a_schedulable_node_with_room_exists(
    kube_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    # The pod selects a label no node has yet, so only the node this test creates can take it.
    selector = {"vk-provider.dev/scheduling-test": uuid.uuid4().hex[:8]}
    await core.create_namespaced_pod(namespace, pod_body("waiting", nodeSelector=selector))

    async def reported_unschedulable() -> bool:
        pod = await core.read_namespaced_pod("waiting", namespace)
        conditions = pod.status.conditions or []
        return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions)

    await wait_for(reported_unschedulable, timeout_seconds=60, what="the scheduler to report Unschedulable")

    async with healthy_node(kube_api, labels=selector) as node_name:

        async def bound_node() -> str | None:
            pod = await core.read_namespaced_pod("waiting", namespace)
            node: str | None = pod.spec.node_name
            return node

        assert await wait_for(bound_node, timeout_seconds=90, what="the pod to be bound") == node_name


async def test_a_service_account_without_rbac_rights_is_forbidden(
    kube_api: client.ApiClient, namespace: str, control_plane: cluster.ClusterState
) -> None:
    core = client.CoreV1Api(kube_api)
    rbac = client.RbacAuthorizationV1Api(kube_api)
    await core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token_request = await core.create_namespaced_service_account_token(
        "nobody", namespace, {"spec": {"expirationSeconds": 600}}
    )
    token = token_request.status.token
    tls = ssl.create_default_context(cafile=str(control_plane.ca_cert))
    url = f"{control_plane.server}/api/v1/namespaces/{namespace}/pods"

    async def status_of_list_pods() -> int:
        async with (
            aiohttp.ClientSession() as session,
            session.get(url, headers={"Authorization": f"Bearer {token}"}, ssl=tls) as response,
        ):
            return response.status

    assert await status_of_list_pods() == 403
    # The same token with a binding is allowed: the 403 came from authorization, not from a bad token.
    await rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "nobody-can-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": namespace}],
        },
    )

    async def allowed() -> bool:
        return await status_of_list_pods() == 200

    await wait_for(allowed, timeout_seconds=30, what="the role binding to take effect")


async def test_an_endpointslice_lists_a_pod_once_it_is_marked_ready(
    kube_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    discovery = client.DiscoveryV1Api(kube_api)
    labels = {"app": "api"}
    await core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "api"},
            "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    async with healthy_node(kube_api) as node_name:
        await core.create_namespaced_pod(namespace, pod_body("api-0", labels=labels, nodeName=node_name))
        pod_ip = "10.244.0.17"
        now = "2026-01-01T00:00:00Z"
        await core.patch_namespaced_pod_status(
            "api-0",
            namespace,
            {
                "status": {
                    "phase": "Running",
                    "podIP": pod_ip,
                    "podIPs": [{"ip": pod_ip}],
                    "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": now},
                        {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                    ],
                }
            },
        )

        async def ready_endpoints() -> list[str]:
            slices = await discovery.list_namespaced_endpoint_slice(
                namespace, label_selector="kubernetes.io/service-name=api"
            )
            return [
                address
                for endpoint_slice in slices.items
                for endpoint in endpoint_slice.endpoints or []
                if endpoint.conditions.ready and endpoint.target_ref and endpoint.target_ref.name == "api-0"
                for address in endpoint.addresses
            ]

        assert await wait_for(ready_endpoints, timeout_seconds=60, what="a ready endpoint") == [pod_ip]
