"""Keep a deleted Offload's route: write it onto the home Service before the Offload lets go.

The routers keep serving a route written there (`vk_provider.offload.retained`) home-only, with the
Offload's claim age, until someone removes the annotation or deletes the Service: a pruned Offload
brings its service home and leaves its hosts answering, not 404.

Only an Offload that holds its route leaves one (a loser served nothing). If the Service already
carries a route (an earlier Offload's, which this one took over), the older age is kept, so
recreating an Offload never loses the host to another namespace. A route this Offload's name left on
another Service of the namespace (it named another Service before) is removed, so one name routes
once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from vk_provider.controller.claims import RouteClaims
from vk_provider.controller.deployments import service_path
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, RawObject
from vk_provider.offload.names import ROUTE_ANNOTATION
from vk_provider.offload.retained import RetainedRoute, retained_route
from vk_provider.offload.spec import OffloadSpec


class RouteKeeper:
    def __init__(
        self,
        api: KubeApi,
        get: Callable[[str], Awaitable[RawObject | None]],
        claims: RouteClaims | None,
    ) -> None:
        self._api = api
        self._get = get
        self._claims = claims

    async def keep(self, spec: OffloadSpec, offload: RawObject) -> str | None:
        """Make the Service carry this Offload's route. Returns what was written this pass (the
        caller waits a pass, so every router sees it before the Offload goes), or None when the
        route is in place, or there is none to keep."""
        route = spec.route
        if not (route.hosts or route.path_prefix):
            return None
        if self._claims is not None and not await self._claims.holds(offload):
            return None
        service = await self._get(service_path(spec.namespace, spec.home_service))
        if service is None:
            return None  # nothing to send the hosts to
        written = await self._remove_stale(spec)
        current = retained_route(service)
        since = spec.created
        if current is not None and current.claimed_since < since:
            since = current.claimed_since
        created = (service.get("metadata") or {}).get("creationTimestamp")
        if isinstance(created, str) and created > since:
            since = created  # as a reader counts it: no marker is older than its Service
        wanted = RetainedRoute(
            spec.namespace,
            spec.home_service,
            spec.name,
            route.hosts,
            route.path_prefix,
            route.allowed_namespaces,
            since,
        )
        if current != wanted:
            await self._annotate(spec.namespace, spec.home_service, wanted.to_annotation())
            written.append(f"keeping the route on Service {spec.home_service}")
        return "; ".join(written) or None

    async def _remove_stale(self, spec: OffloadSpec) -> list[str]:
        if self._claims is None:
            return []
        removed: list[str] = []
        for kept in await self._claims.kept_in(spec.namespace):
            if kept.offload == spec.name and kept.service != spec.home_service:
                await self._annotate(spec.namespace, kept.service, None)
                removed.append(f"removed its old route from Service {kept.service}")
        return removed

    async def _annotate(self, namespace: str, service: str, value: str | None) -> None:
        await self._api.patch(
            service_path(namespace, service),
            {"metadata": {"annotations": {ROUTE_ANNOTATION: value}}},
            content_type=MERGE_PATCH,
        )
