"""The data planes an Offload's traffic moves on, behind the one interface the migrations use.

Flagger's shape: a router that applies weights and an observer that reads each side's requests,
errors and latency. The weight itself is written once, into the Offload's status (`awayWeight`),
which both our router and the xDS server watch; what differs per data plane is how "every replica
applies it" is verified and where the gates' numbers come from:

- `builtin`: each router replica's `/-/status` and `/-/metrics`.
- `envoy`: the xDS server's `/-/status`, which says which weight every connected Envoy has ACKed
  (exact: an expected replica that has not ACKed the version carrying the weight holds the step
  back, named; a client nobody expects does not),
  and each Envoy replica's per-cluster statistics (`/stats/prometheus`).
- `gatewayapi` (`vk_provider.controller.gatewayapi`): the weight is also written into an HTTPRoute
  (`apply`), verified by the route's status and a probe of each gateway replica.

An Offload picks its data plane (`spec.traffic.dataPlane`); one the controller was not configured
for is a condition and an Event on the Offload, and nothing moves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import aiohttp

from vk_provider.controller import expectedenvoys
from vk_provider.controller.envoystats import envoy_side_key, envoy_side_samples
from vk_provider.controller.gates import SideSample
from vk_provider.controller.routers import REQUEST_TIMEOUT, RouterDirectory, RouterUnreachable, RouteView
from vk_provider.controller.sideindex import RouteSide, SideIndexes, router_side_samples
from vk_provider.offload.spec import OffloadSpec

logger = logging.getLogger(__name__)

ENVOY_STATS_PATH = "/stats/prometheus?usedonly"
"""Envoy's statistics in Prometheus' format, only those that have counted something (a few kB
instead of every cluster's hundreds of zero series)."""


STRAYS_NAMED = 5
"""Node ids a stray warning names at most: a client chooses its own, and may choose many."""


class DataPlaneNotConfigured(Exception):
    """The Offload names a data plane this controller was not started with."""


class DataPlane(Protocol):
    name: str

    async def check(self, spec: OffloadSpec) -> None:
        """Raise RouteProblem when the data plane cannot carry this Offload as configured."""

    async def apply(self, spec: OffloadSpec, weight: int) -> None:
        """Make the data plane carry `weight` (a no-op where it reads the Offload's status itself)."""

    async def views(self, spec: OffloadSpec) -> list[RouteView]:
        """Every replica's view of the route; RouterUnreachable when one cannot be asked."""

    async def samples(self, spec: OffloadSpec, side: str) -> dict[str, SideSample]:
        """Each replica's counters of one side of the route, by replica; RouterUnreachable likewise."""

    def measures(self, side: str) -> bool:
        """Whether `samples` can count this side (the gates compare the sides only where both are)."""

    async def close(self) -> None: ...


class BuiltinRouters:
    """Our router replicas: they report what they apply and count what they serve themselves."""

    name = "builtin"

    def __init__(self, routers: RouterDirectory) -> None:
        self._routers = routers
        self._indexes: SideIndexes[RouteSide] = SideIndexes(router_side_samples)

    async def check(self, spec: OffloadSpec) -> None:
        return None

    async def apply(self, spec: OffloadSpec, weight: int) -> None:
        return None  # the routers watch the Offload's status

    async def views(self, spec: OffloadSpec) -> list[RouteView]:
        return await self._routers.views(spec.namespace, spec.name)

    async def samples(self, spec: OffloadSpec, side: str) -> dict[str, SideSample]:
        urls = await self._routers.urls()
        texts = await self._routers.metrics()
        self._indexes.keep_only(set(urls))
        key = (spec.namespace, spec.name, side)
        return {
            url: self._indexes.of(url, text).get(key, SideSample())
            for url, text in zip(urls, texts, strict=True)
        }

    def measures(self, side: str) -> bool:
        return True

    async def close(self) -> None:
        await self._routers.close()


class EnvoyFleet:
    """Envoy replicas driven by `vk-provider xds`.

    The xDS server is the one place that knows what every Envoy has applied (its ACKs); the Envoys
    themselves are asked only for statistics, at their stats port (found like router pods: fixed
    URLs or Ready pods by label). A step waits only for the Envoys the controller expects
    (`vk_provider.controller.expectedenvoys`): an expected Envoy that is not connected to the xDS
    server keeps its last configuration and holds the step; any other connected client (a stray)
    is left out, logged and counted, and never holds it.
    """

    name = "envoy"

    def __init__(
        self,
        xds_url: str,
        admins: RouterDirectory,
        *,
        expected_count: int | None = None,
        strays_seen: Callable[[int], None] | None = None,
    ) -> None:
        """`expected_count`: wait for that many Envoys, whatever their names (default: the pods found
        by label, by name; or as many as `admins` has URLs). `strays_seen`: told how many connected
        clients the last step check left out (a metric)."""
        self._xds_url = xds_url.rstrip("/")
        self._admins = admins
        self._indexes: SideIndexes[str] = SideIndexes(envoy_side_samples)
        self._expected_count = expected_count
        self._strays_seen = strays_seen
        self._strays: list[str] = []
        self._session: aiohttp.ClientSession | None = None

    async def _status(self) -> Mapping[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=REQUEST_TIMEOUT)
        url = f"{self._xds_url}/-/status"
        try:
            async with self._session.get(url) as response:
                if response.status != 200:
                    raise RouterUnreachable(f"the xDS server {url} answered {response.status}")
                document = await response.json()
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise RouterUnreachable(f"the xDS server {url}: {error or type(error).__name__}") from None
        if not isinstance(document, Mapping):
            raise RouterUnreachable(f"the xDS server {url} answered something other than a status document")
        return document

    async def check(self, spec: OffloadSpec) -> None:
        return None

    async def apply(self, spec: OffloadSpec, weight: int) -> None:
        return None  # the xDS server watches the Offload's status

    async def views(self, spec: OffloadSpec) -> list[RouteView]:
        return await self._views_of(spec, await self._status())

    async def _views_of(self, spec: OffloadSpec, status: Mapping[str, Any]) -> list[RouteView]:
        envoys = [str(envoy.get("node")) for envoy in status.get("envoys") or () if envoy.get("node")]
        if not envoys:
            raise RouterUnreachable(f"no Envoy is connected to the xDS server {self._xds_url}")
        route = route_entry(status, spec) or {"endpoints": {}, "applied": {}, "away_weight": None}
        endpoints = route.get("endpoints") or {}
        usable = {side: int((endpoints.get(side) or {}).get("usable", 0)) for side in ("home", "away")}
        weights = route.get("applied") or {}
        applied = {node: _weight(weights.get(node)) for node in envoys}
        selection = await self._select(applied, _weight(route.get("away_weight")), usable)
        self._report_strays(selection.strays)
        return selection.views

    async def _select(
        self, applied: dict[str, int | None], serving_weight: int | None, usable: dict[str, int]
    ) -> expectedenvoys.Selection:
        if self._expected_count is not None:
            return expectedenvoys.by_count(applied, self._expected_count, serving_weight, usable)
        names = await self._admins.pod_names()
        if names is not None:
            return expectedenvoys.by_name(applied, names, usable)
        count = len(await self._admins.urls())
        return expectedenvoys.by_count(applied, count, serving_weight, usable)

    def _report_strays(self, strays: list[str]) -> None:
        if self._strays_seen is not None:
            self._strays_seen(len(strays))
        if strays != self._strays:
            if strays:
                shown = ", ".join(strays[:STRAYS_NAMED]) + (", ..." if len(strays) > STRAYS_NAMED else "")
                logger.warning(
                    "%d client(s) connected to the xDS server %s are not Envoys this controller expects; "
                    "steps do not wait for them: %s",
                    len(strays),
                    self._xds_url,
                    shown,
                )
            else:
                logger.info(
                    "no client but the expected Envoys is connected to the xDS server %s", self._xds_url
                )
            self._strays = strays

    async def samples(self, spec: OffloadSpec, side: str) -> dict[str, SideSample]:
        urls = await self._admins.urls()
        texts = await self._admins.metrics()
        self._indexes.keep_only(set(urls))
        key = envoy_side_key(spec.namespace, spec.name, side)
        return {
            url: self._indexes.of(url, text).get(key, SideSample())
            for url, text in zip(urls, texts, strict=True)
        }

    def measures(self, side: str) -> bool:
        return True

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        await self._admins.close()


def route_entry(status: Mapping[str, Any], spec: OffloadSpec) -> Mapping[str, Any] | None:
    """The Offload's route in the xDS server's status document, or None (not in its table)."""
    return next(
        (
            entry
            for entry in status.get("routes") or ()
            if entry.get("namespace") == spec.namespace and entry.get("name") == spec.name
        ),
        None,
    )


def _weight(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class DataPlanes:
    """The data planes this controller was started with, by name."""

    def __init__(self, *planes: DataPlane) -> None:
        self._planes = {plane.name: plane for plane in planes}

    def of(self, spec: OffloadSpec) -> DataPlane:
        plane = self._planes.get(spec.data_plane)
        if plane is None:
            configured = ", ".join(sorted(self._planes)) or "none"
            hint = {
                "envoy": " (start the controller with --envoy-xds-url)",
                "inferencepool": " (start the controller with --envoy-xds-url)",
                "gatewayapi": " (start the controller with --gateway-api)",
            }.get(spec.data_plane, "")
            raise DataPlaneNotConfigured(
                f"spec.traffic.dataPlane is {spec.data_plane}, which this controller does not drive"
                f"{hint}; it drives: {configured}"
            )
        return plane

    async def close(self) -> None:
        await asyncio.gather(*(plane.close() for plane in self._planes.values()))
