"""`vk-provider xds` over HTTP: `/-/status` (the weight each Envoy has applied), `/-/metrics`, `/-/healthz`.

The migration controller takes a weight step as applied only once every replica of the data plane
serves it. The built-in router says so itself, at each replica's `/-/status`; an Envoy cannot, but the
xDS server knows from the ACKs which version each Envoy has applied, and from its `WeightHistory`
which weight that version gives each route. So the controller asks this server, once, for every
Envoy. The document keeps the router's words where the two overlap (a route's `namespace`, `name`,
`away_weight`, `endpoints.<side>.total` and `usable`) and adds, per route, `applied`: each connected
Envoy's node id → the route's weight in the newest version it has ACKed, or null when that version
does not carry the route, is older than the history, or the Envoy has ACKed nothing yet. A route whose
home side is an InferencePool has `picker` too: the pool, its picker's addresses, whether it fails open,
and the problem that leaves it none ('' when there is none).

Everything is read at request (or scrape) time from the server's own bookkeeping: serving it costs
the xDS streams nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from vk_provider.kit.buildinfo import register_build_info
from vk_provider.routetable.table import SIDES, Route
from vk_provider.xds.server import XdsServer
from vk_provider.xds.session import Nack

logger = logging.getLogger(__name__)

NAMESPACE = "vk_provider_xds"


def status_document(server: XdsServer) -> dict[str, Any]:
    """The `/-/status` document (see the module's docstring)."""
    acked = server.acked()
    nacks = server.nacks()
    return {
        "version": server.version,
        "envoys": [
            {
                "node": node,
                "applied_version": acked[node],
                "nacks": [_nack_entry(nack) for nack in _in_type_order(nacks.get(node, []))],
            }
            for node in sorted(acked)
        ],
        "routes": [_route_entry(server, route, acked) for route in server.table.routes],
    }


def _nack_entry(nack: Nack) -> dict[str, Any]:
    return {"type_url": nack.type_url, "version": nack.version, "message": nack.message}


def _in_type_order(nacks: Iterable[Nack]) -> list[Nack]:
    return sorted(nacks, key=lambda nack: (nack.type_url, nack.version))


def _route_entry(server: XdsServer, route: Route, acked: dict[str, int]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "namespace": route.namespace,
        "name": route.name,
        "away_weight": route.away_weight,
        "endpoints": _side_counts(route),
        "applied": {
            node: server.weights.weight(version, route.namespace, route.name)
            for node, version in sorted(acked.items())
        },
    }
    if route.picker is not None:
        # The InferencePool's endpoint picker the home share asks: the controller checks it answers.
        entry["picker"] = {
            "pool": route.picker.pool,
            "addresses": list(route.picker.addresses),
            "fail_open": route.picker.fail_open,
            "problem": route.picker.problem,
        }
    return entry


def _side_counts(route: Route) -> dict[str, dict[str, int]]:
    """Per side, as the router counts them, less what only the router knows (its own ejections and
    requests in flight: Envoy ejects by itself): usable means not terminating."""
    return {
        side: {
            "total": len(route.endpoints(side)),
            "usable": sum(1 for endpoint in route.endpoints(side) if not endpoint.terminating),
        }
        for side in SIDES
    }


class _XdsCollector:
    """The gauges, computed from the server's bookkeeping at each scrape."""

    def __init__(self, server: XdsServer) -> None:
        self._server = server

    def collect(self) -> Iterable[Metric]:
        acked = self._server.acked()
        nacks = self._server.nacks()
        version = GaugeMetricFamily(
            f"{NAMESPACE}_version", "The newest version of the resources published (0: none yet)."
        )
        version.add_metric([], self._server.version)
        connected = GaugeMetricFamily(
            f"{NAMESPACE}_connected_envoys", "Envoys connected, told apart by node id."
        )
        connected.add_metric([], len(acked))
        applied = GaugeMetricFamily(
            f"{NAMESPACE}_envoy_applied_version",
            "The newest version each connected Envoy has ACKed for every resource type (0: none yet).",
            labels=["node"],
        )
        refused = GaugeMetricFamily(
            f"{NAMESPACE}_nacks",
            "Versions each connected Envoy refused and no newer accepted version has replaced (per type).",
            labels=["node"],
        )
        for node in sorted(acked):
            applied.add_metric([node], acked[node])
            refused.add_metric([node], len(nacks.get(node, [])))
        return [version, connected, applied, refused]


def metrics_registry(server: XdsServer) -> CollectorRegistry:
    """A registry of its own, so that two servers in one process (tests) never share series."""
    registry = CollectorRegistry()
    register_build_info(registry)
    registry.register(_XdsCollector(server))
    return registry


def status_app(server: XdsServer) -> web.Application:
    registry = metrics_registry(server)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def status(_: web.Request) -> web.Response:
        return web.json_response(status_document(server))

    async def metrics(_: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(registry))
        response.headers["Content-Type"] = CONTENT_TYPE_PLAIN_0_0_4
        return response

    app = web.Application()
    app.router.add_get("/-/healthz", healthz)
    app.router.add_get("/-/status", status)
    app.router.add_get("/-/metrics", metrics)
    return app


@contextlib.asynccontextmanager
async def serving_status(server: XdsServer, host: str, port: int) -> AsyncIterator[int]:
    """Serve `server`'s status on `host:port` (0: any free port) while inside; yields the port."""
    runner = web.AppRunner(status_app(server), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = _bound_port(runner, port)
        logger.info("xDS status on http://%s:%d (/-/status, /-/metrics, /-/healthz)", _bracketed(host), bound)
        yield bound
    finally:
        await runner.cleanup()


def _bound_port(runner: web.AppRunner, asked: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return asked


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
