"""Shared pieces of the xDS tests: route tables to serve, and resources read back as Envoy's JSON."""

from __future__ import annotations

from typing import Any

from google.protobuf import any_pb2, json_format

from vk_provider.routetable.table import Endpoint, Route, RouteMatch, RouteTable
from vk_provider.xds.names import CLUSTER_TYPE, LOAD_ASSIGNMENT_TYPE, ROUTE_CONFIGURATION_TYPE
from vk_provider.xds.resources import Resources


def route(
    *,
    away_weight: int = 0,
    home: tuple[Endpoint, ...] = (),
    away: tuple[Endpoint, ...] = (),
    hosts: tuple[str, ...] = ("chat.example.com",),
    path_prefix: str = "",
    name: str = "chat",
    namespace: str = "default",
) -> Route:
    return Route(namespace, name, 1, RouteMatch(hosts, path_prefix), away_weight, home, away)


def table(*routes: Route) -> RouteTable:
    return RouteTable.of(routes)


def as_dict(resource: any_pb2.Any) -> dict[str, Any]:
    """A packed resource as Envoy's JSON, with the proto field names (as our builders write them)."""
    return json_format.MessageToDict(resource, preserving_proto_field_name=True)


def cluster(resources: Resources, name: str) -> dict[str, Any]:
    return as_dict(resources.of_type(CLUSTER_TYPE)[name])


def load_assignment(resources: Resources, name: str) -> dict[str, Any]:
    return as_dict(resources.of_type(LOAD_ASSIGNMENT_TYPE)[name])


def virtual_hosts(resources: Resources) -> list[dict[str, Any]]:
    (configuration,) = resources.of_type(ROUTE_CONFIGURATION_TYPE).values()
    hosts: list[dict[str, Any]] = as_dict(configuration)["virtual_hosts"]
    return hosts


def route_entry(resources: Resources, key: str, host: str = "*") -> dict[str, Any]:
    """The route entry named `key` in the virtual host serving `host` ("*": the catch-all)."""
    for virtual_host in virtual_hosts(resources):
        if host in virtual_host["domains"]:
            for entry in virtual_host["routes"]:
                if entry["name"] == key:
                    return entry
    raise AssertionError(f"no route {key} for host {host}")


def weights(
    resources: Resources, key: str = "default/chat", host: str = "chat.example.com"
) -> dict[str, int]:
    """Cluster name → weight of a route (empty when it answers by itself)."""
    entry = route_entry(resources, key, host)
    if "route" not in entry:
        return {}
    return {c["name"]: c["weight"] for c in entry["route"]["weighted_clusters"]["clusters"]}
