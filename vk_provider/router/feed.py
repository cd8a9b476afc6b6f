"""Keep the router's table in step with the cluster: watch Offloads, EndpointSlices and away pods.

Three reflectors mirror the objects `build_routes` needs; any change wakes one rebuild task, which
rebuilds the whole table from the mirrors and swaps it in when it differs from the one applied. A
burst of changes (a Deployment scaling ten pods) costs a few rebuilds, not one per event, because the
task rebuilds from the latest state each time it wakes. Rebuilding everything is cheap next to the
network: a cluster has tens of Offloads, not tens of thousands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from vk_provider._kube.watching import Reflector
from vk_provider.kit.kube import KubeApi, resource_path
from vk_provider.offload.names import OFFLOAD_LABEL, offloads_path
from vk_provider.router.building import SERVICE_NAME_LABEL, SkippedOffload, build_routes
from vk_provider.router.table import RouteTable

logger = logging.getLogger(__name__)


class TableFeed:
    """Mirrors what the routes depend on and hands each new table to `apply`.

    `namespace` limits every watch to one namespace (None: the whole cluster). `synced` is set once
    all three mirrors hold their first list and the first table has been applied.
    """

    def __init__(
        self,
        api: KubeApi,
        apply: Callable[[RouteTable], None],
        *,
        namespace: str | None = None,
    ) -> None:
        self._apply = apply
        self._wake = asyncio.Event()
        self.synced = asyncio.Event()
        self.table = RouteTable()
        self.skipped: tuple[SkippedOffload, ...] = ()
        self.rebuilds = 0
        self.offloads = Reflector(
            api,
            offloads_path(namespace),
            query={},
            on_change=self._changed,
            description="offloads",
        )
        self.endpoint_slices = Reflector(
            api,
            resource_path("discovery.k8s.io/v1", "endpointslices", namespace=namespace),
            query={"labelSelector": SERVICE_NAME_LABEL},
            on_change=self._changed,
            description="endpoint slices",
        )
        self.away_pods = Reflector(
            api,
            resource_path("v1", "pods", namespace=namespace),
            query={"labelSelector": OFFLOAD_LABEL},
            on_change=self._changed,
            description="away pods",
        )
        self._reflectors = (self.offloads, self.endpoint_slices, self.away_pods)

    async def _changed(self, _uid: str) -> None:
        self._wake.set()

    def rebuild(self) -> bool:
        """Build the table from the mirrors; apply it if it changed. Returns whether it did."""
        result = build_routes(
            self.offloads.objects.values(),
            self.endpoint_slices.objects.values(),
            self.away_pods.objects.values(),
        )
        self.rebuilds += 1
        for skipped in set(result.skipped) - set(self.skipped):
            logger.warning("offload %s left out of the route table: %s", skipped.key, skipped.reason)
        self.skipped = result.skipped
        if result.table == self.table:
            return False
        self.table = result.table
        self._apply(result.table)
        return True

    async def run(self) -> None:
        """Watch and rebuild until cancelled."""
        async with asyncio.TaskGroup() as tasks:
            for reflector in self._reflectors:
                tasks.create_task(reflector.run())
            tasks.create_task(self._rebuild_on_change())

    async def _rebuild_on_change(self) -> None:
        for reflector in self._reflectors:
            await reflector.synced.wait()
        self.rebuild()
        self.synced.set()
        logger.info("route table loaded: %d routes", len(self.table.routes))
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self.rebuild():
                logger.info(
                    "route table updated: %s",
                    ", ".join(f"{route.key} away={route.away_weight}%" for route in self.table.routes)
                    or "no routes",
                )
