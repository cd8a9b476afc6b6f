"""The controller's view of route claims: every Offload and kept route in the cluster, and who lost.

Claims conflict across namespaces, so this mirror lists Offloads, and the KeptRoutes deleted Offloads
left (`vk_provider.offload.retained`), cluster-wide even when the controller reconciles one namespace
(`--namespace`); the rule itself is `vk_provider.offload.claims`, the one
the router applies, so both agree on the winner. A loser is not migrated: the reconciler reports it
(`Ready=False`, reason `RouteConflict`, a Warning Event naming the winner) and stops there.

Whenever an Offload or a kept route changes, the Offloads whose standing changed (a loser whose
winner went away, a new loser, a loser now beaten by another winner) are queued again, so a loser
takes the route over as soon as the claim holding it is gone, without waiting for a resync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from vk_provider._kube.informers import Informers
from vk_provider._kube.watching import Reflector, uid_of
from vk_provider.kit.kube import KubeApi, RawObject
from vk_provider.offload.claims import Claims, Conflict, RouteClaim, live_claim, resolve_claims
from vk_provider.offload.names import offloads_path
from vk_provider.offload.retained import RetainedRoute, kept_routes_reflector, retained_routes


class RouteClaims:
    """A cluster-wide mirror of Offloads and kept routes, resolved into route claims on demand."""

    def __init__(
        self, api: KubeApi, *, namespace: str | None = None, informers: Informers | None = None
    ) -> None:
        self._namespace = namespace
        """Only this namespace's Offloads are queued again (None: all), as only those are ours."""
        self._requeue: Callable[[str], None] = lambda _key: None
        self._losers: dict[str, Conflict] = {}
        self._latest: tuple[Claims, dict[str, Any]] | None = None
        """The claims as of the mirror's last change, with the resourceVersion of each Offload they read."""
        self._claims: dict[str, RouteClaim | None] = {}
        """Per Offload uid, its claim when the claims were last resolved."""
        self._shared = informers is not None and namespace is None
        """Whether the Offloads are the controller's own cluster-wide mirror (one copy, not two); a
        controller of one namespace mirrors only it, so the claims keep a cluster-wide one of their own."""
        if informers is not None and namespace is None:
            self.offloads = informers.watch(offloads_path(None), self._offload_changed).reflector
        else:
            self.offloads = Reflector(
                api,
                offloads_path(None),
                query={},
                on_change=self._offload_changed,
                description="offload claims",
            )
        self.kept_routes = kept_routes_reflector(api, None, self._changed)

    async def run(self, requeue: Callable[[str], None]) -> None:
        """Mirror until cancelled, handing `requeue` the key of each Offload whose standing changed."""
        self._requeue = requeue
        async with asyncio.TaskGroup() as tasks:
            if not self._shared:
                tasks.create_task(self.offloads.run())
            tasks.create_task(self.kept_routes.run())

    async def conflict(self, offload: RawObject) -> Conflict | None:
        """Why this Offload (as just read) may not route, or None when it holds its claim.

        The Offload read is used in place of the mirror's copy, which may lag: a new Offload is judged
        even before the mirror has seen it. An Offload being deleted is never held back, so whatever
        its deletion does runs to the end.
        """
        if (offload.get("metadata") or {}).get("deletionTimestamp"):
            return None
        metadata = offload.get("metadata") or {}
        return (await self._resolved(offload)).conflict(metadata["namespace"], metadata["name"])

    async def holds(self, offload: RawObject) -> bool:
        """Whether this Offload holds its route, whether or not it is being deleted (a deleted one
        that held its route leaves it kept on its Service)."""
        metadata = offload.get("metadata") or {}
        return f"{metadata['namespace']}/{metadata['name']}" in (await self._resolved(offload)).winners

    async def kept_in(self, namespace: str) -> list[RetainedRoute]:
        """Every route kept in this namespace."""
        await self.kept_routes.synced.wait()
        return [route for route in self._kept() if route.namespace == namespace]

    async def _resolved(self, offload: RawObject) -> Claims:
        await self.offloads.synced.wait()
        await self.kept_routes.synced.wait()
        version = (offload.get("metadata") or {}).get("resourceVersion")
        if (
            self._latest is not None
            and version is not None
            and self._latest[1].get(uid_of(offload)) == version
        ):
            # The mirror's last resolution already judged this very Offload: a pass of each of a
            # thousand Offloads every few seconds must not resolve all thousand claims again.
            return self._latest[0]
        objects = dict(self.offloads.objects)
        objects[uid_of(offload)] = offload
        return resolve_claims(objects.values(), self._kept())

    def _kept(self) -> list[RetainedRoute]:
        return retained_routes(self.kept_routes.objects.values())

    async def _offload_changed(self, uid: str) -> None:
        offload = self.offloads.objects.get(uid)
        unchanged = (
            offload is not None
            and self._latest is not None
            and uid in self._claims
            and live_claim(offload) == self._claims[uid]
        )
        if offload is not None and self._latest is not None and unchanged:
            # Its status, or a field no claim reads, changed: the last resolution stands for this
            # version too. A wave of a thousand migrations writes statuses, not routes.
            self._latest[1][uid] = (offload.get("metadata") or {}).get("resourceVersion")
            return
        await self._changed(uid)

    async def _changed(self, _uid: str) -> None:
        objects = self.offloads.objects
        self._claims = {uid: live_claim(obj) for uid, obj in objects.items()}
        resolved = resolve_claims(objects.values(), self._kept())
        versions = {uid: (obj.get("metadata") or {}).get("resourceVersion") for uid, obj in objects.items()}
        self._latest = (resolved, versions)
        losers = dict(resolved.losers)
        changed = {
            key for key in losers.keys() | self._losers.keys() if losers.get(key) != self._losers.get(key)
        }
        self._losers = losers
        for key in sorted(changed):
            if self._namespace is None or key.split("/", 1)[0] == self._namespace:
                self._requeue(key)
