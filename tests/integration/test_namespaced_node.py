"""A node limited to some namespaces runs on Roles there alone: its token reads no Secret elsewhere,
and no pod of another namespace is let onto it.

The RBAC is manifests/examples/namespaced-node's (the base with manifests/components/namespaced), its
served namespace's RoleBinding moved to the test's namespace; the daemon runs as that ServiceAccount.
The admission policy is the example's binding-guard.yaml, its node and namespace lists replaced.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from tests.integration.conftest import MANIFESTS_GROUP, Kubectl
from tests.integration.daemons import NodeDaemon
from tests.integration.test_manifests import (
    can_i_as,
    delete_and_wait_removed,
    start_as_node_service_account,
)
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster

EXAMPLE = Path(__file__).parents[2] / "manifests" / "examples" / "namespaced-node"
SYSTEM_NAMESPACE = "vk-provider-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{SYSTEM_NAMESPACE}:vk-provider-node"
EXAMPLE_SERVED = "inference"
RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
pytestmark = MANIFESTS_GROUP


def namespaced_rbac(kubectl: Kubectl, served: str) -> list[dict[str, Any]]:
    """The example's identity and RBAC, its served namespace's binding moved to `served`."""
    rendered = [item for item in yaml.safe_load_all(kubectl("kustomize", str(EXAMPLE)).stdout) if item]
    rbac = [item for item in rendered if item["kind"] in RBAC_KINDS]
    moved = [item for item in rbac if item["metadata"].get("namespace") == EXAMPLE_SERVED]
    assert [item["kind"] for item in moved] == ["RoleBinding"]
    moved[0]["metadata"]["namespace"] = served
    return rbac


@pytest.fixture
def applied_rbac(
    kubectl: Kubectl,
    namespace: str,
    tmp_path: Path,
    one_worker_at_a_time: Callable[[], contextlib.AbstractContextManager[None]],
) -> Iterator[None]:
    manifest = tmp_path / "namespaced-rbac.yaml"
    manifest.write_text(yaml.safe_dump_all(namespaced_rbac(kubectl, namespace)))
    with one_worker_at_a_time():
        kubectl("create", "namespace", SYSTEM_NAMESPACE, check=False)  # shared: kept afterwards
        kubectl("apply", "-f", str(manifest))
    try:
        yield
    finally:
        kubectl("delete", "-f", str(manifest), "--wait=false", "--ignore-not-found", check=False)


def can_i(kubectl: Kubectl, verb: str, resource: str, namespace: str | None) -> str:
    return can_i_as(kubectl, SERVICE_ACCOUNT, verb, resource, namespace)


@pytest.mark.usefixtures("applied_rbac")
def test_the_node_may_act_in_its_namespaces_and_reads_no_secret_elsewhere(
    kubectl: Kubectl, namespace: str
) -> None:
    in_served = [
        ("list", "pods"),
        ("watch", "pods"),
        ("delete", "pods"),
        ("patch", "pods/status"),
        ("get", "configmaps"),
        ("get", "secrets"),
        ("list", "services"),
        ("watch", "services"),
        ("create", "events"),
        ("patch", "events"),
    ]
    cluster_scoped = [
        ("get", "nodes"),
        ("create", "nodes"),
        ("patch", "nodes/status"),
        ("create", "tokenreviews.authentication.k8s.io"),
        ("create", "subjectaccessreviews.authorization.k8s.io"),
        ("create", "certificatesigningrequests.certificates.k8s.io"),
    ]
    needed = [
        *((verb, resource, namespace) for verb, resource in in_served),
        *((verb, resource, None) for verb, resource in cluster_scoped),
        ("create", "events", "default"),  # the Node's own Events
        ("patch", "events", "default"),
    ]
    elsewhere = ["default", "kube-system", SYSTEM_NAMESPACE, "not-served"]
    forbidden = [
        *(("get", "secrets", other) for other in elsewhere),
        *(("get", "configmaps", other) for other in elsewhere),
        ("list", "pods", None),  # cluster-wide, as an unlimited node lists them
        ("watch", "pods", None),
        ("list", "services", None),
        ("get", "secrets", None),
        ("delete", "pods", "kube-system"),
        ("patch", "pods/status", "not-served"),
        ("create", "events", "kube-system"),
        ("list", "secrets", namespace),  # even where it serves, one Secret at a time by name
        ("patch", "pods", namespace),
    ]
    missing = [need for need in needed if can_i(kubectl, *need) != "yes"]
    excess = [refused for refused in forbidden if can_i(kubectl, *refused) != "no"]
    assert missing == []
    assert excess == []


@pytest.mark.usefixtures("applied_rbac")
async def test_a_node_on_namespaced_rbac_runs_and_removes_a_pod_of_its_namespace(
    kube_api: client.ApiClient,
    namespace: str,
    control_plane: cluster.ClusterState,
    tmp_path: Path,
    start_node: Callable[..., Awaitable[NodeDaemon]],
) -> None:
    """The Roles are not only narrow but sufficient: the daemon registers, turns Ready, resolves a
    ConfigMap and a Secret, runs the pod and removes it, never refused."""
    core = client.CoreV1Api(kube_api)
    # An unissued CSR turns into a self-signed certificate after the wait: a Node Event soon.
    daemon = await start_as_node_service_account(
        kube_api,
        control_plane,
        tmp_path,
        start_node,
        namespaces=[namespace],
        serving_certificate_wait_seconds=2,
    )
    await core.create_namespaced_config_map(namespace, {"metadata": {"name": "cfg"}, "data": {"k": "v"}})
    await core.create_namespaced_secret(namespace, {"metadata": {"name": "key"}, "stringData": {"s": "x"}})
    secret_env = {"name": "S", "valueFrom": {"secretKeyRef": {"name": "key", "key": "s"}}}
    await core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "served"},
            "spec": {
                "nodeName": daemon.node_name,
                "containers": [
                    {
                        "name": "main",
                        "image": "x",
                        "envFrom": [{"configMapRef": {"name": "cfg"}}],
                        "env": [secret_env],
                    }
                ],
            },
        },
    )

    async def running() -> bool:
        return (await core.read_namespaced_pod("served", namespace)).status.phase == "Running"

    await wait_for(running, timeout_seconds=60, what="the served namespace's pod to run")

    def posted(where: str, kind: str, name: str) -> Callable[[], Awaitable[bool]]:
        """Whether the daemon posted an Event about it there (the controller-manager's do not count)."""

        async def probe() -> bool:
            selector = f"involvedObject.kind={kind},involvedObject.name={name}"
            events = (await core.list_namespaced_event(where, field_selector=selector)).items
            return any(event.source and event.source.host == daemon.node_name for event in events)

        return probe

    # The pod's Events go to its namespace; the Node's (its serving certificate's) to `default`.
    await wait_for(posted(namespace, "Pod", "served"), timeout_seconds=60, what="the pod's Event")
    await wait_for(posted("default", "Node", daemon.node_name), timeout_seconds=60, what="the Node's Event")
    await delete_and_wait_removed(core, namespace, "served")
    assert "Forbidden" not in daemon.log_path.read_text()


GUARD = EXAMPLE / "binding-guard.yaml"


@pytest.fixture
def binding_guard(kubectl: Kubectl, namespace: str, tmp_path: Path) -> Iterator[str]:
    """The example's ValidatingAdmissionPolicy, for a node of this test's own (no daemon needed:
    admission refuses before any node looks) serving the test's namespace. Yields the node's name."""
    node_name = f"vk-guarded-{namespace[-6:]}"
    text = GUARD.read_text()
    for example, ours in (("['vk-provider']", f"['{node_name}']"), ("['inference']", f"['{namespace}']")):
        assert example in text
        text = text.replace(example, ours)
    policy = tmp_path / "binding-guard.yaml"
    policy.write_text(text)
    kubectl("apply", "-f", str(policy))
    try:
        yield node_name
    finally:
        kubectl("delete", "-f", str(policy), "--ignore-not-found", check=False)


UNSCHEDULED = "vk-provider-test-no-scheduler"
"""A scheduler nobody runs: a pod the test binds itself is not placed meanwhile by the real scheduler on
some other test's untainted node."""


def pod_body(name: str, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}]}
    if node is not None:
        spec["nodeName"] = node
    else:
        spec["schedulerName"] = UNSCHEDULED
    return {"metadata": {"name": name}, "spec": spec}


async def refusal(create: Awaitable[object]) -> str:
    """The apiserver's 403 message for `create`, or "" when it was accepted."""
    try:
        await create
    except client.ApiException as error:
        if error.status != 403:  # anything but a refusal is a failure of the test itself
            raise
        return str(error.body)
    return ""


async def bind(core: client.CoreV1Api, namespace: str, pod: str, node: str, **options: str) -> str:
    """The 403 message for binding the pod to `node` as the scheduler does, or "" when it was bound.
    Read raw: the answer is a Status, which the client cannot read as the Binding it expects."""
    binding = {"metadata": {"name": pod}, "target": {"kind": "Node", "name": node}}
    response = await core.create_namespaced_pod_binding(
        pod, namespace, binding, _preload_content=False, **options
    )
    body = await response.text()
    if response.status == 201:
        return ""
    assert response.status == 403, body
    return body


async def test_a_pod_of_a_namespace_the_node_does_not_serve_is_refused_the_node_not_left_pending(
    kube_api: client.ApiClient, namespace: str, binding_guard: str
) -> None:
    """Both ways onto a node, the scheduler's Binding and a pod created with its nodeName, are
    refused from other namespaces (the pod stays unbound, its reason said) and allowed from the
    served one."""
    core = client.CoreV1Api(kube_api)
    node = binding_guard
    other = f"{namespace[:50]}-other"
    await core.create_namespace({"metadata": {"name": other, "labels": {"vk-provider.dev/test": "true"}}})
    try:

        async def created_on_the_node_refused() -> str:
            return await refusal(core.create_namespaced_pod(other, pod_body("direct", node), dry_run="All"))

        message = await wait_for(created_on_the_node_refused, timeout_seconds=60, what="the policy to act")
        assert f"node {node} serves only the namespaces {namespace}" in message
        assert not await refusal(
            core.create_namespaced_pod(namespace, pod_body("direct", node), dry_run="All")
        )

        await core.create_namespaced_pod(other, pod_body("unbound", None))
        assert f"a pod of {other} would never run there" in await bind(core, other, "unbound", node)
        assert (await core.read_namespaced_pod("unbound", other)).spec.node_name is None
        await core.create_namespaced_pod(namespace, pod_body("unbound", None))
        assert not await bind(core, namespace, "unbound", node, dry_run="All")
    finally:
        await core.delete_namespace(other)
