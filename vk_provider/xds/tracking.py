"""Which Envoys are connected, and which version each has applied: the `envoy` data plane's "applied".

A weight is applied when every connected Envoy has ACKed, for every resource type, a version at least
as new as the one that carries it. An Envoy that refused a version (NACK) keeps serving the one before,
and is reported as not having applied it, with its reason.

Envoys are told apart by `node.id` (each replica needs its own; the bootstrap takes the pod's name).
Two streams with one id count as one Envoy that has applied only what both have.
"""

from __future__ import annotations

import asyncio

from vk_provider.xds.session import DiscoverySession, Nack
from vk_provider.xds.snapshots import SnapshotStore


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
