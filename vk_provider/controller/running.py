"""`vk-provider controller`: reconcile every Offload while holding the leader Lease.

Work is keyed by `namespace/name` in the runtime's `WorkLoop`, the same one the node runs its pods
with: an Offload is never reconciled by two workers at once, a change while it is being reconciled
queues it again, and each pass says when it wants the next one (a step's interval, a poll while
waiting on replicas). A pass that fails (the apiserver is away, a conflict) comes back after a
capped, jittered backoff; nothing is dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
from aiohttp import web

from vk_provider import __version__
from vk_provider._kube.events import EventRecorder
from vk_provider._kube.informers import CachedApi
from vk_provider._kube.leaderelection import LeaderElector
from vk_provider.controller.claims import RouteClaims
from vk_provider.controller.dataplanes import (
    ENVOY_STATS_PATH,
    BuiltinRouters,
    DataPlane,
    DataPlanes,
    EnvoyFleet,
)
from vk_provider.controller.gatewayapi import GatewayRoutes
from vk_provider.controller.homemetrics import HomeMetrics
from vk_provider.controller.inferencepool import InferencePools
from vk_provider.controller.metrics import CONTENT_TYPE, ControllerMetrics
from vk_provider.controller.reads import cached_reads
from vk_provider.controller.reconciler import Reconciler
from vk_provider.controller.routers import RouterDirectory
from vk_provider.kit.apibudget import ApiBudget
from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject
from vk_provider.kit.kubeconfigs import daemon_kubeconfig
from vk_provider.kit.probes import Readiness, add_probe_routes
from vk_provider.offload.names import (
    CONTROLLER_LEASE,
    CONTROLLER_NAMESPACE,
    ROUTER_ADMIN_PORT,
    VERSION_ANNOTATION,
    offloads_path,
)
from vk_provider.offload.status import RUNNING_PHASES
from vk_provider.policy.controller import DEFAULT_INTERVAL_SECONDS, PolicyController
from vk_provider.policy.metrics import PolicyMetrics
from vk_provider.policy.names import UNHEALTHY_TAINT_KEY
from vk_provider.runtime.flagaliases import add_deprecated_alias
from vk_provider.runtime.flagenvironment import boolean
from vk_provider.runtime.flagtypes import (
    host_port,
    port,
    positive_seconds,
    requests_per_second,
    seconds_with_unit,
    whole_number,
)
from vk_provider.runtime.logsetup import add_log_arguments, configure_logging
from vk_provider.runtime.queueing import Backoff, KeyedQueue, Requeue, WorkLoop
from vk_provider.runtime.signals import until_signalled

logger = logging.getLogger(__name__)

COMPONENT = "vk-provider-controller"


def add_controller_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config, else the pod's ServiceAccount)",
    )
    parser.add_argument("--namespace", help="reconcile only this namespace's Offloads (default: all)")
    parser.add_argument(
        "--router-url",
        action="append",
        dest="router_urls",
        default=[],
        metavar="URL",
        help="a router replica's admin base URL (its --admin-listen), repeatable (default: none; the "
        "router pods are found by --router-namespace and --router-selector)",
    )
    parser.add_argument(
        "--router-namespace", default="vk-provider-system", help="namespace of the router pods"
    )
    parser.add_argument(
        "--router-selector",
        default="app.kubernetes.io/name=vk-provider-router",
        help="label selector of the router pods",
    )
    parser.add_argument(
        "--router-port",
        type=port,
        default=ROUTER_ADMIN_PORT,
        help=f"the router pods' admin port, which answers status and metrics (default: {ROUTER_ADMIN_PORT})",
    )
    envoy = parser.add_argument_group(
        "the envoy data plane",
        "Offloads with spec.traffic.dataPlane: envoy (only when --envoy-xds-url is given)",
    )
    envoy.add_argument(
        "--envoy-xds-url",
        metavar="URL",
        help="base URL of `vk-provider xds`'s --admin-listen, which says what every Envoy has applied "
        "(default: none, no envoy data plane)",
    )
    envoy.add_argument(
        "--envoy-stats-url",
        action="append",
        dest="envoy_stats_urls",
        default=[],
        metavar="URL",
        help="an Envoy replica's stats listener base URL, repeatable (default: none; the Envoy pods are "
        "found by --envoy-namespace and --envoy-selector)",
    )
    envoy.add_argument("--envoy-namespace", default="vk-provider-system", help="namespace of the Envoy pods")
    envoy.add_argument(
        "--envoy-selector",
        default="app.kubernetes.io/name=vk-provider-envoy",
        help="label selector of the Envoy pods",
    )
    envoy.add_argument(
        "--envoy-expected-count",
        type=positive_count,
        metavar="N",
        help="wait, at each step, for N connected Envoys whatever their node ids (default: the Envoy pods "
        "found by --envoy-selector, by name, or as many as --envoy-stats-url are given); any other "
        "client of the xDS server is a stray, which no step waits for",
    )
    envoy.add_argument(
        "--envoy-stats-port",
        type=port,
        default=9902,
        help="the Envoy pods' stats listener port (default: 9902)",
    )
    gateway = parser.add_argument_group(
        "the gatewayapi data plane",
        "Offloads with spec.traffic.dataPlane: gatewayapi (only with --gateway-api); the away Service "
        "is the router, found by the --router-* options",
    )
    gateway.add_argument(
        "--gateway-api",
        action="store_true",
        help="drive HTTPRoute weights (the controller's ServiceAccount must be allowed to update httproutes)",
    )
    gateway.add_argument(
        "--gateway-url",
        action="append",
        dest="gateway_urls",
        default=[],
        metavar="URL",
        help="a gateway replica's base URL to probe, repeatable (default: none; the gateway pods are "
        "found by --gateway-namespace and --gateway-selector)",
    )
    gateway.add_argument(
        "--gateway-namespace", help="namespace of the gateway pods to probe (default: every namespace)"
    )
    gateway.add_argument(
        "--gateway-selector",
        help="label selector of the gateway pods to probe (default: none: without it and --gateway-url, "
        "only the route's Accepted condition is checked)",
    )
    gateway.add_argument(
        "--gateway-port", type=port, default=80, help="the gateway pods' HTTP listener port (default: 80)"
    )
    gateway.add_argument(
        "--gateway-prometheus-url",
        metavar="URL",
        help="Prometheus that scrapes the gateway (and the routers): the home side's gate numbers "
        "(default: none)",
    )
    parser.add_argument(
        "--concurrent-reconciles",
        type=whole_number(1),
        default=16,
        metavar="N",
        help="Offloads reconciled at once (default: 16)",
    )
    parser.add_argument(
        "--api-qps",
        type=requests_per_second,
        default=0.0,
        metavar="QPS",
        help="hard ceiling on requests a second to the apiserver (watches excluded); below it the "
        "controller slows down on the apiserver's 429s, and its --concurrent-reconciles bound how many "
        "requests it has in flight. 0 = no ceiling (default: 0)",
    )
    parser.add_argument(
        "--api-burst",
        type=whole_number(0),
        default=0,
        metavar="N",
        help="requests the --api-qps ceiling lets through at once (default: 0 = --api-qps)",
    )
    add_leader_election_arguments(parser)
    parser.add_argument(
        "--admin-listen",
        type=host_port,
        metavar="HOST:PORT",
        help="serve /metrics, and the probes /healthz and /readyz, there (default: not served)",
    )
    parser.add_argument(
        "--no-policy",
        dest="policy",
        action="store_false",
        help="do not run the OffloadPolicy loop (GPU-pressure flips) beside the migrations",
    )
    parser.add_argument(
        "--policy-interval-seconds",
        type=positive_seconds,
        metavar="SECONDS",
        default=DEFAULT_INTERVAL_SECONDS,
        help=f"seconds between passes of the OffloadPolicy loop (default: {DEFAULT_INTERVAL_SECONDS:g})",
    )
    parser.add_argument(
        "--unhealthy-taint-key",
        default=UNHEALTHY_TAINT_KEY,
        help="the taint of home nodes judged unhealthy (an OffloadPolicy's spec.health.taint.key): home pods "
        f"on such a node are replaced on healthy nodes, and a move home never serves from them "
        f"(default: {UNHEALTHY_TAINT_KEY})",
    )
    add_log_arguments(parser)
    add_deprecated_alias(parser, "--workers", "--concurrent-reconciles")
    add_deprecated_alias(parser, "--metrics-listen", "--admin-listen")
    add_deprecated_alias(parser, "--policy-interval", "--policy-interval-seconds", convert=seconds_with_unit)


LEASE_DURATION_SECONDS = 15.0
RETRY_PERIOD_SECONDS = 5.0


def add_leader_election_arguments(parser: argparse.ArgumentParser) -> None:
    """The node's names, for the same things: `--leader-elect`, `--leader-election-*`."""
    parser.add_argument(
        "--leader-elect",
        type=boolean,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="reconcile only while holding the leader Lease, so replicas can stand by; false: reconcile "
        "at once, for a single replica only (two would act on the same Offloads) (default: true)",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=CONTROLLER_NAMESPACE,
        help=f"namespace of the leader Lease (default: {CONTROLLER_NAMESPACE})",
    )
    parser.add_argument(
        "--leader-election-lease-name",
        default=CONTROLLER_LEASE,
        help=f"name of the leader Lease (default: {CONTROLLER_LEASE})",
    )
    parser.add_argument(
        "--leader-election-identity",
        help="this replica's name in the Lease, unique among the replicas (default: host name + random); "
        "the pod's name lets a restarted container take its own Lease back at once",
    )
    parser.add_argument(
        "--leader-election-lease-duration-seconds",
        type=positive_seconds,
        default=LEASE_DURATION_SECONDS,
        metavar="SECONDS",
        help="seconds a standby waits after the leader's last renewal before taking over "
        f"(default: {LEASE_DURATION_SECONDS:g})",
    )
    parser.add_argument(
        "--leader-election-renew-deadline-seconds",
        type=positive_seconds,
        metavar="SECONDS",
        help="seconds the leader keeps leading without renewing the Lease (default: the lease duration "
        "less the retry period)",
    )
    parser.add_argument(
        "--leader-election-retry-period-seconds",
        type=positive_seconds,
        default=RETRY_PERIOD_SECONDS,
        metavar="SECONDS",
        help=f"seconds between Lease renewals and takeover attempts (default: {RETRY_PERIOD_SECONDS:g})",
    )
    add_deprecated_alias(parser, "--lease-name", "--leader-election-lease-name")
    add_deprecated_alias(parser, "--identity", "--leader-election-identity")
    add_deprecated_alias(
        parser, "--lease-duration", "--leader-election-lease-duration-seconds", convert=seconds_with_unit
    )
    add_deprecated_alias(
        parser, "--lease-renew", "--leader-election-retry-period-seconds", convert=seconds_with_unit
    )


def leader_election_problem(arguments: argparse.Namespace) -> str | None:
    """Why the leader election's timings cannot work together, or None. The same rule as the node's:
    retry period < renew deadline < lease duration, or a standby could take over from a leader that
    still acts."""
    lease = arguments.leader_election_lease_duration_seconds
    retry = arguments.leader_election_retry_period_seconds
    deadline = arguments.leader_election_renew_deadline_seconds
    if deadline is None:
        deadline = lease - retry
    if not 0 < retry < deadline < lease:
        return (
            "--leader-election-retry-period-seconds must be shorter than the renew deadline, and the "
            "renew deadline (--leader-election-renew-deadline-seconds, default: the lease duration less "
            "the retry period) shorter than --leader-election-lease-duration-seconds"
        )
    return None


async def serve_metrics(
    metrics: ControllerMetrics, host: str, port: int, readiness: Readiness | None = None
) -> web.AppRunner:
    """`/metrics`, and the pod's probes `/healthz` and `/readyz` (see `kit.probes`) on the same port.

    `/metrics?name[]=...` answers only the series of those names, as prometheus_client's own handler
    does: with a thousand Offloads the whole exposition is some 19,000 series, and a tool that follows
    one figure (the scale rig, the work queue's depth every 2 s) made the controller write them all."""

    async def exposition(request: web.Request) -> web.Response:
        response = web.Response(body=metrics.exposition(request.query.getall("name[]", [])))
        response.headers["Content-Type"] = CONTENT_TYPE
        return response

    app = web.Application()
    app.router.add_get("/metrics", exposition)
    add_probe_routes(app, readiness or Readiness())
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


class Controller:
    def __init__(
        self,
        reads: CachedApi,
        reconciler: Reconciler,
        *,
        namespace: str | None,
        workers: int,
        claims: RouteClaims | None = None,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self._claims = claims
        self._queue = KeyedQueue(
            on_wait=metrics.queue_waited if metrics is not None else None, priority=self._urgency
        )
        self._loop = WorkLoop(
            self._queue,
            self._reconcile,
            backoff=Backoff(initial_seconds=0.5, max_seconds=30.0),
            what="offload",
            expected_errors=(KubeApiError, aiohttp.ClientError, OSError, TimeoutError),
            on_pass=metrics.pass_took if metrics is not None else None,
        )
        if metrics is not None:
            metrics.set_queue_depth_source(lambda: self._queue.depth)
        self._reconciler = reconciler
        self._workers = workers
        self._keys: dict[str, str] = {}
        self._namespace = namespace
        # The reconciler reads Offloads from this very mirror: a pass queued by a change reads that change.
        # It may hold every namespace's (the policy reads them all): only ours are queued.
        self._offloads = reads.informers.watch(offloads_path(namespace), self._changed)
        self.offloads = self._offloads.reflector

    async def _changed(self, uid: str) -> None:
        offload = self.offloads.objects.get(uid)
        if offload is not None:
            metadata = offload["metadata"]
            if self._namespace is not None and metadata.get("namespace") != self._namespace:
                return
            self._keys[uid] = f"{metadata['namespace']}/{metadata['name']}"
        key = self._keys.get(uid)
        if key is not None:
            self._queue.add(key)
        if offload is None:
            self._keys.pop(uid, None)

    def _urgency(self, key: str) -> int:
        """0 for an Offload with work to do now (a migration under way, a spec not yet acted on, a
        deletion), 1 for one only watched: in a wave of 100 migrations among 1,000 Offloads, the
        watched ones' passes every few seconds queued the steps behind them (16.7 s, p50)."""
        namespace, _, name = key.partition("/")
        offload = self._offloads.get((namespace, name))
        return 0 if offload is None or has_work(offload) else 1

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tasks:
                if self._claims is not None:
                    tasks.create_task(self._claims.run(self._queue.add))
                for number in range(self._workers):
                    tasks.create_task(self._loop.run_worker(), name=f"worker-{number}")
        finally:
            self._queue.close()

    async def _reconcile(self, key: str) -> Requeue:
        namespace, name = key.split("/", 1)
        return await self._reconciler.reconcile(namespace, name)


def has_work(offload: RawObject) -> bool:
    metadata = offload.get("metadata") or {}
    status = offload.get("status") or {}
    return (
        bool(metadata.get("deletionTimestamp"))
        or status.get("observedGeneration") != metadata.get("generation")
        or status.get("phase") in RUNNING_PHASES  # a StrEnum: its members equal their strings
    )


def leader_elector(api: KubeApi, arguments: argparse.Namespace, identity: str) -> LeaderElector:
    return LeaderElector(
        api,
        namespace=arguments.leader_election_namespace,
        name=arguments.leader_election_lease_name,
        identity=identity,
        lease_seconds=arguments.leader_election_lease_duration_seconds,
        renew_seconds=arguments.leader_election_retry_period_seconds,
        renew_deadline_seconds=arguments.leader_election_renew_deadline_seconds,
        annotations={VERSION_ANNOTATION: __version__},
    )


async def leading(
    arguments: argparse.Namespace, elector: LeaderElector, lead: Callable[[], Coroutine[Any, Any, None]]
) -> None:
    """`lead` while this replica holds the Lease, or at once and for good with --leader-elect=false."""
    if not arguments.leader_elect:
        logger.info(
            "controller %s reconciles without a leader Lease (--leader-elect=false)", elector.identity
        )
        await lead()
        return
    # A standby says so: otherwise its log stays empty until it leads, which looks like a hang.
    logger.info(
        "controller %s waits for the leader Lease %s/%s",
        elector.identity,
        arguments.leader_election_namespace,
        arguments.leader_election_lease_name,
    )
    await elector.run(lead)


async def lead_term(
    api: KubeApi,
    arguments: argparse.Namespace,
    *,
    reads: CachedApi,
    data_planes: DataPlanes,
    events: EventRecorder,
    metrics: ControllerMetrics,
    policy_metrics: PolicyMetrics,
) -> None:
    """Reconcile Offloads (and run the policy) for one leader term, until cancelled."""
    # Route claims conflict across namespaces: watched cluster-wide whatever --namespace says.
    claims = RouteClaims(api, namespace=arguments.namespace, informers=reads.informers)
    reconciler = Reconciler(
        reads,
        data_planes,
        events,
        claims=claims,
        metrics=metrics,
        unhealthy_taint_key=arguments.unhealthy_taint_key,
    )
    controller = Controller(
        reads,
        reconciler,
        namespace=arguments.namespace,
        workers=arguments.concurrent_reconciles,
        claims=claims,
        metrics=metrics,
    )
    try:
        if not arguments.policy:
            await controller.run()
            return
        # The policy acts only while this replica leads: it is cancelled with the migrations.
        policy = PolicyController(
            reads, events, metrics=policy_metrics, interval_seconds=arguments.policy_interval_seconds
        )
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(controller.run(), name="offloads")
            tasks.create_task(policy.run(), name="policy")
    finally:
        # The mirrors end with the term (a standby neither watches nor holds them); the next term's
        # first reads start them again.
        await reads.close()
        # What a standby exported would stay frozen at its last leading moment: gone instead.
        metrics.forget_offloads()
        policy_metrics.forget_policies()


async def serve_controller(arguments: argparse.Namespace, stop: asyncio.Event) -> None:
    budget = ApiBudget(qps=arguments.api_qps, burst=arguments.api_burst)
    api = await KubeApi.from_kubeconfig(arguments.kubeconfig, budget=budget)
    identity = arguments.leader_election_identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
    events = EventRecorder(api, host=identity, component=COMPONENT)
    metrics = ControllerMetrics()  # kept across leader terms: counters only grow
    metrics.set_api_budget_source(api.budget)
    # Reads of what is watched come from mirrors, the data planes' lists of router pods included.
    reads = cached_reads(api, namespace=arguments.namespace, policy=arguments.policy)
    data_planes = configured_data_planes(reads, arguments, metrics)
    elector = leader_elector(api, arguments, identity)

    metrics.set_leader_source(elector.leading.is_set if arguments.leader_elect else lambda: True)
    policy_metrics = PolicyMetrics(metrics.registry)
    metrics_runner = None
    readiness = Readiness(reason="starting: no answer from the apiserver about the leader Lease yet")
    if arguments.admin_listen is not None:
        host, port_number = arguments.admin_listen
        metrics_runner = await serve_metrics(metrics, host, port_number, readiness=readiness)

    async def become_ready() -> None:
        # Ready once the Lease was read or written: the replica leads or stands by, either of which is
        # its job (a leader-only readiness would leave standbys unready and stall every rollout).
        if arguments.leader_elect:
            await elector.answered.wait()
        readiness.set_ready()

    async def lead() -> None:
        await lead_term(
            api,
            arguments,
            reads=reads,
            data_planes=data_planes,
            events=events,
            metrics=metrics,
            policy_metrics=policy_metrics,
        )

    tasks = [
        asyncio.create_task(events.run(), name="events"),
        asyncio.create_task(leading(arguments, elector, lead), name="leading"),
    ]
    # Not among `tasks`: it ends once Ready, which must not end the controller.
    readying = asyncio.create_task(become_ready(), name="readiness")
    try:
        stopping = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({*tasks, stopping}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stopping:
                task.result()
    finally:
        for task in (*tasks, readying):
            task.cancel()
        await asyncio.gather(*tasks, readying, return_exceptions=True)
        if arguments.leader_elect:
            await elector.release()
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        await data_planes.close()
        await api.close()


def positive_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return count


def configured_data_planes(
    api: KubeApi, arguments: argparse.Namespace, metrics: ControllerMetrics | None = None
) -> DataPlanes:
    """The built-in routers always; Envoy when the command line says where its xDS server is; HTTPRoute
    weights with --gateway-api."""

    def routers() -> RouterDirectory:
        return RouterDirectory(
            api,
            urls=arguments.router_urls,
            namespace=arguments.router_namespace,
            selector=arguments.router_selector,
            port=arguments.router_port,
        )

    planes: list[DataPlane] = [BuiltinRouters(routers())]
    if arguments.gateway_api:
        gateways = None
        if arguments.gateway_urls or arguments.gateway_selector:
            gateways = RouterDirectory(
                api,
                urls=arguments.gateway_urls,
                namespace=arguments.gateway_namespace,
                selector=arguments.gateway_selector,
                port=arguments.gateway_port,
                kind="gateway",
            )
        prometheus = arguments.gateway_prometheus_url
        home_metrics = HomeMetrics(prometheus) if prometheus else None
        planes.append(GatewayRoutes(api, routers(), gateways=gateways, home_metrics=home_metrics))
    if arguments.envoy_xds_url:

        def admins() -> RouterDirectory:
            return RouterDirectory(
                api,
                urls=arguments.envoy_stats_urls,
                namespace=arguments.envoy_namespace,
                selector=arguments.envoy_selector,
                port=arguments.envoy_stats_port,
                metrics_path=ENVOY_STATS_PATH,
                kind="envoy",
            )

        strays_seen = metrics.envoy_strays if metrics is not None else None
        expected = arguments.envoy_expected_count
        planes.append(
            EnvoyFleet(arguments.envoy_xds_url, admins(), expected_count=expected, strays_seen=strays_seen)
        )
        # The same Envoys, for the Offloads whose home side is an InferencePool.
        planes.append(
            InferencePools(
                api, arguments.envoy_xds_url, admins(), expected_count=expected, strays_seen=strays_seen
            )
        )
    return DataPlanes(*planes)


def run_controller_command(arguments: argparse.Namespace) -> int:
    problem = leader_election_problem(arguments)
    if problem is not None:
        print(f"vk-provider controller: error: {problem}", file=sys.stderr)
        return 2
    configure_logging(arguments.log_level, arguments.log_format)
    arguments.kubeconfig = daemon_kubeconfig(arguments.kubeconfig)  # KubeconfigError: one line, exit 1

    async def main(stop: asyncio.Event) -> None:
        await serve_controller(arguments, stop)

    asyncio.run(until_signalled(main))
    return 0
