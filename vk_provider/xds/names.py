"""The names Envoy knows our resources by, and the xDS type URLs.

Clusters are named `<namespace>/<name>/<side>`, the Offload's key and the side: `/` cannot occur in a
Kubernetes name, so the name says unambiguously which Offload and side it is. The migration gates
read per-side statistics by these names (`envoy_cluster_name` in `/stats/prometheus`).
"""

from __future__ import annotations

from vk_provider.router.table import Route, Side

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
    return f"{route.namespace}/{route.name}/{side}"


def stat_name(cluster: str) -> str:
    """The name a cluster's statistics carry.

    Envoy's default tag extraction takes the cluster name up to the first `.`, so a dotted Offload
    name (Kubernetes names may have dots) would lose the rest of its name from `envoy_cluster_name`
    and spill it into the metric's name. `_` cannot occur in a Kubernetes name, so the swap is
    unambiguous.
    """
    return cluster.replace(".", "_")
