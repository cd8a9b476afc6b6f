"""The traffic router: sends each Offload's requests home or away by its current weight.

`table` says what a route is, `balancing` which endpoint a request gets, `proxy` forwards and
streams, `metrics` counts per route and side for the migration controller's gates. Feeding the
table from the cluster (EndpointSlices, pods, Offloads) is a separate layer on top.
"""

from __future__ import annotations

from vk_provider.router.balancing import Balancer, EjectionPolicy, Pick
from vk_provider.router.metrics import RouterMetrics
from vk_provider.router.proxy import ProxySettings, Router, start
from vk_provider.router.table import Endpoint, Route, RouteMatch, RouteTable, Side

__all__ = [
    "Balancer",
    "EjectionPolicy",
    "Endpoint",
    "Pick",
    "ProxySettings",
    "Route",
    "RouteMatch",
    "RouteTable",
    "Router",
    "RouterMetrics",
    "Side",
    "start",
]
