"""Keep a deleted Offload's route: write it as a KeptRoute before the Offload lets go.

The routers keep serving a KeptRoute (`vk_provider.offload.retained`) home-only, with the Offload's
claim age, until someone deletes it or its Service (its owner): a pruned Offload brings its service
home and leaves its hosts answering, not 404.

Only an Offload that holds its route leaves one (a loser served nothing), and only while its home
Service exists (there is nothing else to send the hosts to). The KeptRoute has the Offload's name; a
route kept for the same Service under another name (an earlier Offload's, which this one took over)
is replaced, and its older age carried over, so recreating an Offload never loses the host to
another namespace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from vk_provider.controller.claims import RouteClaims
from vk_provider.controller.deployments import service_path
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, RawObject
from vk_provider.offload.names import KEPT_ROUTES_MISSING, kept_routes_path
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
        """Reads one object, None when it does not exist."""
        self._claims = claims

    async def keep(self, spec: OffloadSpec, offload: RawObject) -> str | None:
        """Make the KeptRoute say this Offload's route. Returns what was written this pass (the caller
        waits a pass, so every router has it before the Offload goes), or None when the route is
        kept already, or there is none to keep."""
        route = spec.route
        if not (route.hosts or route.path_prefix):
            return None
        if self._claims is not None and not await self._claims.holds(offload):
            return None
        service = await self._get(service_path(spec.namespace, spec.home_service))
        if service is None:
            return None
        path = kept_routes_path(spec.namespace, spec.name)
        current_object = await self._get(path)
        current = None if current_object is None else retained_route(current_object)
        taken_over = await self._taken_over(spec)
        since = min([spec.created, *(kept.claimed_since for kept in (*taken_over, current) if kept)])
        wanted = RetainedRoute(
            spec.namespace,
            spec.home_service,
            spec.name,
            route.hosts,
            route.path_prefix,
            route.allowed_namespaces,
            since,
        )
        written = []
        if current_object is None:
            body = wanted.to_object(str((service.get("metadata") or {}).get("uid") or ""))
            try:
                await self._api.create(kept_routes_path(spec.namespace), body)
            except KubeApiError as error:
                if not error.not_found:
                    raise
                # An upgrade that did not apply the new CRD: the Offload waits, saying why, rather
                # than take its hosts off the routers.
                return f"waiting: {KEPT_ROUTES_MISSING}"
            written.append(f"keeping its route (KeptRoute {spec.name})")
        elif current != wanted:
            body = wanted.to_object(str((service.get("metadata") or {}).get("uid") or ""))
            # A merge patch: a field the route no longer has is nulled, or the old value would stay.
            spec_patch = dict.fromkeys(("hosts", "pathPrefix", "allowedNamespaces")) | body["spec"]
            await self._api.patch(
                path, {"metadata": body["metadata"], "spec": spec_patch}, content_type=MERGE_PATCH
            )
            written.append(f"keeping its route (KeptRoute {spec.name})")
        for kept in taken_over:
            # Only once this Offload's own KeptRoute holds the older age: never a moment without it.
            if current == wanted:
                with contextlib.suppress(KubeApiError):  # gone already: the mirror lags
                    await self._api.delete(kept_routes_path(spec.namespace, kept.offload))
                written.append(f"replacing KeptRoute {kept.offload}")
        return "; ".join(written) or None

    async def _taken_over(self, spec: OffloadSpec) -> list[RetainedRoute]:
        """Routes kept for this Offload's Service under another name: this Offload took them over."""
        if self._claims is None:
            return []
        return [
            kept
            for kept in await self._claims.kept_in(spec.namespace)
            if kept.service == spec.home_service and kept.offload != spec.name
        ]
