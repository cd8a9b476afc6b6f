"""Reach every router replica: what weight each applies, and its metrics.

Routers are found either as a fixed list of admin base URLs (development, tests, routers outside the
cluster) or as the Ready pods matching a label selector in a namespace, each at its pod IP and the
router's admin port (`router.admin`: status and metrics are not on the traffic port). Envoy replicas'
admin ports are found the same way (`metrics_path` then names Envoy's statistics page). A step's
interval starts counting only once EVERY router found applies the step's weight: a replica still on
the old weight would skew the very traffic the gates judge.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp

from vk_provider.kit.kube import KubeApi, resource_path
from vk_provider.offload.names import ROUTER_ADMIN_PORT

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=5)
SHARED_FOR_SECONDS = 0.25
"""How long a replica's status or metrics, once read, answer every caller (one that comes while a read
is under way waits for that read): much less than a poll (1 s) or a step's interval, so a gate never
judges a window that ended more than this before it asked."""


class RouterUnreachable(Exception):
    """A router could not be asked; the step waits (the migration's progress deadline bounds it)."""

    waiting_reason: str | None = None
    """The `Progressing` reason of the wait, when something more precise than a router's."""


@dataclasses.dataclass(frozen=True)
class RouteView:
    """What one data-plane replica says about one route."""

    router: str
    """The replica, as messages name it: `router http://10.0.0.7:9081`, `Envoy envoy-0`."""
    away_weight: int | None
    """None when the router has no such route (yet)."""
    usable: dict[str, int]
    """Usable endpoints per side."""


@dataclasses.dataclass(eq=False)
class _Read:
    task: asyncio.Future[Any]
    ended: float | None = None
    """When it ended (monotonic seconds); None while it is under way."""


class RouterDirectory:
    def __init__(
        self,
        api: KubeApi | None,
        *,
        urls: Sequence[str] = (),
        namespace: str | None = None,
        selector: str | None = None,
        port: int = ROUTER_ADMIN_PORT,
        metrics_path: str = "/-/metrics",
        kind: str = "router",
    ) -> None:
        if not urls and not (api and namespace and selector):
            raise ValueError(
                f"{kind}s are found by --{kind}-url, or by --{kind}-namespace and --{kind}-selector"
            )
        self._metrics_path = metrics_path
        self._kind = kind
        self._api = api
        self._urls = tuple(url.rstrip("/") for url in urls)
        self._namespace = namespace
        self._selector = selector
        self._port = port
        self._session: aiohttp.ClientSession | None = None
        self._fetches: dict[tuple[str, str], _Read] = {}
        """(url, path) -> the last read of it."""
        self._last_status: dict[str, tuple[bytes, Mapping[tuple[str, str], Any]]] = {}
        """url -> its last /-/status body, and its routes by (namespace, name)."""

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=REQUEST_TIMEOUT)
        return self._session

    async def urls(self) -> tuple[str, ...]:
        if self._urls or self._api is None:
            return self._urls
        return tuple(url for _, url in await self._ready_pods(self._api))

    async def pod_names(self) -> tuple[str, ...] | None:
        """The Ready pods' names, when replicas are found by label; None when given as URLs."""
        if self._urls or self._api is None:
            return None
        return tuple(name for name, _ in await self._ready_pods(self._api))

    async def _ready_pods(self, api: KubeApi) -> list[tuple[str, str]]:
        """(name, admin base URL) of each Ready pod the selector matches, by URL."""
        listing = await api.get(
            resource_path("v1", "pods", namespace=self._namespace),
            query={"labelSelector": str(self._selector)},
        )
        found = []
        for pod in listing.get("items", []):
            status = pod.get("status") or {}
            metadata = pod.get("metadata") or {}
            ready = any(
                condition.get("type") == "Ready" and condition.get("status") == "True"
                for condition in status.get("conditions") or ()
            )
            address = status.get("podIP")
            if ready and address and not metadata.get("deletionTimestamp"):
                host = f"[{address}]" if ":" in address else address
                found.append((str(metadata.get("name", "")), f"http://{host}:{self._port}"))
        if not found:
            raise RouterUnreachable(
                f"no Ready {self._kind} pod matches {self._selector} in {self._namespace}"
            )
        return sorted(found, key=lambda pod: pod[1])

    async def _get(self, url: str, path: str) -> aiohttp.ClientResponse:
        try:
            response = await self._client().get(url + path)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise RouterUnreachable(f"{self._kind} {url}: {error or type(error).__name__}") from None
        if response.status != 200:
            response.release()
            raise RouterUnreachable(f"{self._kind} {url}{path} answered {response.status}")
        return response

    async def _read(
        self, url: str, path: str, parse: Callable[[aiohttp.ClientResponse], Awaitable[Any]]
    ) -> Any:
        response = await self._get(url, path)
        try:
            return await parse(response)
        except (aiohttp.ClientError, ValueError) as error:
            raise RouterUnreachable(f"{self._kind} {url}{path}: {error}") from None
        finally:
            response.release()

    async def _shared(
        self, url: str, path: str, parse: Callable[[aiohttp.ClientResponse], Awaitable[Any]]
    ) -> Any:
        """One replica's document, shared by every caller that comes while it is read or within
        `SHARED_FOR_SECONDS` of the read's end: each Offload asks for its own route, and each router
        answers with all of them, so a thousand Offloads watched every few seconds would otherwise fetch
        and parse the whole table hundreds of times a second.

        From the read's end, not its start: a read of a thousand routes takes a few tenths of a second
        while the router is busy, so a window from the start had ended by the time most callers came,
        and each of them waited for a read of its own (the passes of a wave of 100 migrations waited
        0.45 s on average, and their queue waited on them)."""
        held = self._fetches.get((url, path))
        if held is not None and (held.ended is None or time.monotonic() - held.ended <= SHARED_FOR_SECONDS):
            return await asyncio.shield(held.task)
        read = _Read(asyncio.ensure_future(self._read(url, path, parse)))
        self._fetches[(url, path)] = read
        read.task.add_done_callback(lambda _: self._ended(url, path, read))
        return await asyncio.shield(read.task)

    def _ended(self, url: str, path: str, read: _Read) -> None:
        read.ended = time.monotonic()
        # A failure is every waiter's, but not the next caller's: it asks again.
        failed = read.task.cancelled() or read.task.exception() is not None
        if failed and self._fetches.get((url, path)) is read:
            del self._fetches[(url, path)]

    async def _view(self, url: str, namespace: str, name: str) -> RouteView:
        routes: Mapping[tuple[str, str], Any] = await self._shared(url, "/-/status", self._routes_of(url))
        route = routes.get((namespace, name))
        if route is None:
            return RouteView(f"router {url}", None, {"home": 0, "away": 0})
        endpoints = route.get("endpoints") or {}
        usable = {side: int((endpoints.get(side) or {}).get("usable", 0)) for side in ("home", "away")}
        return RouteView(f"router {url}", int(route.get("away_weight", 0)), usable)

    def _routes_of(
        self, url: str
    ) -> Callable[[aiohttp.ClientResponse], Awaitable[Mapping[tuple[str, str], Any]]]:
        """Reads a replica's /-/status into its routes by (namespace, name), decoding it only when it
        differs from the last one: at rest with 1,000 routes, decoding the same document four times
        a second was an eighth of the controller's CPU, and a lookup per Offload went through all."""

        async def parse(response: aiohttp.ClientResponse) -> Mapping[tuple[str, str], Any]:
            body = await response.read()
            last = self._last_status.get(url)
            if last is not None and last[0] == body:
                return last[1]
            document = json.loads(body)
            if not isinstance(document, dict):
                raise ValueError("the status is not a JSON object")
            routes = {
                (str(route.get("namespace")), str(route.get("name"))): route
                for route in document.get("routes") or ()
            }
            self._last_status[url] = (body, routes)
            return routes

        return parse

    async def views(self, namespace: str, name: str) -> list[RouteView]:
        """Every router's view of the route; RouterUnreachable if any router cannot be asked."""
        urls = await self.urls()
        return list(await asyncio.gather(*(self._view(url, namespace, name) for url in urls)))

    async def metrics(self) -> list[str]:
        """Every replica's metrics text; RouterUnreachable if any replica cannot be asked."""

        urls = await self.urls()
        return list(await asyncio.gather(*(self._shared(url, self._metrics_path, _text) for url in urls)))


async def _text(response: aiohttp.ClientResponse) -> str:
    return await response.text()
