"""Everything a migration test needs, on the real control plane: two nodes, a service, router, controller.

- a home node: the `local` provider, no taint, labelled as this test's home GPU node;
- an away node: the `local` provider too (standing in for an external GPU provider), or the `runpod`
  provider against a `FakeRunPod` (see `runpod_away`), with the virtual node taint and this test's away
  label;
- the example inference service (`vk_devtools.demo.tokens`) as a Deployment + Service on the home node,
  each replica answering `X-Served-By: <node>/<pod>` so the load generator can tell the sides apart. Its
  container sets `args` only, the image's entrypoint doing the rest, as RunPod requires (it cannot
  override an entrypoint); the `local` nodes are told that entrypoint (`image_entrypoints`);
- an Offload routing Host `chat.test` to it, the router and the controller as real subprocesses;
- with `data_plane="envoy"`, the Offload's traffic goes through Envoy replicas driven by `vk-provider xds`
  (`envoy_plane`), and the controller verifies and judges it there; the router still runs, unused.
  `data_plane="inferencepool"` is the same, the xDS server watching InferencePools too: the test
  creates the pool and its endpoint picker (`inference_plane`) before the Offload can go Idle.

Each node gets a random /24 of the dev pod network (198.19.0.0/16, routed to this host, because the
apiserver refuses loopback addresses in EndpointSlices), so nodes never share an address. Every
replica's `--fail-file` names a file per node: touching the home node's file makes the home side
answer 500s while the away side stays healthy.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import os
import random
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from kubernetes_asyncio import client

from tests.integration.daemons import TRAFFIC_KEY_ARGUMENTS, ManagedProcess, NodeDaemon
from tests.integration.envoy_plane import EnvoyPlane, start_envoy_plane
from tests.integration.identities import service_account_kubeconfig
from tests.integration.inference_plane import PICKER, POOL, PickerPlane, start_picker
from tests.integration.runpod_away import TOKEN_DELAY_SECONDS
from tests.integration.runpod_fleet import runpod_config
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster, localnode, podnetwork, servicenetwork
from vk_devtools.devcluster.ports import PortPicker
from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, RawObject

SYSTEM_NAMESPACE = "vk-provider-system"


def host_for(namespace: str) -> str:
    """The rig's route host: route claims are cluster-wide (the oldest claim of a host wins), so each
    rig claims a host of its own and rigs of tests running at once never conflict."""
    return f"chat.{namespace}.test"


NAME = "chat"
API = "/apis/offload.vk-provider.dev/v1alpha1"
TOKENS_IMAGE = "vk-provider/tokens"
TOKENS_ENTRYPOINT = [sys.executable, "-m", "vk_devtools.demo.tokens"]
"""What the tokens image would run: `local` nodes run it for containers of that image (no command)."""

StartNode = Callable[..., Awaitable[NodeDaemon]]


def _ranges_of_this_process() -> list[int]:
    """/24s below `localnode.FIRST_TEST_SUBNET` belong to development planes, 240 and up are Service
    ranges (devcluster.servicenetwork); the rest is dealt out among the xdist workers of this run
    (every worker_count-th to each), in a random order (so two test runs at once rarely meet), each
    once per run before any comes round again: two nodes of one range would give two pods one
    address, and the router would reach the wrong one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    mine = [
        number
        for number in range(localnode.FIRST_TEST_SUBNET, servicenetwork.FIRST_SUBNET)
        if number % count == int(worker) % count
    ]
    return random.sample(mine, k=len(mine))


_FREE_RANGES = collections.deque(_ranges_of_this_process())


def pod_range() -> str:
    """A /24 of the dev pod network no other node of this run holds (206 nodes before one repeats)."""
    number = _FREE_RANGES.popleft()
    _FREE_RANGES.append(number)
    return str(podnetwork.subnet(number))


BATCH_ARGUMENTS = ("--max-running", "4", "--kv-cache-tokens", "4096")
"""A home replica of an `inferencepool` rig runs 4 completions at once, the rest waiting, as a model
server's batch does: its queue and KV-cache use (its vLLM metrics) are what the endpoint picker scores."""


def token_server_template(
    home_label: dict[str, str], fail_dir: Path, *, batch: bool = False
) -> dict[str, Any]:
    env = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    args = [
        "--host",
        "$(POD_IP)",
        "--port",
        "8080",
        "--name",
        "$(NODE_NAME)/$(POD_NAME)",
        "--token-delay",
        str(TOKEN_DELAY_SECONDS),
        "--fail-file",
        f"{fail_dir}/$(NODE_NAME).fail",
        *(BATCH_ARGUMENTS if batch else ()),
    ]
    return {
        "metadata": {"labels": {"app": NAME}},
        "spec": {
            "nodeSelector": home_label,
            "terminationGracePeriodSeconds": 20,
            "containers": [
                {
                    "name": "server",
                    "image": TOKENS_IMAGE,
                    "args": args,
                    "env": env,
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
                }
            ],
        },
    }


async def create_offloaded_service(
    api: KubeApi,
    namespace: str,
    name: str,
    template: dict[str, Any],
    *,
    replicas: int,
    offload_spec: dict[str, Any],
    offload_labels: dict[str, str] | None = None,
) -> None:
    """Deployment `name` of `template` (its pods labelled app=<name>), Service `name` on port 80 to
    8080, and the Offload `name` of both, placed home, with the rest of its spec from `offload_spec`."""
    template["metadata"]["labels"] = {"app": name}
    await api.create(
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        {
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template},
        },
    )
    await api.create(
        f"/api/v1/namespaces/{namespace}/services",
        {
            "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        },
    )
    metadata: dict[str, Any] = {"name": name}
    if offload_labels:
        metadata["labels"] = offload_labels
    await api.create(
        f"{API}/namespaces/{namespace}/offloads",
        {
            "apiVersion": "offload.vk-provider.dev/v1alpha1",
            "kind": "Offload",
            "metadata": metadata,
            "spec": {"home": {"deployment": name, "service": name}, "placement": "home", **offload_spec},
        },
    )


@dataclasses.dataclass
class Rig:
    namespace: str
    api: KubeApi
    home: NodeDaemon
    away: NodeDaemon
    router: ManagedProcess
    router_url: str
    router_admin_url: str
    """The router's admin listener: `/-/status` and `/-/metrics`, which the controller reads."""
    controller: ManagedProcess
    fail_dir: Path
    envoy: EnvoyPlane | None = None
    more_controller_arguments: tuple[str, ...] = ()
    picker: PickerPlane | None = None
    """The `inferencepool` data plane's endpoint picker (its pool is `inference_plane.POOL`)."""

    @property
    def host(self) -> str:
        return host_for(self.namespace)

    @property
    def lease_name(self) -> str:
        """The controller's leader Lease (in SYSTEM_NAMESPACE): one per rig, so rigs never share a leader."""
        return f"controller-{self.namespace}"[:63]

    @property
    def traffic_url(self) -> str:
        """Where clients send this service's requests: the data plane the Offload names."""
        return self.envoy.listener_url if self.envoy is not None else self.router_url

    async def applied_weight(self) -> int | None:
        """The away weight every replica of the data plane applies (None: not one weight yet)."""
        if self.envoy is not None:
            return await self.envoy.applied_weight(self.namespace, NAME)
        route = await router_route(self)
        return None if route is None else int(route["away_weight"])

    def side_of(self, served_by: str | None) -> str:
        node = (served_by or "").partition("/")[0]
        return {self.home.node_name: "home", self.away.node_name: "away"}.get(node, "unknown")

    def fail_home(self) -> None:
        (self.fail_dir / f"{self.home.node_name}.fail").touch()

    def fail_away(self) -> None:
        """The away side's replicas answer 500s (those running, and those yet to start)."""
        (self.fail_dir / f"{self.away.node_name}.fail").touch()

    async def offload(self) -> RawObject:
        return await self.api.get(f"{API}/namespaces/{self.namespace}/offloads/{NAME}")

    async def patch_offload(self, body: dict[str, Any]) -> RawObject:
        return await self.api.patch(
            f"{API}/namespaces/{self.namespace}/offloads/{NAME}", body, content_type=MERGE_PATCH
        )

    async def deployment(self, name: str) -> RawObject:
        return await self.api.get(f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{name}")

    async def wait_for_phase(self, *phases: str, timeout_seconds: float = 240) -> RawObject:
        async def reached() -> RawObject | None:
            offload = await self.offload()
            return offload if (offload.get("status") or {}).get("phase") in phases else None

        return await wait_for(
            reached,
            timeout_seconds=timeout_seconds,
            what=f"offload phase {phases}; controller log:\n{self.controller.log_tail(30)}",
        )

    def controller_arguments(self, kubeconfig: Path) -> list[str]:
        return [
            "controller",
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            self.namespace,
            "--router-url",
            self.router_admin_url,
            # OffloadPolicies are cluster-scoped: a rig's controller leaves them to the policy tests'.
            "--no-policy",
            # The manifests let the controller hold Leases only in its own namespace.
            "--leader-election-namespace",
            SYSTEM_NAMESPACE,
            "--leader-election-lease-name",
            self.lease_name,
            "--leader-election-lease-duration-seconds",
            "6",
            "--leader-election-retry-period-seconds",
            "2",
            "--log-level",
            "DEBUG",
            *(self.envoy.controller_arguments() if self.envoy is not None else []),
            *self.more_controller_arguments,
        ]

    async def events(self, reason: str) -> list[RawObject]:
        listing = await self.api.get(
            f"/api/v1/namespaces/{self.namespace}/events",
            query={"fieldSelector": f"involvedObject.kind=Offload,reason={reason}"},
        )
        items: list[RawObject] = listing.get("items") or []
        return items


async def build_rig(
    *,
    kube_api: client.ApiClient,
    control_plane: cluster.ClusterState,
    namespace: str,
    start_node: StartNode,
    folder: Path,
    strategy: dict[str, Any],
    home_replicas: int = 2,
    runpod: FakeRunPod | None = None,
    away_settings: dict[str, Any] | None = None,
    data_plane: str = "builtin",
    traffic: dict[str, Any] | None = None,
    controller_arguments: tuple[str, ...] = (),
    router_host: str = "127.0.0.1",
) -> Rig:
    """Start the nodes, the service, the Offload, the router and the controller; wait until all are up.

    With `runpod`, the away node is a `runpod` node whose RunPod is that (started) fake;
    `away_settings` are further node settings for the away node; `data_plane` the Offload's (with
    "envoy", the xDS server and two Envoys are started too); `traffic` further fields of the Offload's
    `spec.traffic`, `controller_arguments` further arguments of the controller, and `router_host`
    the address the router listens on (a gateway in another network namespace must reach it).
    """
    podnetwork.ensure_local_route()
    tag = uuid.uuid4().hex[:6]
    home_label = {"vk-provider.dev/role": f"home-{tag}"}
    away_label = {"vk-provider.dev/role": f"away-{tag}"}

    def local_config() -> dict[str, Any]:  # a fresh address range per node
        return {
            "restart_backoff_initial_seconds": 0.5,
            "restart_backoff_max_seconds": 2,
            "address_range": pod_range(),
            "image_entrypoints": {TOKENS_IMAGE: TOKENS_ENTRYPOINT},
        }

    away_provider, away_config = ("local", local_config())
    if runpod is not None:
        away_provider, away_config = ("runpod", runpod_config(runpod, folder / "runpod"))
    home, away = await asyncio.gather(
        start_node(
            "local",
            node_name=f"home-{tag}",
            no_taint=True,
            labels=home_label,
            provider_config=local_config(),
        ),
        start_node(
            away_provider,
            node_name=f"away-{tag}",
            labels=away_label,
            provider_config=away_config,
            **(away_settings or {}),
        ),
    )
    api = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    try:
        return await _start_rig(
            api,
            kube_api=kube_api,
            control_plane=control_plane,
            namespace=namespace,
            folder=folder,
            strategy=strategy,
            home_replicas=home_replicas,
            nodes=(home, away),
            labels=(home_label, away_label),
            traffic={"dataPlane": data_plane, **_pool_of(data_plane), **(traffic or {})},
            controller_arguments=controller_arguments,
            router_host=router_host,
        )
    except BaseException:
        # Leave nothing that keeps recreating pods: the nodes' teardown waits for their pods to go.
        await _delete_deployments(api, namespace)
        await api.close()
        raise


def _pool_of(data_plane: str) -> dict[str, Any]:
    return {"inferencePool": {"name": POOL}} if data_plane == "inferencepool" else {}


async def _start_rig(
    api: KubeApi,
    *,
    kube_api: client.ApiClient,
    control_plane: cluster.ClusterState,
    namespace: str,
    folder: Path,
    strategy: dict[str, Any],
    home_replicas: int,
    nodes: tuple[NodeDaemon, NodeDaemon],
    labels: tuple[dict[str, str], dict[str, str]],
    traffic: dict[str, Any],
    controller_arguments: tuple[str, ...],
    router_host: str,
) -> Rig:
    home, away = nodes
    home_label, away_label = labels
    fail_dir = folder / "fail"
    fail_dir.mkdir(parents=True, exist_ok=True)
    await create_offloaded_service(
        api,
        namespace,
        NAME,
        token_server_template(home_label, fail_dir, batch=traffic["dataPlane"] == "inferencepool"),
        replicas=home_replicas,
        offload_spec={
            "route": {"hosts": [host_for(namespace)]},
            "away": {"nodeSelector": away_label},
            "strategy": strategy,
            "traffic": traffic,
        },
    )
    # Router and controller run as their ServiceAccounts: the manifests' RBAC must be enough.
    router_kubeconfig, controller_kubeconfig = [
        await service_account_kubeconfig(
            kube_api, control_plane, SYSTEM_NAMESPACE, f"vk-provider-{part}", folder / f"{part}.kubeconfig"
        )
        for part in ("router", "controller")
    ]
    router, router_url, router_admin_url = start_router(
        folder / "router", router_kubeconfig, namespace=namespace, host=router_host
    )
    envoy = None
    if traffic["dataPlane"] in ("envoy", "inferencepool"):
        try:
            xds_kubeconfig = await service_account_kubeconfig(
                kube_api, control_plane, SYSTEM_NAMESPACE, "vk-provider-xds", folder / "xds.kubeconfig"
            )
            envoy = await start_envoy_plane(
                folder / "envoy",
                xds_kubeconfig,
                namespace=namespace,
                inference_pools=traffic["dataPlane"] == "inferencepool",
            )
        except BaseException:
            router.close()
            raise
    picker = None
    if traffic["dataPlane"] == "inferencepool":
        picker = await start_picker(
            api, namespace, app=NAME, node_name=home.node_name, kubeconfig=control_plane.kubeconfig
        )
    rig = Rig(
        namespace=namespace,
        api=api,
        home=home,
        away=away,
        router=router,
        router_url=router_url,
        router_admin_url=router_admin_url,
        controller=ManagedProcess(folder=folder / "controller", arguments=[]),
        fail_dir=fail_dir,
        envoy=envoy,
        more_controller_arguments=controller_arguments,
        picker=picker,
    )
    rig.controller.arguments = rig.controller_arguments(controller_kubeconfig)
    try:
        rig.controller.start()
        await rig.wait_for_phase("Idle", timeout_seconds=60)
        await wait_for_home_endpoints(rig, home_replicas)
    except BaseException:
        for process in (rig.controller, rig.router):
            process.close()
        if rig.envoy is not None:
            rig.envoy.close()
        raise
    return rig


def start_router(
    folder: Path, kubeconfig: Path, *, namespace: str | None = None, host: str = "127.0.0.1"
) -> tuple[ManagedProcess, str, str]:
    """A started router on free ports of `host` (of `namespace`, or the whole cluster): it, its traffic
    URL and its admin URL."""
    picker = PortPicker(host)
    port, admin_port = picker.pick(), picker.pick()
    scope = ["--namespace", namespace] if namespace else []
    router = ManagedProcess(
        folder=folder,
        arguments=[
            "router",
            "--kubeconfig",
            str(kubeconfig),
            *scope,
            "--listen",
            f"{host}:{port}",
            "--admin-listen",
            f"{host}:{admin_port}",
            "--log-level",
            "DEBUG",
            *TRAFFIC_KEY_ARGUMENTS,
        ],
    )
    router.start()
    return router, f"http://{host}:{port}", f"http://{host}:{admin_port}"


async def router_route(rig: Rig) -> dict[str, Any] | None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{rig.router_admin_url}/-/status") as response,
    ):
        document: dict[str, Any] = await response.json()
    return next((route for route in document["routes"] if route["name"] == NAME), None)


async def wait_for_home_endpoints(rig: Rig, count: int) -> None:
    async def usable() -> bool:
        if not rig.router.alive():
            raise AssertionError(f"the router exited:\n{rig.router.log_tail()}")
        route = await router_route(rig) if rig.envoy is None else await rig.envoy.route(rig.namespace, NAME)
        return route is not None and route["endpoints"]["home"]["usable"] >= count

    await wait_for(usable, timeout_seconds=120, what=f"the router to see {count} ready home endpoints")


class RigFor(Protocol):
    """`async with rig_for(strategy, ...) as rig`: this test's rig (see `build_rig`), closed after."""

    def __call__(
        self,
        strategy: dict[str, Any],
        *,
        home_replicas: int = 2,
        runpod: FakeRunPod | None = None,
        away_settings: dict[str, Any] | None = None,
        data_plane: str = "builtin",
        traffic: dict[str, Any] | None = None,
        controller_arguments: tuple[str, ...] = (),
        router_host: str = "127.0.0.1",
    ) -> contextlib.AbstractAsyncContextManager[Rig]: ...


def rig_factory(
    *,
    kube_api: client.ApiClient,
    control_plane: cluster.ClusterState,
    namespace: str,
    start_node: StartNode,
    folder: Path,
) -> RigFor:
    """What the `rig_for` fixture hands a test: `build_rig` bound to the test's plane, namespace and
    folder, as a context manager that closes the rig however the test ends."""

    @contextlib.asynccontextmanager
    async def started(
        strategy: dict[str, Any],
        *,
        home_replicas: int = 2,
        runpod: FakeRunPod | None = None,
        away_settings: dict[str, Any] | None = None,
        data_plane: str = "builtin",
        traffic: dict[str, Any] | None = None,
        controller_arguments: tuple[str, ...] = (),
        router_host: str = "127.0.0.1",
    ) -> AsyncIterator[Rig]:
        rig = await build_rig(
            kube_api=kube_api,
            control_plane=control_plane,
            namespace=namespace,
            start_node=start_node,
            folder=folder,
            strategy=strategy,
            home_replicas=home_replicas,
            runpod=runpod,
            away_settings=away_settings,
            data_plane=data_plane,
            traffic=traffic,
            controller_arguments=controller_arguments,
            router_host=router_host,
        )
        try:
            yield rig
        finally:
            await close_rig(rig)

    return started


async def close_rig(rig: Rig) -> None:
    """Stop the controller and router, and the Deployments, so the nodes' pods can be drained."""
    if rig.picker is not None:
        rig.picker.signal(signal.SIGCONT)  # a stopped picker would not act on the pod's SIGTERM
    for process in (rig.controller, rig.router):
        if process.alive():
            process.stop()
        process.close()
    if rig.envoy is not None:
        rig.envoy.close()
    await _delete_deployments(rig.api, rig.namespace)
    await rig.api.close()


async def _delete_deployments(api: KubeApi, namespace: str) -> None:
    for name in (NAME, f"{NAME}-away", PICKER):
        with contextlib.suppress(KubeApiError):
            await api.delete(
                f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
                {"propagationPolicy": "Foreground"},
            )


def lone_controller(control_plane: cluster.ClusterState, namespace: str, folder: Path) -> ManagedProcess:
    """A controller of `namespace` (not started) whose router is never reachable: for Offloads the
    controller must refuse before anything moves."""
    return ManagedProcess(
        folder=folder,
        arguments=[
            "controller",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--namespace",
            namespace,
            "--router-url",
            "http://127.0.0.1:9",  # never asked: nothing may move
            "--no-policy",  # OffloadPolicies are the policy tests' (cluster-scoped)
            "--leader-election-namespace",
            namespace,
        ],
    )


async def wait_for_not_ready(
    api: KubeApi, offload_path: str, reason: str, controller: ManagedProcess
) -> dict[str, Any]:
    """The Offload's status once its Ready condition is False for `reason`, with the Event recorded."""

    async def reported() -> dict[str, Any] | None:
        status: dict[str, Any] = (await api.get(offload_path)).get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
        return status if ready and ready["reason"] == reason and ready["status"] == "False" else None

    status = await wait_for(
        reported, timeout_seconds=60, what=f"Ready=False {reason}; {controller.log_tail()}"
    )
    namespace = offload_path.split("/namespaces/")[1].split("/", maxsplit=1)[0]

    async def recorded() -> bool:
        # Events are posted apart from the status write, and may land a moment after it.
        events = await api.get(
            f"/api/v1/namespaces/{namespace}/events",
            query={"fieldSelector": f"involvedObject.kind=Offload,reason={reason}"},
        )
        return bool(events["items"])

    await wait_for(recorded, timeout_seconds=30, what=f"a {reason} Event; {controller.log_tail()}")
    return status
