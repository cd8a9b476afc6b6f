"""The stand-in's proxy: each RUNNING pod's HTTP apps, and the one front that reaches them.

RunPod serves every `<port>/http` a pod exposes at `https://<podId>-<port>.proxy.runpod.net`. Here
each such port of a RUNNING pod is a real HTTP app on its own local port, made by a `PodAppFactory`
from what the app may know of its pod (`ServedPod`), and one front stands in for the proxy's hosts:
`http://127.0.0.1:<front>/<podId>-<port>/<path>`, or any path with `Host: <podId>-<port>.proxy.runpod.net`.

The front answers 404 for a pod it does not know and 502 for a port nothing serves (a pod not RUNNING,
or still loading its model); with a request timeout (the realistic profile's 100 s, Cloudflare's), it
answers 524 when the pod's app has not begun its answer in time, as RunPod's proxy does. An answer that
has begun streams for as long as it lasts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from collections.abc import Awaitable, Callable, Mapping

import aiohttp
from aiohttp import web

from vk_devtools.standins.runpod.clock import Clock
from vk_devtools.standins.runpod.pods import Pod

_FRONT_PATH = re.compile(r"^/([a-z0-9]+)-(\d+)(/.*)?$")
_FRONT_HOST = re.compile(r"^([a-z0-9]+)-(\d+)\.proxy\.runpod\.net(?::\d+)?$")
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host"}
)


@dataclasses.dataclass(frozen=True, slots=True)
class ServedPod:
    """What a pod's HTTP app knows of its pod; `log` writes a container log line."""

    id: str
    name: str
    image: str
    port: int
    env: Mapping[str, str]
    log: Callable[[str], None]


PodAppFactory = Callable[[ServedPod], web.Application]


def echo_app(pod: ServedPod) -> web.Application:
    """The default app behind each pod's proxy address: `/healthz`, and JSON about the request elsewhere."""

    async def handle(request: web.Request) -> web.Response:
        pod.log(f"{request.method} {request.path_qs}")
        if request.path == "/healthz":
            return web.Response(text="ok")
        body = {
            "pod_id": pod.id,
            "name": pod.name,
            "port": pod.port,
            "method": request.method,
            "path": request.path_qs,
            "body": (await request.read()).decode(errors="replace"),
            "env": dict(pod.env),
        }
        return web.json_response(body, headers={"X-Served-By": pod.id})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def serve(app: web.Application, host: str) -> tuple[web.AppRunner, int]:
    """Serve `app` on an ephemeral port of `host`: its runner and the port."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    return runner, int(runner.addresses[0][1])


class PodServers:
    """The apps of the RUNNING pods, one per HTTP port; the `PodServing` of the stand-in's `Pods`."""

    def __init__(self, pod_app: PodAppFactory, host: str) -> None:
        self._pod_app = pod_app
        self._host = host
        self._servers: dict[str, dict[int, tuple[web.AppRunner, int]]] = {}
        """By pod id and pod port: the app's runner and its local port."""

    async def start(self, pod: Pod, log: Callable[[str], None]) -> None:
        for port in pod.http_ports():
            if port in self._servers.get(pod.id, {}):
                continue
            served = ServedPod(pod.id, pod.name, pod.image, port, dict(pod.env), log)
            self._servers.setdefault(pod.id, {})[port] = await serve(self._pod_app(served), self._host)

    async def stop(self, pod: Pod) -> None:
        for runner, _ in self._servers.pop(pod.id, {}).values():
            await runner.cleanup()

    def local_port(self, pod_id: str, port: int) -> int | None:
        """The local port of the app serving this pod's port, if one does."""
        server = self._servers.get(pod_id, {}).get(port)
        return None if server is None else server[1]


PROXY_TIMEOUT_STATUS = 524
"""Cloudflare's "A timeout occurred": the origin did not begin its answer in time."""


async def _within(
    clock: Clock, seconds: float | None, answer: Awaitable[aiohttp.ClientResponse]
) -> aiohttp.ClientResponse | None:
    """The answer, or None if `seconds` pass on `clock` first (the request is then abandoned)."""
    if seconds is None:
        return await answer
    answering = asyncio.ensure_future(answer)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((answering, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await timer
    if answering.done():
        return answering.result()
    answering.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await answering
    return None


def front_app(
    pods: Mapping[str, Pod],
    servers: PodServers,
    session: aiohttp.ClientSession,
    host: str,
    *,
    clock: Clock,
    timeout_seconds: Callable[[], float | None] = lambda: None,
) -> web.Application:
    """The front of the proxy: every request passed on to the app of the pod and port it names, cut
    with a 524 if that app has not begun its answer within `timeout_seconds()` (None: never)."""

    def route(request: web.Request) -> tuple[str, int, str] | web.Response:
        """(pod id, port, the pod app's URL), or the proxy's answer when nothing serves that address."""
        target = _front_target(request)
        if target is None:
            return web.Response(status=404, text="not a pod proxy address\n")
        pod_id, port, path = target
        if pod_id not in pods:
            return web.Response(status=404, text=f"pod {pod_id} not found\n")
        local_port = servers.local_port(pod_id, port)
        if local_port is None:  # not RUNNING, or its server not up yet (the model still loads)
            return web.Response(status=502, text=f"pod {pod_id} is not serving port {port}\n")
        return pod_id, port, f"http://{host}:{local_port}{path}"

    async def front(request: web.Request) -> web.StreamResponse:
        routed = route(request)
        if isinstance(routed, web.Response):
            return routed
        pod_id, port, url = routed
        headers = {key: value for key, value in request.headers.items() if key.lower() not in _HOP_BY_HOP}
        body = await request.read() if request.can_read_body else None
        try:
            upstream = await _within(
                clock,
                timeout_seconds(),
                session.request(request.method, url, headers=headers, data=body, allow_redirects=False),
            )
        except aiohttp.ClientConnectionError as error:
            return web.Response(status=502, text=f"pod {pod_id} port {port}: {error}\n")
        if upstream is None:
            return web.Response(
                status=PROXY_TIMEOUT_STATUS, reason="A Timeout Occurred", text="a timeout occurred\n"
            )
        try:
            return await _relay(request, upstream)
        except aiohttp.ClientConnectionError as error:
            return web.Response(status=502, text=f"pod {pod_id} port {port}: {error}\n")
        finally:
            upstream.release()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", front)
    return app


async def _relay(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    """The pod app's answer, streamed back to the client as it comes."""
    response = web.StreamResponse(
        status=upstream.status,
        reason=upstream.reason,
        headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP},
    )
    await response.prepare(request)
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)
    await response.write_eof()
    return response


def _front_target(request: web.Request) -> tuple[str, int, str] | None:
    """(pod id, port, path with query) from the path prefix `/<podId>-<port>` or the Host header."""
    host = _FRONT_HOST.match(request.headers.get("Host", ""))
    if host is not None:
        return host.group(1), int(host.group(2)), request.path_qs
    path = _FRONT_PATH.match(request.path)
    if path is None:
        return None
    rest = path.group(3) or "/"
    query = f"?{request.query_string}" if request.query_string else ""
    return path.group(1), int(path.group(2)), rest + query
