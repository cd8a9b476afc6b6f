"""The kustomize base is valid, and its ServiceAccount can do exactly what the node daemon needs."""

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
from tests.integration.identities import service_account_kubeconfig
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster
from vk_provider.offload.names import OFFLOAD_LABEL

BASE = Path(__file__).parents[2] / "manifests" / "base"
pytestmark = MANIFESTS_GROUP

NAMESPACE = "vk-provider-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:vk-provider-node"

NEEDED = [
    ("get", "nodes", None),
    ("create", "nodes", None),
    ("patch", "nodes", None),
    ("patch", "nodes/status", None),
    ("list", "pods", None),
    ("watch", "pods", None),
    ("delete", "pods", "default"),
    ("patch", "pods/status", "default"),
    ("get", "configmaps", "default"),
    ("get", "secrets", "default"),
    ("list", "services", None),
    ("watch", "services", None),
    ("create", "events", "default"),
    ("patch", "events", "default"),  # a repeated Event's count
    ("create", "leases.coordination.k8s.io", "kube-node-lease"),
    ("patch", "leases.coordination.k8s.io", "kube-node-lease"),
    # The replicas' leader Lease, in the daemon's own namespace.
    ("get", "leases.coordination.k8s.io", NAMESPACE),
    ("create", "leases.coordination.k8s.io", NAMESPACE),
    ("update", "leases.coordination.k8s.io", NAMESPACE),
    # The traffic key's Secret, created in the daemon's own namespace when no node has yet.
    ("create", "secrets", NAMESPACE),
    ("create", "tokenreviews.authentication.k8s.io", None),
    ("create", "subjectaccessreviews.authorization.k8s.io", None),
    ("create", "certificatesigningrequests.certificates.k8s.io", None),
    ("watch", "certificatesigningrequests.certificates.k8s.io", None),
]
FORBIDDEN = [
    ("delete", "nodes", None),
    ("create", "pods", "default"),
    ("patch", "pods", "default"),  # metadata: the node writes only pods/status
    ("update", "pods", "default"),
    ("list", "secrets", "default"),
    ("watch", "secrets", None),
    ("create", "secrets", "default"),
    ("delete", "leases.coordination.k8s.io", "kube-node-lease"),
    ("create", "leases.coordination.k8s.io", "default"),
    ("create", "deployments.apps", "default"),
    ("escalate", "clusterroles.rbac.authorization.k8s.io", None),
    # Approving certificates is opt-in (manifests/components/self-approve), not in the base.
    ("update", "certificatesigningrequests.certificates.k8s.io/approval", None),
    ("delete", "certificatesigningrequests.certificates.k8s.io", None),
]


@pytest.fixture(scope="module")
def applied_base(
    kubectl: Kubectl, one_worker_at_a_time: Callable[[], contextlib.AbstractContextManager[None]]
) -> Iterator[None]:
    with one_worker_at_a_time():
        # The namespace must exist before a server-side dry run can validate what goes into it.
        kubectl("apply", "-f", str(BASE / "namespace.yaml"))
        dry_run = kubectl("apply", "-k", str(BASE), "--dry-run=server")
        assert "(server dry run)" in dry_run.stdout
        kubectl("apply", "-k", str(BASE))
    try:
        yield
    finally:
        # Everything but the namespace, which other tests' ServiceAccounts (manifests/traffic) share.
        resources = yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]
        for resource in resources:
            if resource != "namespace.yaml":
                kubectl(
                    "delete", "-f", str(BASE / resource), "--wait=false", "--ignore-not-found", check=False
                )


def can_i(kubectl: Kubectl, verb: str, resource: str, namespace: str | None) -> str:
    return can_i_as(kubectl, SERVICE_ACCOUNT, verb, resource, namespace)


@pytest.mark.usefixtures("applied_base")
def test_the_node_service_account_has_every_verb_the_daemon_uses_and_no_more(kubectl: Kubectl) -> None:
    missing = [
        (verb, resource) for verb, resource, ns in NEEDED if can_i(kubectl, verb, resource, ns) != "yes"
    ]
    excess = [
        (verb, resource) for verb, resource, ns in FORBIDDEN if can_i(kubectl, verb, resource, ns) != "no"
    ]
    assert missing == []
    assert excess == []


@pytest.mark.usefixtures("applied_base")
def test_the_node_may_use_the_node_proxy_of_its_own_node_only(kubectl: Kubectl) -> None:
    """The serving certificate's check through the apiserver (`certificates.probe`) reaches the daemon
    itself; any other node's proxy would reach a real kubelet."""
    own_name = yaml.safe_load((BASE / "config.yaml").read_text())["data"]["node.yaml"]
    node_name = yaml.safe_load(own_name)["node_name"]

    def may_proxy_to(name: str) -> str:
        done = kubectl(
            "auth",
            "can-i",
            "get",
            f"nodes/{name}",
            "--subresource=proxy",
            f"--as={SERVICE_ACCOUNT}",
            check=False,
        )
        return done.stdout.strip()

    assert may_proxy_to(node_name) == "yes"
    assert may_proxy_to("a-real-kubelet") == "no"
    assert can_i(kubectl, "create", "nodes/proxy", None) == "no"


@pytest.mark.usefixtures("applied_base")
async def test_a_daemon_running_as_the_node_service_account_runs_and_removes_a_pod(
    kube_api: client.ApiClient,
    namespace: str,
    control_plane: cluster.ClusterState,
    tmp_path: Path,
    start_node: Callable[..., Awaitable[NodeDaemon]],
) -> None:
    """The RBAC is not only plausible but sufficient: the daemon works with nothing else."""
    core = client.CoreV1Api(kube_api)
    daemon = await start_as_node_service_account(kube_api, control_plane, tmp_path, start_node)
    await core.create_namespaced_config_map(namespace, {"metadata": {"name": "cfg"}, "data": {"k": "v"}})
    await core.create_namespaced_pod(
        namespace,
        {
            # An Offload's away pod: the node publishes a traffic address only for those.
            "metadata": {"name": "as-sa", "labels": {OFFLOAD_LABEL: "as-sa"}},
            "spec": {
                "nodeName": daemon.node_name,
                "containers": [
                    {
                        "name": "main",
                        "image": "x",
                        "envFrom": [{"configMapRef": {"name": "cfg"}}],
                        "ports": [{"containerPort": 80}],
                    }
                ],
            },
        },
    )

    async def running_with_address() -> bool:
        pod = await core.read_namespaced_pod("as-sa", namespace)
        published = {c.type for c in pod.status.conditions or ()}
        return pod.status.phase == "Running" and "vk-provider.dev/TrafficAddress" in published

    await wait_for(running_with_address, timeout_seconds=60, what="the pod to run under the service account")
    await delete_and_wait_removed(core, namespace, "as-sa")
    assert "Forbidden" not in daemon.log_tail()


async def start_as_node_service_account(
    kube_api: client.ApiClient,
    control_plane: cluster.ClusterState,
    tmp_path: Path,
    start_node: Callable[..., Awaitable[NodeDaemon]],
    **settings: Any,
) -> NodeDaemon:
    """A mock node daemon authenticated as the manifests' node ServiceAccount, nothing else."""
    kubeconfig = await service_account_kubeconfig(
        kube_api, control_plane, NAMESPACE, "vk-provider-node", tmp_path / "node-sa.kubeconfig"
    )
    # Self-approval needs the opt-in component; the base alone leaves the CSR to an operator.
    # Leader election in the namespace the manifests let it hold its Lease in, as deployed.
    return await start_node(
        "mock",
        kubeconfig=str(kubeconfig),
        kubelet_csr_self_approve=False,
        leader_election_namespace=NAMESPACE,
        **settings,
    )


async def delete_and_wait_removed(core: client.CoreV1Api, namespace: str, name: str) -> None:
    """Delete a pod bound to a node and wait until its daemon has removed it."""
    await core.delete_namespaced_pod(name, namespace)

    async def gone() -> bool:
        return not (await core.list_namespaced_pod(namespace, field_selector=f"metadata.name={name}")).items

    await wait_for(gone, timeout_seconds=60, what=f"pod {namespace}/{name} to be removed by the daemon")


ROUTER = f"system:serviceaccount:{NAMESPACE}:vk-provider-router"
CONTROLLER = f"system:serviceaccount:{NAMESPACE}:vk-provider-controller"
XDS = f"system:serviceaccount:{NAMESPACE}:vk-provider-xds"
ROUTE_TABLE_RIGHTS = (
    [
        ("list", "offloads.offload.vk-provider.dev", None),
        ("watch", "offloads.offload.vk-provider.dev", None),
        ("list", "endpointslices.discovery.k8s.io", None),
        ("watch", "endpointslices.discovery.k8s.io", None),
        ("list", "pods", None),
        ("watch", "pods", None),
        ("list", "nodes", None),
        ("watch", "nodes", None),
        ("list", "keptroutes.offload.vk-provider.dev", None),  # deleted Offloads' routes
        ("watch", "keptroutes.offload.vk-provider.dev", None),
        ("create", "events", "default"),  # the Warning about ignored traffic annotations
        ("patch", "events", "default"),  # a repeated Event's count
    ],
    [
        ("patch", "offloads.offload.vk-provider.dev/status", "default"),
        ("patch", "pods", "default"),
        ("patch", "pods/status", "default"),
        ("patch", "nodes", None),
        ("get", "secrets", "default"),
        ("get", "secrets", NAMESPACE),  # only the traffic key, by name (test_only_the_traffic_key...)
        ("list", "secrets", NAMESPACE),
        ("patch", "deployments.apps", "default"),
        ("create", "keptroutes.offload.vk-provider.dev", "default"),
    ],
)
"""What builds the route table (the router, and the xDS server for Envoy) may do, and may not."""
TRAFFIC_RIGHTS = {
    ROUTER: ROUTE_TABLE_RIGHTS,
    XDS: ROUTE_TABLE_RIGHTS,
    CONTROLLER: (
        [
            ("list", "offloads.offload.vk-provider.dev", None),
            ("watch", "offloads.offload.vk-provider.dev", None),
            ("patch", "offloads.offload.vk-provider.dev/status", "default"),
            ("get", "deployments.apps", "default"),
            ("create", "deployments.apps", "default"),
            ("patch", "deployments.apps", "default"),
            ("delete", "deployments.apps", "default"),  # the away side, once a deleted Offload is home
            ("patch", "offloads.offload.vk-provider.dev", "default"),  # its finalizer only
            ("get", "services", "default"),
            ("create", "keptroutes.offload.vk-provider.dev", "default"),  # a deleted Offload's route
            ("delete", "keptroutes.offload.vk-provider.dev", "default"),  # one it took over
            ("watch", "keptroutes.offload.vk-provider.dev", None),
            ("list", "pods", None),
            ("patch", "pods", "default"),  # the deletion cost of a home pod on an unhealthy node
            ("create", "events", "default"),
            ("patch", "events", "default"),  # a repeated Event's count
            ("get", "leases.coordination.k8s.io", NAMESPACE),
            ("create", "leases.coordination.k8s.io", NAMESPACE),
            ("update", "leases.coordination.k8s.io", NAMESPACE),
        ],
        [
            ("delete", "offloads.offload.vk-provider.dev", "default"),
            ("delete", "pods", "default"),
            ("create", "pods", "default"),
            ("get", "secrets", "default"),
            ("create", "leases.coordination.k8s.io", "default"),
            ("update", "leases.coordination.k8s.io", "kube-node-lease"),
            ("patch", "services", "default"),
        ],
    ),
}


def can_i_as(kubectl: Kubectl, user: str, verb: str, resource: str, namespace: str | None) -> str:
    scope = ["-n", namespace] if namespace else ["--all-namespaces"]
    resource, _, subresource = resource.partition("/")
    extra = [f"--subresource={subresource}"] if subresource else []
    result = kubectl("auth", "can-i", verb, resource, *extra, f"--as={user}", *scope, check=False)
    return result.stdout.strip()


@pytest.mark.usefixtures("traffic_rbac")
@pytest.mark.parametrize("user", [ROUTER, XDS, CONTROLLER], ids=["router", "xds", "controller"])
def test_router_and_controller_may_do_what_they_do_and_nothing_more(kubectl: Kubectl, user: str) -> None:
    """Sufficiency is proven by the migration tests, which run both as these ServiceAccounts."""
    needed, forbidden = TRAFFIC_RIGHTS[user]
    missing = [(verb, res) for verb, res, ns in needed if can_i_as(kubectl, user, verb, res, ns) != "yes"]
    excess = [(verb, res) for verb, res, ns in forbidden if can_i_as(kubectl, user, verb, res, ns) != "no"]
    assert missing == []
    assert excess == []


def can_i_by_name(kubectl: Kubectl, user: str, verb: str, secret: str) -> str:
    done = kubectl("auth", "can-i", verb, f"secrets/{secret}", f"--as={user}", "-n", NAMESPACE, check=False)
    return done.stdout.strip()


@pytest.mark.usefixtures("traffic_rbac", "applied_base")
def test_only_the_traffic_key_among_secrets_is_readable_by_router_and_xds(kubectl: Kubectl) -> None:
    """The key that verifies the seals of away addresses: the router and the xDS server read (and
    watch, by name) that Secret alone; the node reads it too, and no one else of ours does."""
    for user in (ROUTER, XDS, SERVICE_ACCOUNT):
        for verb in ("get", "list", "watch") if user != SERVICE_ACCOUNT else ("get",):
            assert can_i_by_name(kubectl, user, verb, "vk-provider-traffic-key") == "yes", (user, verb)
    for user in (ROUTER, XDS):
        assert can_i_by_name(kubectl, user, "get", "another-secret") == "no", user
        assert can_i_by_name(kubectl, user, "update", "vk-provider-traffic-key") == "no", user
    assert can_i_by_name(kubectl, CONTROLLER, "get", "vk-provider-traffic-key") == "no"


PLUGIN_NODE = BASE.parent / "examples" / "grpc-plugin-node"


def test_the_plugin_sidecar_shares_its_socket_with_a_grpc_node(kubectl: Kubectl) -> None:
    """manifests/components/grpc-plugin, as manifests/examples/grpc-plugin-node uses it: the plugin
    container and the node share the socket's folder, and the node's grpc provider names that socket;
    the apiserver accepts the whole (server-side dry run)."""
    rendered = list(yaml.safe_load_all(kubectl("kustomize", str(PLUGIN_NODE)).stdout))
    (deployment,) = [item for item in rendered if item["kind"] == "Deployment"]
    (config,) = [
        item
        for item in rendered
        if item["kind"] == "ConfigMap" and item["metadata"]["name"] == "vk-provider-node"
    ]
    pod = deployment["spec"]["template"]["spec"]
    containers = {container["name"]: container for container in pod["containers"]}
    assert set(containers) == {"node", "plugin"}
    mounts = {
        name: {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
        for name, container in containers.items()
    }
    assert mounts["node"]["plugin-socket"] == mounts["plugin"]["plugin-socket"] == "/run/vk-provider"
    assert {"config", "credentials", "state"} <= mounts["node"].keys()  # the base's mounts are kept
    assert any(volume["name"] == "plugin-socket" and "emptyDir" in volume for volume in pod["volumes"])
    settings = yaml.safe_load(config["data"]["node.yaml"])
    assert settings["provider"] == "grpc"
    socket = settings["provider_config"]["address"]
    assert containers["plugin"]["args"] == ["--address", socket]
    assert socket.startswith("unix:///run/vk-provider/")
    kubectl("apply", "-f", str(BASE / "namespace.yaml"))
    kubectl("apply", "-k", str(PLUGIN_NODE), "--dry-run=server")


NODE_BUILDS = [BASE, *sorted(path for path in (BASE.parent / "examples").iterdir() if path.is_dir())]


@pytest.mark.parametrize("folder", NODE_BUILDS, ids=lambda path: path.name)
def test_each_node_build_serves_the_port_its_probes_ask_and_ships_no_placeholder_secret(
    kubectl: Kubectl, folder: Path
) -> None:
    """An overlay that replaces node.yaml must keep health_port, or its pods fail their probes; no
    build ships a credentials Secret it did not generate from the user's own file."""
    rendered = [item for item in yaml.safe_load_all(kubectl("kustomize", str(folder)).stdout) if item]
    (deployment,) = [item for item in rendered if item["kind"] == "Deployment"]
    (config,) = [item for item in rendered if item["kind"] == "ConfigMap"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "health", probe
    assert yaml.safe_load(config["data"]["node.yaml"])["health_port"] == ports["health"]
    (credentials,) = [
        v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "credentials"
    ]
    assert credentials["secret"] == {"secretName": "vk-provider-credentials", "optional": True}
    secrets = [item for item in rendered if item["kind"] == "Secret"]
    assert all("placeholder" not in (item.get("stringData") or {}) for item in secrets)
    assert [item["metadata"]["name"] for item in secrets] == (
        ["vk-provider-credentials"] if folder.name == "credentials-overlay" else []
    )


def test_the_credentials_overlay_makes_the_secret_the_runpod_node_reads(kubectl: Kubectl) -> None:
    folder = BASE.parent / "examples" / "credentials-overlay"
    rendered = [item for item in yaml.safe_load_all(kubectl("kustomize", str(folder)).stdout) if item]
    (secret,) = [item for item in rendered if item["kind"] == "Secret"]
    (config,) = [item for item in rendered if item["kind"] == "ConfigMap"]
    settings = yaml.safe_load(config["data"]["node.yaml"])
    key_file = Path(settings["provider_config"]["api_key_file"])
    assert settings["provider"] == "runpod"
    assert key_file.parent == Path("/etc/vk-provider/credentials")
    assert set(secret["data"]) == {key_file.name}
    kubectl("apply", "-f", str(BASE / "namespace.yaml"))
    kubectl("apply", "-k", str(folder), "--dry-run=server")
