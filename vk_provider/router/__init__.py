"""The traffic router: sends each Offload's requests home or away by its current weight.

`table` says what a route is, `balancing` which endpoint a request gets, `proxy` holds the state every
request reads, `core` (client connections) and `upstream` (endpoint connections) forward and stream,
`metrics` counts per route and side for the migration controller's gates. Feeding the table from the
cluster (EndpointSlices, pods, Offloads) is a separate layer on top (`feed`).
"""

from __future__ import annotations

from vk_provider.router.balancing import Balancer, EjectionPolicy, Pick
from vk_provider.router.core import ProxyServer, start
from vk_provider.router.metrics import RouterMetrics
from vk_provider.router.proxy import ProxySettings, Router
from vk_provider.router.table import Endpoint, Route, RouteMatch, RouteTable, Side

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
