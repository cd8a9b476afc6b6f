"""The names Envoy knows our resources by, and the xDS type URLs.

Clusters are named `<namespace>/<name>/<side>`, and their statistics carry that name with dots
swapped (`vk_provider.offload.names`: the controller's gates read them by the same rule).
"""

from __future__ import annotations

from vk_provider.offload.names import envoy_cluster
from vk_provider.routetable.table import Route, Side

LISTENER_NAME = "vk-provider"
ROUTE_CONFIGURATION_NAME = "vk-provider"


def type_url(message: str) -> str:
    """The URL naming a message type, in xDS responses and in the `@type` of a resource's JSON."""
    return f"type.googleapis.com/{message}"


LISTENER_TYPE = type_url("envoy.config.listener.v3.Listener")
ROUTE_CONFIGURATION_TYPE = type_url("envoy.config.route.v3.RouteConfiguration")
CLUSTER_TYPE = type_url("envoy.config.cluster.v3.Cluster")
LOAD_ASSIGNMENT_TYPE = type_url("envoy.config.endpoint.v3.ClusterLoadAssignment")

PUSH_ORDER = (CLUSTER_TYPE, LOAD_ASSIGNMENT_TYPE, LISTENER_TYPE, ROUTE_CONFIGURATION_TYPE)
"""The order a new version goes out on a stream: what is referenced before what references it
(clusters and their endpoints before the routes that send traffic to them), as the xDS protocol's
"make before break" asks, so a route never points at a cluster its Envoy does not have yet."""

WILDCARD_TYPES = frozenset({LISTENER_TYPE, CLUSTER_TYPE})
"""Types an Envoy asks for as a whole; it names the route configurations and load assignments it wants."""


def cluster_name(route: Route, side: Side) -> str:
    return envoy_cluster(route.namespace, route.name, side)
