"""The controller's view of route claims: every Offload in the cluster, and who lost its route.

Claims conflict across namespaces, so this mirror lists Offloads cluster-wide even when the controller
reconciles one namespace (`--namespace`); the rule itself is `vk_provider.offload.claims`, the one the
router applies, so both agree on the winner. A loser is not migrated: the reconciler reports it
(`Ready=False`, reason `RouteConflict`, a Warning Event naming the winner) and stops there.

Whenever an Offload changes, the Offloads whose standing changed (a loser whose winner went away, a
new loser, a loser now beaten by another winner) are queued again, so a loser takes the route over as
soon as the Offload holding it is deleted, without waiting for a resync.
"""

from __future__ import annotations

from collections.abc import Callable

from vk_provider._kube.watching import Reflector, uid_of
from vk_provider.kit.kube import KubeApi, RawObject
from vk_provider.offload.claims import Conflict, resolve_claims
from vk_provider.offload.names import offloads_path


class RouteClaims:
    """A cluster-wide mirror of Offloads, resolved into route claims on demand."""

    def __init__(self, api: KubeApi, *, namespace: str | None = None) -> None:
        self._namespace = namespace
        """Only this namespace's Offloads are queued again (None: all), as only those are ours."""
        self._requeue: Callable[[str], None] = lambda _key: None
        self._losers: dict[str, Conflict] = {}
        self.offloads = Reflector(
            api, offloads_path(None), query={}, on_change=self._changed, description="offload claims"
        )

    async def run(self, requeue: Callable[[str], None]) -> None:
        """Mirror until cancelled, handing `requeue` the key of each Offload whose standing changed."""
        self._requeue = requeue
        await self.offloads.run()

    async def conflict(self, offload: RawObject) -> Conflict | None:
        """Why this Offload (as just read) may not route, or None when it holds its claim.

        The Offload read is used in place of the mirror's copy, which may lag: a new Offload is judged
        even before the mirror has seen it. An Offload being deleted is never held back, so whatever
        its deletion does runs to the end.
        """
        await self.offloads.synced.wait()
        metadata = offload.get("metadata") or {}
        if metadata.get("deletionTimestamp"):
            return None
        objects = dict(self.offloads.objects)
        objects[uid_of(offload)] = offload
        return resolve_claims(objects.values()).conflict(metadata["namespace"], metadata["name"])

    async def _changed(self, _uid: str) -> None:
        losers = dict(resolve_claims(self.offloads.objects.values()).losers)
        changed = {
            key for key in losers.keys() | self._losers.keys() if losers.get(key) != self._losers.get(key)
        }
        self._losers = losers
        for key in sorted(changed):
            if self._namespace is None or key.split("/", 1)[0] == self._namespace:
                self._requeue(key)
