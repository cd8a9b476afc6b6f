"""A route table in Envoy's terms: the resources one xDS version carries.

One listener, one route configuration, and per route a home cluster (EDS, with its load assignment)
and an away cluster (endpoints inline); see `listener`, `routes` and `clusters` for the why of each.
Every resource is parsed into its protobuf message here, so a field Envoy does not know fails the
build (and the tests), not the Envoy that receives it.

A pure function of the table: equal tables give equal resources, so an unchanged table is not a new
version.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import any_pb2, json_format

from vk_provider.routetable.table import RouteTable
from vk_provider.xds import protos
from vk_provider.xds.clusters import UpstreamTrust, away_cluster, home_cluster, home_load_assignment
from vk_provider.xds.listener import listener
from vk_provider.xds.names import (
    CLUSTER_TYPE,
    LISTENER_TYPE,
    LOAD_ASSIGNMENT_TYPE,
    ROUTE_CONFIGURATION_TYPE,
    cluster_name,
)
from vk_provider.xds.routes import route_configuration
from vk_provider.xds.sides import LeftOut, plan_route

protos.register()


@dataclasses.dataclass(frozen=True)
class EnvoySettings:
    """What the resources take besides the table."""

    listener_port: int = 8080
    listener_address: str = "0.0.0.0"  # noqa: S104 - the data plane serves the network
    trust: UpstreamTrust = dataclasses.field(default_factory=UpstreamTrust)


@dataclasses.dataclass(frozen=True)
class Resources:
    """Packed resources by type URL, then by name; and the table's endpoints Envoy does not get."""

    by_type: Mapping[str, Mapping[str, any_pb2.Any]]
    left_out: tuple[LeftOut, ...] = ()

    def of_type(self, type_url: str) -> Mapping[str, any_pb2.Any]:
        return self.by_type.get(type_url, {})

    def same_as(self, other: Resources) -> bool:
        return self.by_type == other.by_type


def build_resources(table: RouteTable, settings: EnvoySettings | None = None) -> Resources:
    settings = settings or EnvoySettings()
    plans = [plan_route(route) for route in table.routes]
    clusters: list[dict[str, Any]] = []
    assignments: list[dict[str, Any]] = []
    for plan in plans:
        home = cluster_name(plan.route, "home")
        clusters.append(home_cluster(home))
        assignments.append(home_load_assignment(home, plan.home))
        clusters.append(away_cluster(cluster_name(plan.route, "away"), plan.away, settings.trust))
    return Resources(
        by_type={
            LISTENER_TYPE: _packed([listener(settings.listener_address, settings.listener_port)]),
            ROUTE_CONFIGURATION_TYPE: _packed([route_configuration(plans, table.host_owners)]),
            CLUSTER_TYPE: _packed(clusters),
            LOAD_ASSIGNMENT_TYPE: _packed(assignments, name_field="cluster_name"),
        },
        left_out=tuple(left for plan in plans for left in (*plan.home.left_out, *plan.away.left_out)),
    )


def pack(resource: dict[str, Any]) -> any_pb2.Any:
    """A resource written as Envoy's JSON (with its `@type`) → the protobuf Any xDS carries."""
    return json_format.ParseDict(resource, any_pb2.Any())


def _packed(resources: Iterable[dict[str, Any]], name_field: str = "name") -> dict[str, any_pb2.Any]:
    return {str(resource[name_field]): pack(resource) for resource in resources}
