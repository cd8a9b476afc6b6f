"""The traffic router: sends each Offload's requests home or away by its current weight.

The route table is `vk_provider.routetable`'s, shared with the xDS server: what a route is, and
feeding the table from the cluster (EndpointSlices, pods, Offloads). Here, `balancing` says which
endpoint a request gets, `proxy` holds the state every request reads, `server` listens, `client`
(client connections), `relay` (one exchange) and `upstream` (endpoint connections) forward and
stream, `metrics` counts per route and side for the migration controller's gates.
"""

from __future__ import annotations

from vk_provider.router.balancing import Balancer, EjectionPolicy, Pick
from vk_provider.router.metrics import RouterMetrics
from vk_provider.router.proxy import ProxySettings, Router
from vk_provider.router.server import ProxyServer, start
from vk_provider.routetable.table import Endpoint, Route, RouteMatch, RouteTable, Side

__all__ = [
    "Balancer",
    "EjectionPolicy",
    "Endpoint",
    "Pick",
    "ProxyServer",
    "ProxySettings",
    "Route",
    "RouteMatch",
    "RouteTable",
    "Router",
    "RouterMetrics",
    "Side",
    "start",
]
