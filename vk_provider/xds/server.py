"""The xDS server: Envoy's AggregatedDiscoveryService over gRPC, for any number of Envoys.

Each Envoy holds one stream (state of the world; the delta variant is not served, and Envoy is told
UNIMPLEMENTED if it asks). A stream reads Envoy's requests in a task of its own, so a new version can
go out while Envoy is silent; requests and new versions are handled in one queue, in arrival order, by
the stream's `DiscoverySession`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc
from envoy.service.discovery.v3 import discovery_pb2

from vk_provider.kit.grpctls import ServerTls, add_port
from vk_provider.routetable.table import RouteTable
from vk_provider.xds.resources import EnvoySettings, ResourceCache, Resources, build_resources
from vk_provider.xds.session import DiscoverySession, Nack
from vk_provider.xds.snapshots import Snapshot, SnapshotStore
from vk_provider.xds.tracking import ConnectedNodes, WeightHistory

logger = logging.getLogger(__name__)

SERVICE = "envoy.service.discovery.v3.AggregatedDiscoveryService"

_SERVER_OPTIONS = [
    # Ping each Envoy every 30 s and drop it after 10 s without an answer: an Envoy whose node vanished
    # would otherwise stay "connected", unable to ACK anything, and hold every weight change unapplied.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
]

_StreamEvent: TypeAlias = discovery_pb2.DiscoveryRequest | Snapshot | None


class XdsServer:
    """Serves the current route table, as Envoy resources, to every Envoy that connects.

    `update(table)` (or `publish(resources)`) makes a new version and pushes it to every stream;
    `nodes` says which Envoys have applied which version, `weights` which weights each version carries.
    """

    def __init__(self, settings: EnvoySettings | None = None) -> None:
        self.settings = settings or EnvoySettings()
        self.store = SnapshotStore()
        self.nodes = ConnectedNodes(self.store)
        self.weights = WeightHistory()
        self.table = RouteTable()
        """The table last served (empty before any): the routes the status reports."""
        self._server: grpc.aio.Server | None = None
        self._cache = ResourceCache()
        """The resources of the last table: a new one parses only the routes that changed."""

    def update(self, table: RouteTable) -> int:
        """Serve `table`; returns the version that carries it."""
        return self.publish(build_resources(table, self.settings, self._cache), table=table)

    def publish(self, resources: Resources, *, table: RouteTable | None = None) -> int:
        """Serve `resources` as they are (the tests publish invalid ones on purpose); returns the version.

        `table`, when given, is what `resources` say: the status reports its routes, and an Envoy
        that ACKs this version is reported at its weights. Without it the version carries no
        weights that can be reported.
        """
        version = self.store.publish(resources)
        if table is not None:
            self.table = table
            self.weights.record(version, table)
        return version

    @property
    def version(self) -> int:
        return self.store.current.version if self.store.current is not None else 0

    def acked(self) -> dict[str, int]:
        return self.nodes.acked()

    def not_acked(self, version: int) -> list[str]:
        return self.nodes.not_acked(version)

    def nacks(self) -> dict[str, list[Nack]]:
        return self.nodes.nacks()

    async def start(self, host: str, port: int, *, tls: ServerTls | None = None) -> int:
        """Listen on `host:port` (0: any free port); returns the port.

        With `tls`, only a client presenting a certificate of its client CA completes the handshake:
        anyone else who can reach the port never gets a stream, so never reads the route table nor
        shows up as an Envoy. Without it the port is plaintext and open to any client (development).
        """
        server = grpc.aio.server(options=_SERVER_OPTIONS)
        handler = grpc.stream_stream_rpc_method_handler(
            self._stream,
            request_deserializer=discovery_pb2.DiscoveryRequest.FromString,
            response_serializer=discovery_pb2.DiscoveryResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, {"StreamAggregatedResources": handler}),)
        )
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        bound = add_port(server, address, tls)
        await server.start()
        self._server = server
        logger.info("xDS server listening on %s:%d (%s)", host, bound, "mutual TLS" if tls else "plaintext")
        return bound

    async def stop(self, grace: float | None = None) -> None:
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None

    async def _stream(
        self,
        requests: AsyncIterator[discovery_pb2.DiscoveryRequest],
        context: grpc.aio.ServicerContext[discovery_pb2.DiscoveryRequest, discovery_pb2.DiscoveryResponse],
    ) -> AsyncIterator[discovery_pb2.DiscoveryResponse]:
        session = DiscoverySession(context.peer())
        events: asyncio.Queue[_StreamEvent] = asyncio.Queue()

        async def read() -> None:
            try:
                async for request in requests:
                    events.put_nowait(request)
            finally:
                events.put_nowait(None)  # Envoy closed its side, or the stream broke

        reader = asyncio.create_task(read(), name=f"xds-read {session.peer}")
        unsubscribe = self.store.subscribe(events.put_nowait)
        self.nodes.add(session)
        try:
            while (event := await events.get()) is not None:
                if isinstance(event, Snapshot):
                    responses = session.on_snapshot(event)
                else:
                    known = session.node_id
                    responses = session.on_request(event, self.store.current)
                    if known is None and session.node_id is not None:
                        logger.info("envoy %s connected from %s", session.node_id, session.peer)
                    self.nodes.notify()
                for response in responses:
                    yield response
        finally:
            unsubscribe()
            reader.cancel()
            self.nodes.remove(session)
            logger.info("envoy %s disconnected", session.node_id or session.peer)
