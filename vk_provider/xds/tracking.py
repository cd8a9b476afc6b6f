"""Which Envoys are connected, and which version each has applied: the `envoy` data plane's "applied".

A weight is applied when every connected Envoy has ACKed, for every resource type, a version at least
as new as the one that carries it. An Envoy that refused a version (NACK) keeps serving the one before,
and is reported as not having applied it, with its reason.

Envoys are told apart by `node.id` (each replica needs its own; the bootstrap takes the pod's name).
Two streams with one id count as one Envoy that has applied only what both have.

An ACK names a version, not a weight: `WeightHistory` remembers which weight each recent version gave
each route, so "Envoy X serves route R at weight W" can be said for any Envoy that is not far behind.
"""

from __future__ import annotations

import asyncio

from vk_provider.routetable.table import RouteTable
from vk_provider.xds.session import DiscoverySession, Nack
from vk_provider.xds.snapshots import SnapshotStore

HISTORY_VERSIONS = 64
"""Versions whose weights are remembered: an Envoy still on an older one has refused or missed that
many changes in a row, and its weights are reported unknown rather than every version kept forever."""

RouteKey = tuple[str, str]
"""(namespace, name): an Offload's route."""


class ConnectedNodes:
    def __init__(self, store: SnapshotStore) -> None:
        self._store = store
        self._sessions: set[DiscoverySession] = set()
        self._changed = asyncio.Event()

    def add(self, session: DiscoverySession) -> None:
        self._sessions.add(session)
        self.notify()

    def remove(self, session: DiscoverySession) -> None:
        self._sessions.discard(session)
        self.notify()

    def notify(self) -> None:
        """Something was ACKed, refused, connected or lost: wake whoever waits in `wait_applied`."""
        self._changed.set()
        self._changed = asyncio.Event()

    def acked(self) -> dict[str, int]:
        """Each connected Envoy's node id → the newest version it has applied (0: none yet)."""
        snapshot = self._store.current
        applied: dict[str, int] = {}
        for session in self._sessions:
            if session.node_id is None:
                continue  # its first request has not arrived: not an Envoy we can name yet
            version = session.applied_version(snapshot) if snapshot is not None else 0
            applied[session.node_id] = min(version, applied.get(session.node_id, version))
        return applied

    def not_acked(self, version: int) -> list[str]:
        """The connected Envoys that have not applied `version` (or a newer one): empty means applied."""
        return sorted(node for node, applied in self.acked().items() if applied < version)

    def nacks(self) -> dict[str, list[Nack]]:
        """Each connected Envoy's standing refusals (only those with any)."""
        refused: dict[str, list[Nack]] = {}
        for session in self._sessions:
            if session.nacks:
                refused.setdefault(session.node_id or session.peer, []).extend(session.nacks)
        return refused

    async def changed(self) -> None:
        """Until the next ACK, refusal, connection or loss."""
        await self._changed.wait()

    async def wait_applied(self, version: int, *, nodes: int = 1) -> None:
        """Until at least `nodes` Envoys are connected and all have applied `version`."""
        while len(self.acked()) < nodes or self.not_acked(version):
            await self.changed()


class WeightHistory:
    """Each of the last `limit` versions: the away weight it gives each route of its table."""

    def __init__(self, limit: int = HISTORY_VERSIONS) -> None:
        if limit < 1:
            raise ValueError(f"a weight history keeps at least 1 version, not {limit}")
        self._limit = limit
        self._by_version: dict[int, dict[RouteKey, int]] = {}

    def record(self, version: int, table: RouteTable) -> None:
        """`version` serves `table`. A version published again for a new table (the resources did not
        change, e.g. a weight moved on a side without endpoints) now stands for that table's weights."""
        self._by_version[version] = {
            (route.namespace, route.name): route.away_weight for route in table.routes
        }
        while len(self._by_version) > self._limit:
            del self._by_version[min(self._by_version)]

    def weight(self, version: int, namespace: str, name: str) -> int | None:
        """The away weight `version` gives the route, or None: not in that version, or not remembered."""
        return self._by_version.get(version, {}).get((namespace, name))
