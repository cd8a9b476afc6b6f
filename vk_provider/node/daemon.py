"""The node daemon's composition root: build the parts, start them in order, stop them cleanly.

Start-up order matters: the kubelet port is bound before anything else, so a port already taken
stops the daemon at once, before it creates a certificate request or a Node; the Node is registered
NotReady next (a takeover of a Ready node keeps it
Ready: see `NodeKeeper.register`); the pod watch must have listed everything bound to this node before
the provider's workloads are adopted and before any orphan is considered; only then do the workers
start and the node turn Ready. Every long-running duty is a named task in one TaskGroup, so a crashed
duty brings the daemon down loudly instead of leaving it half alive.

With leader election (the default), all of that runs only in the replica holding the node's leader
Lease (`leadership`); the others wait, and the first to take the Lease over runs it from the top.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from vk_provider import plugins
from vk_provider._kube.combined import Mirror
from vk_provider._kube.events import EventRecorder, InvolvedObject
from vk_provider._kube.kubeconfig import cluster_ca_pem
from vk_provider._kube.references import ApiReferenceReader
from vk_provider.errors import ProviderError
from vk_provider.kit.apibudget import ApiBudget
from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.kube import KubeApi
from vk_provider.kit.probes import Readiness, serve_probes
from vk_provider.kit.traffic_signature import TrafficKey, secret_location
from vk_provider.kubelet.auth import WebhookAuth
from vk_provider.kubelet.certificates import (
    AutoCertificate,
    CsrCertificate,
    SelfSignedCertificate,
    ServingCertificate,
    from_files,
    probe_through_apiserver,
    via_csr,
)
from vk_provider.kubelet.routes import KubeletBackend
from vk_provider.kubelet.server import bind_kubelet_port, serve_kubelet_api
from vk_provider.kubelet.streaming import StreamingBackend
from vk_provider.node import clusterversion, leadership, nodeobject, providerstart, traffickey, watches
from vk_provider.node.keeper import NodeKeeper
from vk_provider.node.metrics import CertificateTimes, DaemonMetrics
from vk_provider.node.pods import PodReconciler, retry_delay
from vk_provider.node.settings import NodeSettings
from vk_provider.provider import (
    PodEventSink,
    PodLifecycle,
    PodRef,
    ProviderContext,
    SupportsAttach,
    SupportsExec,
    SupportsLogs,
    SupportsNodeCapacity,
    SupportsPortForward,
    SupportsStatusPush,
    SupportsUsage,
)
from vk_provider.runtime.queueing import KeyedQueue

logger = logging.getLogger(__name__)


@dataclass
class NodeDaemon:
    """Every part of a running node, built by `assemble` and run by `run_node`."""

    settings: NodeSettings
    api: KubeApi
    provider: PodLifecycle
    events: EventRecorder
    queue: KeyedQueue
    pods: Mirror
    services: Mirror
    keeper: NodeKeeper
    reconciler: PodReconciler
    kubelet: KubeletBackend
    certificate: ServingCertificate
    auth: WebhookAuth | None
    listener: socket.socket | None = None
    """The kubelet port, bound at start-up (`bind_kubelet_port`); None binds it when serving."""


async def _status_flow(daemon: NodeDaemon) -> None:
    """Pushed states wake the pod's reconcile; without push, every pod is re-checked periodically."""
    if isinstance(daemon.provider, SupportsStatusPush):
        try:
            async for state in daemon.provider.watch_states():
                daemon.queue.add(state.ref.uid)
        except Exception as error:  # the node outlives its provider's faults: it polls instead
            logger.warning(
                "node %s: the provider's status push ended (%s); polling every %g s instead",
                daemon.settings.node_name,
                error,
                daemon.settings.status_poll_interval_seconds,
                exc_info=not isinstance(error, ProviderError),
            )
    while True:
        await asyncio.sleep(daemon.settings.status_poll_interval_seconds)
        for uid in list(daemon.pods.objects):
            daemon.queue.add(uid)


def kubelet_backend(
    node_name: str, provider: PodLifecycle, pods: Mirror, metrics: DaemonMetrics, provider_name: str = ""
) -> KubeletBackend:
    """What the kubelet API serves: this node's watch cache, its provider's capabilities, its metrics."""
    return KubeletBackend(
        node_name=node_name,
        node_started_at=datetime.now(UTC),
        bound_pods=lambda: list(pods.objects.values()),
        running_pods=provider.list_pods,
        stream_logs=provider.stream_logs if isinstance(provider, SupportsLogs) else None,
        pod_usage=provider.usage if isinstance(provider, SupportsUsage) else None,
        metrics=metrics.exposition,
        streaming=StreamingBackend(
            provider_name=provider_name or type(provider).__name__,
            exec_in_container=provider.exec_in_container if isinstance(provider, SupportsExec) else None,
            attach_to_container=provider.attach_to_container
            if isinstance(provider, SupportsAttach)
            else None,
            port_forward=provider.port_forward if isinstance(provider, SupportsPortForward) else None,
        ),
    )


def serving_certificate(settings: NodeSettings, api: KubeApi) -> ServingCertificate:
    """The source `serving_certificate` names: a CSR (with `auto`, a self-signed fallback), files or
    the node's own."""
    pki = settings.state_dir / "pki"
    pki.mkdir(parents=True, exist_ok=True)
    client_ca = settings.kubelet_client_ca_file
    if client_ca is None:
        client_ca = pki / "cluster-ca.crt"
        client_ca.write_bytes(cluster_ca_pem(settings.kubeconfig))
    mode = settings.serving_certificate_mode
    if mode == "file":
        assert settings.kubelet_serving_cert_file is not None  # noqa: S101 - settings check the pair
        assert settings.kubelet_serving_key_file is not None  # noqa: S101
        return from_files(
            settings.kubelet_serving_cert_file, settings.kubelet_serving_key_file, client_ca_file=client_ca
        )
    if mode == "self-signed":
        return SelfSignedCertificate(
            node_name=settings.node_name,
            addresses=settings.addresses,
            client_ca_file=client_ca,
            because="serving_certificate self-signed: the node does not ask the cluster for one",
        )

    def csr(ssl_context: ssl.SSLContext | None = None) -> CsrCertificate:
        return via_csr(
            api,
            node_name=settings.node_name,
            addresses=settings.addresses,
            client_ca_file=client_ca,
            state_dir=pki,
            self_approve=settings.kubelet_csr_self_approve,
            ssl_context=ssl_context,
        )

    if mode == "csr":
        return csr()
    return AutoCertificate(
        csr,
        node_name=settings.node_name,
        addresses=settings.addresses,
        client_ca_file=client_ca,
        wait_seconds=settings.serving_certificate_wait_seconds,
    )


def certificate_times(certificate: ServingCertificate) -> CertificateTimes:
    """What the expiry and not-issued alerts read of the serving certificate."""
    return CertificateTimes(
        expires=None if certificate.certificate is None else certificate.certificate.not_valid_after_utc,
        renews=certificate.renew_at,
        requesting_since=certificate.requesting_since(),
    )


async def assemble(
    settings: NodeSettings,
    api: KubeApi,
    provider: PodLifecycle,
    metrics: DaemonMetrics | None = None,
    certificate: ServingCertificate | None = None,
    *,
    listener: socket.socket | None = None,
) -> NodeDaemon:
    """Every part of the node; `certificate` (kept up to date by its owner) is requested here if None."""
    events = EventRecorder(api, host=settings.node_name)
    queue = KeyedQueue()

    async def enqueue(uid: str) -> None:
        queue.add(uid)

    pods = watches.bound_pods(api, settings, enqueue)
    services = watches.services(api, settings)
    provider_capacity = (
        dict(await provider.node_capacity()) if isinstance(provider, SupportsNodeCapacity) else {}
    )
    certificate = certificate or serving_certificate(settings, api)
    metrics = metrics or DaemonMetrics(settings.node_name)
    metrics.set_queue_depth_source(lambda: queue.depth)
    reconciler = PodReconciler(
        api=api,
        settings=settings,
        provider=provider,
        pods=pods,
        reader=ApiReferenceReader(api, services),
        events=events,
        queue=queue,
        node_allocatable=nodeobject.capacity(settings, provider_capacity),
        metrics=metrics,
    )
    return NodeDaemon(
        settings=settings,
        api=api,
        provider=provider,
        events=events,
        queue=queue,
        pods=pods,
        services=services,
        keeper=NodeKeeper(api, settings, provider, events, metrics=metrics, certificate=certificate),
        reconciler=reconciler,
        kubelet=kubelet_backend(settings.node_name, provider, pods, metrics, settings.provider),
        certificate=certificate,
        auth=None
        if settings.insecure_kubelet_api_allow_all
        else WebhookAuth(api, node_name=settings.node_name),
        listener=listener,
    )


async def _run_parts(daemon: NodeDaemon, group: asyncio.TaskGroup, ready: asyncio.Event | None) -> None:
    """Start every duty in order: serving and watching first; workers and Ready once pods are listed."""
    settings = daemon.settings
    group.create_task(
        serve_kubelet_api(
            daemon.kubelet,
            certificate=daemon.certificate,
            auth=daemon.auth,
            host=settings.kubelet_bind_address,
            port=settings.kubelet_port,
            listener=daemon.listener,
        ),
        name="kubelet API",
    )
    group.create_task(daemon.events.run(), name="event poster")
    group.create_task(daemon.services.run(), name="service watch")
    group.create_task(daemon.pods.run(), name="pod watch")
    group.create_task(daemon.keeper.run_heartbeat(), name="lease heartbeat")
    group.create_task(daemon.keeper.run_status(), name="node status")
    group.create_task(daemon.keeper.run_health_checks(), name="provider health")
    await daemon.pods.synced.wait()
    daemon.reconciler.traffic_key = await _traffic_key(daemon)
    adopted = await _adopt(daemon)
    logger.info(
        "pod cache synced: %d pods bound here, %d adopted from the provider",
        len(daemon.pods.objects),
        adopted,
    )
    for index in range(settings.concurrent_pod_reconciles):
        group.create_task(daemon.reconciler.run_worker(), name=f"pod worker {index}")
    group.create_task(_status_flow(daemon), name="pod status flow")
    group.create_task(daemon.reconciler.run_orphan_sweeps(), name="orphan sweeps")
    daemon.keeper.set_ready()
    if ready is not None:
        ready.set()
    logger.info("node %s is ready (provider %s)", settings.node_name, settings.provider)


async def _adopt(daemon: NodeDaemon) -> int:
    """Adopt the provider's workloads, asking again with backoff while the provider fails to list them.

    Workers must not start before adoption, but a provider that cannot answer for a moment at start-up
    (a 5xx, a timeout, an open breaker) must not end the daemon: the node stays NotReady meanwhile.
    """
    settings = daemon.settings
    failures = 0
    while True:
        try:
            return await daemon.reconciler.adopt()
        except ProviderError as error:
            failures += 1
            backoff = jittered_backoff_seconds(
                failures,
                initial_seconds=settings.retry_initial_seconds,
                max_seconds=settings.retry_max_seconds,
            )
            delay = retry_delay(backoff, error)
            logger.warning("listing the provider's pods to adopt failed (%s); again in %.1fs", error, delay)
            await asyncio.sleep(delay)


async def _traffic_key(daemon: NodeDaemon) -> TrafficKey:
    """The key to seal traffic addresses with, before any pod is reconciled (see `traffickey`)."""
    settings = daemon.settings

    def report(message: str) -> None:
        node = settings.node_name
        involved = InvolvedObject("Node", node, "", daemon.keeper.node_uid or node)
        daemon.events.record(involved, "Warning", traffickey.KEY_UNAVAILABLE_REASON, message)

    return await traffickey.wait_for_key(
        daemon.api,
        secret_location(settings.traffic_key_secret),
        report=report,
        initial_seconds=settings.retry_initial_seconds,
        max_seconds=settings.retry_max_seconds,
    )


async def _run_parts_forever(daemon: NodeDaemon, ready: asyncio.Event | None) -> None:
    """Every duty of a running node, until cancelled (a stop, or lost leadership) or one crashes."""
    try:
        async with asyncio.TaskGroup() as group:
            await _run_parts(daemon, group, ready)
    finally:
        daemon.queue.close()


async def _run_the_node(
    settings: NodeSettings,
    api: KubeApi,
    metrics: DaemonMetrics,
    certificate: ServingCertificate,
    ready: asyncio.Event | None,
    *,
    listener: socket.socket,
) -> None:
    """Build the provider and the parts, register the Node, and run it until cancelled.

    The provider is built here, not once per process: it must read its state (what the previous
    leader started) as it is at takeover, and a standby must not hold one that could act.
    """
    context = ProviderContext(
        node_name=settings.node_name,
        config=settings.provider_config,
        host_ip=settings.host_ip,
        state_dir=settings.state_dir / "provider",
    )
    context.state_dir.mkdir(parents=True, exist_ok=True)
    provider = await providerstart.build_provider(settings, api, context)
    try:
        daemon = await assemble(settings, api, provider, metrics, certificate, listener=listener)
        context.pod_events.connect(_pod_event_poster(daemon.events, metrics))
        await daemon.keeper.register()
        await _run_parts_forever(daemon, ready)
    finally:
        await provider.aclose()


async def _lead(
    settings: NodeSettings,
    api: KubeApi,
    metrics: DaemonMetrics,
    certificate: ServingCertificate,
    ready: asyncio.Event | None,
    *,
    listener: socket.socket,
) -> None:
    """Run the node while holding the leader Lease; the elector cancels this when the Lease is lost."""
    acquired = time.monotonic()
    led = asyncio.Event()
    metrics.set_leader(True)
    logger.info("node %s: this replica leads; taking the node over", settings.node_name)

    async def report_takeover() -> None:
        await led.wait()
        seconds = time.monotonic() - acquired
        metrics.observe_takeover(seconds)
        logger.info("node %s: took over in %.2fs (Ready, workloads adopted)", settings.node_name, seconds)
        if ready is not None:
            ready.set()

    reporting = asyncio.create_task(report_takeover(), name="takeover report")
    try:
        await _run_the_node(settings, api, metrics, certificate, led, listener=listener)
    finally:
        reporting.cancel()
        metrics.set_leader(False)
        if ready is not None:
            ready.clear()


async def _beside(*duties: Coroutine[Any, Any, None]) -> None:
    """Run the duties together: one crashing ends them all, loudly."""
    async with asyncio.TaskGroup() as group:
        for duty in duties:
            group.create_task(duty)


async def _until_stopped(stop: asyncio.Event, work: Coroutine[Any, Any, None]) -> None:
    """Run `work` until it ends (its error is raised) or `stop` is set (then it is cancelled)."""
    working = asyncio.create_task(work, name="node")
    stopping = asyncio.create_task(stop.wait(), name="stop signal")
    try:
        done, _ = await asyncio.wait({working, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if working in done:
            working.result()
    finally:
        for task in (working, stopping):
            task.cancel()
        for task in (working, stopping):
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def run_node(
    settings: NodeSettings, *, stop: asyncio.Event, ready: asyncio.Event | None = None
) -> None:
    """Run until `stop` is set. Workloads keep running at the provider after the daemon stops.

    With leader election, the node runs only while this replica holds the Lease, and a stop (or a
    crash) releases the Lease so a standby takes over at once instead of waiting for it to expire.
    """
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    # The provider is built only by a leader; a standby with a misspelt one must not wait to find out.
    if settings.provider not in plugins.available():
        raise plugins.UnknownProviderError(
            f"no provider named {settings.provider!r}; installed: {', '.join(plugins.available()) or 'none'}"
        )
    # Before anything touches the cluster: a taken port must leave no Node and no certificate request.
    # Every replica binds its own port at once, so a standby can serve the moment it takes over.
    listener = bind_kubelet_port(settings.kubelet_bind_address, settings.kubelet_port)
    readiness = Readiness()
    probes = None
    try:
        if settings.health_port:
            probes = await serve_probes(readiness, settings.kubelet_bind_address, settings.health_port)
        await _run_node_on(settings, listener, readiness, stop=stop, ready=ready)
    finally:
        if probes is not None:
            await probes.cleanup()
        listener.close()


async def _run_node_on(
    settings: NodeSettings,
    listener: socket.socket,
    readiness: Readiness,
    *,
    stop: asyncio.Event,
    ready: asyncio.Event | None,
) -> None:
    api = await KubeApi.from_kubeconfig(
        settings.kubeconfig, budget=ApiBudget(qps=settings.api_qps, burst=settings.api_burst)
    )
    # Ready from here on, leader or standby: see `probes` for why a standby counts as Ready.
    readiness.set_ready()
    # Every replica says it, standby too: its log is where an operator looks first.
    await clusterversion.report_cluster_version(api, settings)
    metrics = DaemonMetrics(settings.node_name)
    metrics.set_api_budget_source(api.budget)
    try:
        # The serving certificate is this replica's (it names its address) for the process's whole
        # life: a standby gets it while it waits, so a takeover serves the kubelet API at once.
        certificate = serving_certificate(settings, api)
        metrics.set_serving_certificate_source(
            lambda: (certificate.state.reason, certificate.state.working),
            lambda: certificate.refused_handshakes,
            lambda: certificate_times(certificate),
        )
        keeping_certificate = _beside(
            certificate.run(), certificate.check_acceptance(probe_through_apiserver(api, settings.node_name))
        )
        if not settings.leader_elect:
            node = _run_the_node(settings, api, metrics, certificate, ready, listener=listener)
            await _until_stopped(stop, _beside(keeping_certificate, node))
        else:
            elector = leadership.elector(settings, api)
            logger.info(
                "node %s: %s waits for the leader Lease %s",
                settings.node_name,
                elector.identity,
                leadership.lease_name(settings.node_name),
            )
            try:
                candidate = elector.run(
                    lambda: _lead(settings, api, metrics, certificate, ready, listener=listener)
                )
                await _until_stopped(stop, _beside(keeping_certificate, candidate))
            finally:
                await elector.release()
        logger.info("node %s stopping; workloads keep running at the provider", settings.node_name)
    finally:
        await api.close()


def _pod_event_poster(events: EventRecorder, metrics: DaemonMetrics) -> PodEventSink:
    """The provider's pod Events (`ProviderContext.pod_events`) posted by the node's recorder (which
    logs each), and counted by type and reason."""

    def post(ref: PodRef, kind: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        events.record(InvolvedObject("Pod", ref.name, ref.namespace, ref.uid), kind, reason, message)
        metrics.count_provider_pod_event(kind, reason)

    return post
