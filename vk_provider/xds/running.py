"""`vk-provider xds`: serve route tables to Envoy replicas until cancelled.

Where the tables come from is the caller's: a `TableSource` is any coroutine function that hands each
new table to the `apply` it is given (the router's `TableFeed(api, apply).run` is one). A source that
returns leaves its last table served. Beside the gRPC server, an HTTP one may say what each Envoy
has applied (`status`), for the migration controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from vk_provider.kit.grpctls import ServerTls
from vk_provider.routetable.table import RouteTable
from vk_provider.xds.resources import EnvoySettings
from vk_provider.xds.server import XdsServer
from vk_provider.xds.status import serving_status

logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 1.0
"""Envoys keep their configuration when the stream closes and reconnect to another replica; the
grace only lets responses being written go out."""


class TableSource(Protocol):
    def __call__(self, apply: Callable[[RouteTable], None]) -> Awaitable[None]: ...


async def serve_xds(
    table_source: TableSource,
    host: str,
    port: int,
    *,
    settings: EnvoySettings | None = None,
    tls: ServerTls | None = None,
    status: tuple[str, int] | None = None,
    started: Callable[[XdsServer, int], None] | None = None,
    status_started: Callable[[int], None] | None = None,
) -> None:
    """Serve xDS on `host:port` with the tables `table_source` produces, until cancelled.

    `tls`: mutual TLS (see `XdsServer.start`); None serves plaintext.

    `status`, if given, is the `HOST:PORT` of the HTTP status (`vk_provider.xds.status`), served as
    long as xDS is. `started`, if given, gets the server and its port once it listens (the port
    matters when `port` is 0), e.g. to report its ACKs; `status_started` the status's port.
    """
    server = XdsServer(settings)
    bound = await server.start(host, port, tls=tls)

    def apply(table: RouteTable) -> None:
        version = server.update(table)
        logger.info("route table of %d routes is version %d", len(table.routes), version)

    try:
        async with contextlib.AsyncExitStack() as stack:
            if status is not None:
                status_port = await stack.enter_async_context(serving_status(server, *status))
                if status_started is not None:
                    status_started(status_port)
            if started is not None:
                started(server, bound)
            await table_source(apply)
            await asyncio.Event().wait()  # the source is done: keep serving its last table
    finally:
        await server.stop(STOP_GRACE_SECONDS)
