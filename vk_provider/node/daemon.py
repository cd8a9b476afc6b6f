"""The node daemon's composition root: build the parts, start them in order, stop them cleanly.

Start-up order matters: the Node is registered NotReady first; the pod watch must have listed
everything bound to this node before the provider's workloads are adopted and before any orphan is
considered; only then do the workers start and the node turn Ready. Every long-running duty is a named
task in one TaskGroup, so a crashed duty brings the daemon down loudly instead of leaving it half alive.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from vk_provider._kube.api import KubeApi, RateLimiter
from vk_provider._kube.events import EventRecorder
from vk_provider._kube.references import ApiReferenceReader
from vk_provider._kube.watching import Reflector
from vk_provider.node import nodeobject, plugins
from vk_provider.node.keeper import NodeKeeper
from vk_provider.node.pods import PodReconciler
from vk_provider.node.queueing import KeyedQueue
from vk_provider.node.settings import NodeSettings
from vk_provider.provider import ProviderContext, SupportsNodeCapacity, SupportsStatusPush

logger = logging.getLogger(__name__)


class _Stopped(Exception):
    """Raised inside the task group to end it when a stop was requested."""


@dataclass
class NodeDaemon:
    """The running parts, exposed so tests and the kubelet API can look inside."""

    settings: NodeSettings
    api: KubeApi
    keeper: NodeKeeper
    reconciler: PodReconciler
    pods: Reflector
    queue: KeyedQueue


async def _status_flow(daemon: NodeDaemon, provider: object) -> None:
    """Pushed states wake the pod's reconcile; without push, every pod is re-checked periodically."""
    if isinstance(provider, SupportsStatusPush):
        async for state in provider.watch_states():
            daemon.queue.add(state.ref.uid)
    while True:
        await asyncio.sleep(daemon.settings.status_poll_interval_seconds)
        for uid in list(daemon.pods.objects):
            daemon.queue.add(uid)


async def run_node(
    settings: NodeSettings, *, stop: asyncio.Event, ready: asyncio.Event | None = None
) -> None:
    """Run until `stop` is set. Workloads keep running at the provider after the daemon stops."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    context = ProviderContext(
        node_name=settings.node_name,
        config=settings.provider_config,
        host_ip=settings.host_ip,
        state_dir=settings.state_dir / "provider",
    )
    context.state_dir.mkdir(parents=True, exist_ok=True)
    provider = plugins.build(settings.provider, context)
    api = await KubeApi.from_kubeconfig(
        settings.kubeconfig, limiter=RateLimiter(settings.api_qps, settings.api_burst)
    )
    try:
        events = EventRecorder(api, host=settings.node_name)
        queue = KeyedQueue()

        async def enqueue(uid: str) -> None:
            queue.add(uid)

        async def ignore(uid: str) -> None:
            return None

        pods = Reflector(
            api,
            "/api/v1/pods",
            query={"fieldSelector": f"spec.nodeName={settings.node_name}"},
            on_change=enqueue,
            description=f"pods bound to {settings.node_name}",
        )
        services = Reflector(api, "/api/v1/services", query={}, on_change=ignore, description="services")
        provider_capacity = (
            dict(await provider.node_capacity()) if isinstance(provider, SupportsNodeCapacity) else {}
        )
        keeper = NodeKeeper(api, settings, provider, events)
        reconciler = PodReconciler(
            api=api,
            settings=settings,
            provider=provider,
            pods=pods,
            reader=ApiReferenceReader(api, services),
            events=events,
            queue=queue,
            node_allocatable=nodeobject.capacity(settings, provider_capacity),
        )
        daemon = NodeDaemon(settings, api, keeper, reconciler, pods, queue)
        await keeper.register()

        async def stop_when_asked() -> None:
            await stop.wait()
            raise _Stopped

        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(stop_when_asked(), name="stop signal")
                group.create_task(events.run(), name="event poster")
                group.create_task(services.run(), name="service watch")
                group.create_task(pods.run(), name="pod watch")
                group.create_task(keeper.run_heartbeat(), name="lease heartbeat")
                group.create_task(keeper.run_status(), name="node status")
                group.create_task(keeper.run_health_checks(), name="provider health")
                await pods.synced.wait()
                adopted = await reconciler.adopt()
                logger.info(
                    "pod cache synced: %d pods bound here, %d adopted from the provider",
                    len(pods.objects),
                    adopted,
                )
                for index in range(settings.pod_workers):
                    group.create_task(reconciler.run_worker(), name=f"pod worker {index}")
                group.create_task(_status_flow(daemon, provider), name="pod status flow")
                group.create_task(reconciler.run_orphan_sweeps(), name="orphan sweeps")
                keeper.set_ready()
                if ready is not None:
                    ready.set()
                logger.info("node %s is ready (provider %s)", settings.node_name, settings.provider)
        except* _Stopped:
            logger.info("node %s stopping; workloads keep running at the provider", settings.node_name)
        finally:
            queue.close()
    finally:
        await provider.aclose()
        await api.close()
