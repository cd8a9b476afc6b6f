"""A started router: the listening socket, its client connections (`client`) and the pool of
endpoint connections (`upstream`), swept once a second for timeouts.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import TYPE_CHECKING

from vk_provider.router.client import ClientConnection
from vk_provider.router.upstream import UpstreamPool

if TYPE_CHECKING:
    from vk_provider.router.proxy import Router

SWEEP_SECONDS = 1.0


class ProxyServer:
    """A started router: `port` is the bound port; `stop_listening()` then `close()` stop it."""

    def __init__(self, router: Router) -> None:
        self.router = router
        settings = router.settings
        self.pool = UpstreamPool(
            connect_timeout=settings.connect_timeout,
            idle_timeout=settings.keepalive_timeout,
            ssl_context=lambda: ssl.create_default_context(cafile=settings.upstream_ca_file),
        )
        self.connections: set[ClientConnection] = set()
        self.port = 0
        self.listening = False
        self.draining = False
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def listen(self, host: str, port: int, *, reuse_port: bool) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: ClientConnection(self), host, port, reuse_port=reuse_port or None, backlog=1024
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        self.listening = True
        self._sweeper = loop.create_task(self._sweep_forever())

    async def stop_listening(self) -> None:
        """Refuse new connections; open ones are served on, each closing after its next response."""
        self.draining = True
        if self.listening and self._server is not None:
            self.listening = False
            self._server.close()

    async def close(self) -> None:
        """Close every connection (requests still in flight are cut) and release the port."""
        await self.stop_listening()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for connection in list(self.connections):
            connection.abort()
        self.pool.close()

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            self.sweep(time.monotonic())

    def sweep(self, now: float) -> None:
        """Close idle client connections, time out endpoints slow to answer, expire pooled connections."""
        settings = self.router.settings
        for connection in list(self.connections):
            if connection.head_since is not None and now - connection.head_since > settings.header_timeout:
                connection.head_timed_out()
            relay = connection.relay
            if relay is None:
                if now - connection.last_active > settings.client_idle_timeout:
                    connection.close_when_written()
            elif relay.waiting_for_head and now - relay.sent_at > settings.response_timeout:
                relay.time_out()
        self.pool.sweep()


async def start(
    router: Router,
    host: str,
    port: int,
    *,
    reuse_port: bool = False,
) -> ProxyServer:
    """Serve `router` on host:port (0: any free port, see `ProxyServer.port`).

    `reuse_port` lets several processes listen on the same port (SO_REUSEPORT: the kernel spreads
    connections over them).
    """
    server = ProxyServer(router)
    await server.listen(host, port, reuse_port=reuse_port)
    return server
