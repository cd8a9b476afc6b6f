"""One Envoy's aggregated xDS stream, state of the world: what to send it, and what it accepted.

The protocol, per resource type on the stream: Envoy asks (a DiscoveryRequest naming the type and,
for routes and endpoints, the resource names it wants); we answer with every resource it wants at the
current version, under a fresh nonce; Envoy then asks again with that nonce, either ACKing (its
`version_info` is the version we sent) or NACKing (with `error_detail`, keeping the version it had).
A request carrying an older nonce was sent before our latest answer reached Envoy: it says nothing
about that answer, and a later request will, so it is ignored. A new version goes out to each type the
stream has asked for; a NACKed version is not sent again (it would be refused again), only the next.

Pure bookkeeping, no I/O: `server` moves the messages, `tracking` reads what was ACKed.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging

from envoy.service.discovery.v3 import discovery_pb2

from vk_provider.xds.names import PUSH_ORDER
from vk_provider.xds.snapshots import Snapshot

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Nack:
    """A version an Envoy refused for one resource type, with its reason."""

    node: str
    type_url: str
    version: int
    message: str
    code: int


@dataclasses.dataclass
class _TypeState:
    names: frozenset[str] = frozenset()
    """What Envoy last asked for (empty: everything, for the wildcard types)."""
    sent_version: int = 0
    sent_names: frozenset[str] | None = None
    nonce: str = ""
    acked_version: int = 0
    nack: Nack | None = None


class DiscoverySession:
    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.node_id: str | None = None
        """The Envoy's `node.id`, from its first request."""
        self._types: dict[str, _TypeState] = {}
        self._nonces = itertools.count(1)

    def acked_version(self, type_url: str) -> int:
        state = self._types.get(type_url)
        return state.acked_version if state is not None else 0

    def applied_version(self, snapshot: Snapshot) -> int:
        """The newest version this Envoy has ACKed for every type `snapshot` needs (0: none yet)."""
        return min(self.acked_version(type_url) for type_url in snapshot.required_types)

    @property
    def nacks(self) -> list[Nack]:
        """Refusals not yet followed by an accepted newer version of the same type."""
        return [state.nack for state in self._types.values() if state.nack is not None]

    def on_request(
        self, request: discovery_pb2.DiscoveryRequest, snapshot: Snapshot | None
    ) -> list[discovery_pb2.DiscoveryResponse]:
        """Take in one request; returns the response it calls for, if any."""
        if self.node_id is None and request.HasField("node"):
            self.node_id = request.node.id or self.peer
        type_url = str(request.type_url)
        state = self._types.setdefault(type_url, _TypeState())
        if request.response_nonce:
            if request.response_nonce != state.nonce:
                return []
            if request.HasField("error_detail"):
                state.nack = Nack(
                    node=self.node_id or self.peer,
                    type_url=type_url,
                    version=state.sent_version,
                    message=str(request.error_detail.message),
                    code=int(request.error_detail.code),
                )
                logger.warning(
                    "envoy %s refused version %d of %s (keeps %s): %s",
                    state.nack.node,
                    state.nack.version,
                    _short(type_url),
                    request.version_info or "nothing",
                    state.nack.message,
                )
            else:
                state.acked_version = state.sent_version
                if state.nack is not None and state.nack.version <= state.acked_version:
                    state.nack = None
        state.names = frozenset(request.resource_names)
        if snapshot is None or (state.sent_version == snapshot.version and state.sent_names == state.names):
            return []
        return [self._respond(type_url, state, snapshot)]

    def on_snapshot(self, snapshot: Snapshot) -> list[discovery_pb2.DiscoveryResponse]:
        """A new version: the responses that bring every type this stream asked for up to it."""
        return [
            self._respond(type_url, self._types[type_url], snapshot)
            for type_url in PUSH_ORDER
            if type_url in self._types and self._types[type_url].sent_version < snapshot.version
        ]

    def _respond(
        self, type_url: str, state: _TypeState, snapshot: Snapshot
    ) -> discovery_pb2.DiscoveryResponse:
        state.nonce = str(next(self._nonces))
        state.sent_version = snapshot.version
        state.sent_names = state.names
        return discovery_pb2.DiscoveryResponse(
            version_info=snapshot.version_info,
            resources=snapshot.resources_for(type_url, state.names),
            type_url=type_url,
            nonce=state.nonce,
        )


def _short(type_url: str) -> str:
    return type_url.rsplit(".", 1)[-1]
