"""The router's admin listener: `/-/healthz`, `/-/readyz`, `/-/status` and `/-/metrics`, on a port of
their own (`--admin-listen`), never on the traffic port.

Why apart: the status page holds every Offload's namespace, name, hosts, prefixes and weights, the
away endpoints' URLs (a RunPod proxy URL can be called directly, around the router) and the check
URLs. On the traffic port, anyone who can send the router a request would read it. The admin port is
for the controller (which weight each replica applies; the metrics its gates judge), Prometheus and
the kubelet's probes, and the manifests let only those in (a NetworkPolicy).

`/-/healthz` says the process answers (liveness); `/-/readyz` says it serves traffic (the table is
loaded and it is not stopping), so a stopping replica leaves its Service's endpoints. The status and
metrics come from an `Answer`: the router's own in a single process (`local_answer`), the
supervisor's merge of its workers' otherwise (`workers.Supervisor.answer`). aiohttp serves it: a few
requests a minute need no hand-rolled parser.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from vk_provider.offload.names import ROUTER_ADMIN_PORT
from vk_provider.router.metrics import CONTENT_TYPE

if TYPE_CHECKING:
    from vk_provider.router.proxy import Router

logger = logging.getLogger(__name__)

DEFAULT_ADMIN_LISTEN = f"0.0.0.0:{ROUTER_ADMIN_PORT}"
STATUS_PATH = "/-/status"
METRICS_PATH = "/-/metrics"
JSON = "application/json"
TEXT = "text/plain; charset=utf-8"


@dataclasses.dataclass(frozen=True, slots=True)
class AdminAnswer:
    status: int
    content_type: str
    body: bytes


Answer = Callable[[str], Awaitable[AdminAnswer]]
"""The whole router's answer for `STATUS_PATH` or `METRICS_PATH`."""


def local_answer(router: Router) -> Answer:
    """Status and metrics of a router that serves from this process alone."""

    async def answer(path: str) -> AdminAnswer:
        if path == STATUS_PATH:
            return AdminAnswer(200, JSON, json.dumps(router.status()).encode())
        return AdminAnswer(200, CONTENT_TYPE, router.metrics.exposition())

    return answer


def admin_app(answer: Answer, ready: Callable[[], bool]) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(request: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ok\n")
        return web.Response(status=503, text="not serving traffic: stopping, or the table is not loaded\n")

    async def answered(request: web.Request) -> web.Response:
        reply = await answer(request.path)
        return web.Response(
            status=reply.status, body=reply.body, headers={"Content-Type": reply.content_type}
        )

    app = web.Application()
    app.router.add_get("/-/healthz", healthz)
    app.router.add_get("/-/readyz", readyz)
    app.router.add_get(STATUS_PATH, answered)
    app.router.add_get(METRICS_PATH, answered)
    return app


async def start_admin(host: str, port: int, answer: Answer, ready: Callable[[], bool]) -> web.AppRunner:
    """Listen on `host:port` (port 0: any free one; `bound_port` says which); the caller cleans up
    the runner. Raises OSError when the address cannot be bound."""
    runner = web.AppRunner(admin_app(answer, ready), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    logger.info("router admin (status, metrics, health) on %s:%d", host, bound_port(runner))
    return runner


def bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple):
            return int(address[1])
    raise RuntimeError("the admin listener has no TCP address")
