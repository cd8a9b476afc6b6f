"""Shared pieces of the router tests: local backends that count, hold and misbehave on demand."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import random
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from vk_devtools.devcluster.pki import CertificateAuthority
from vk_provider.router import Endpoint, Route, RouteMatch, Router, RouteTable
from vk_provider.router.admin import bound_port, local_answer, start_admin
from vk_provider.router.server import ProxyServer, start

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Backend:
    """A local HTTP server that counts its requests; `hold()` makes new ones wait for `release()`."""

    def __init__(self, name: str, handler: Handler | None = None) -> None:
        self.name = name
        self.hits = 0
        self.in_flight = 0
        self.arrived = asyncio.Event()
        self._gate: asyncio.Event | None = None
        self._handler = handler
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.server = TestServer(app, host="127.0.0.1")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def endpoint(self, *, terminating: bool = False) -> Endpoint:
        return Endpoint(self.url, terminating=terminating)

    def hold(self) -> None:
        self._gate = asyncio.Event()

    def release(self) -> None:
        if self._gate is not None:
            self._gate.set()
        self._gate = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.hits += 1
        self.in_flight += 1
        self.arrived.set()
        try:
            if self._gate is not None:
                await self._gate.wait()
            if self._handler is not None:
                return await self._handler(request)
            return web.Response(text=f"{self.name} {request.method} {request.path_qs}")
        finally:
            self.in_flight -= 1


@contextlib.asynccontextmanager
async def backends(*names: str, handler: Handler | None = None) -> AsyncIterator[list[Backend]]:
    started = [Backend(name, handler) for name in names]
    async with contextlib.AsyncExitStack() as stack:
        for backend in started:
            await stack.enter_async_context(backend.server)
        yield started


@contextlib.asynccontextmanager
async def served_router(router: Router) -> AsyncIterator[ProxyServer]:
    """`router` served on a free port of 127.0.0.1, as `vk-provider router` serves it."""
    server = await start(router, "127.0.0.1", 0)
    try:
        yield server
    finally:
        await server.close()


RouterClient = aiohttp.ClientSession
"""A client session whose relative URLs ("/path") go to the served router."""


@contextlib.asynccontextmanager
async def router_client(router: Router) -> AsyncIterator[RouterClient]:
    """A client of `router` served on a free port. It sends no default Accept, Accept-Encoding or
    User-Agent, so tests see exactly the headers they give."""
    async with (
        served_router(router) as server,
        aiohttp.ClientSession(
            base_url=f"http://127.0.0.1:{server.port}",
            auto_decompress=False,
            skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent"),
        ) as client,
    ):
        yield client


@contextlib.asynccontextmanager
async def admin_client(
    router: Router, *, ready: Callable[[], bool] = lambda: True
) -> AsyncIterator[RouterClient]:
    """A client of `router`'s admin listener (status, metrics, health) on a free port of 127.0.0.1,
    as `vk-provider router --worker-processes 1` serves it."""
    runner = await start_admin("127.0.0.1", 0, local_answer(router), ready)
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{bound_port(runner)}") as client:
            yield client
    finally:
        await runner.cleanup()


def route(
    *,
    home: tuple[Endpoint, ...] = (),
    away: tuple[Endpoint, ...] = (),
    weight: int = 0,
    hosts: tuple[str, ...] = (),
    prefix: str = "/",
    name: str = "web",
    generation: int = 1,
) -> Route:
    return Route(
        namespace="ml",
        name=name,
        generation=generation,
        match=RouteMatch(hosts=hosts, path_prefix=prefix if not hosts else ""),
        away_weight=weight,
        home=home,
        away=away,
    )


def local_tls(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """(the CA file a client trusts, a server context presenting a certificate that CA issued for
    127.0.0.1): an HTTPS endpoint for tests, trusted through `ProxySettings.upstream_ca_file`."""
    authority = CertificateAuthority.create(folder / "ca")
    pair = authority.issue_serving(
        folder, "upstream", common_name="127.0.0.1", ip_addresses=(ipaddress.ip_address("127.0.0.1"),)
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pair.cert, pair.key)
    return authority.paths.cert, context


def table(*routes: Route) -> RouteTable:
    return RouteTable(routes)


def seeded(seed: int) -> random.Random:
    """A reproducible generator for the balancer: tests need repeatable draws, not secrecy."""
    return random.Random(seed)  # noqa: S311
