"""A route table in Envoy's terms: the resources one xDS version carries.

One listener, one route configuration, and per route a home cluster (EDS, with its load assignment)
and an away cluster (endpoints inline), and per InferencePool a home side names, its endpoint picker's
cluster (EDS too); see `listener`, `routes`, `clusters` and `pickers` for the why of each.
Every resource is parsed into its protobuf message here, so a field Envoy does not know fails the
build (and the tests), not the Envoy that receives it.

A pure function of the table: equal tables give equal resources, so an unchanged table is not a new
version.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import any_pb2, json_format
from google.protobuf.message import Message

from vk_provider.routetable.table import Route, RouteTable
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
from vk_provider.xds.pickers import (
    picked_host_policy,
    picker_cluster,
    picker_cluster_name,
    picker_load_assignment,
)
from vk_provider.xds.routes import route_configuration
from vk_provider.xds.sides import LeftOut, RoutePlan, SidePlan, plan_route

protos.register()
_ROUTE_CONFIGURATION = protos.message_class("envoy.config.route.v3.RouteConfiguration")
_VIRTUAL_HOST = protos.message_class("envoy.config.route.v3.VirtualHost")


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


class ResourceCache:
    """The packed resources of the last build, by what they are made of, kept by whoever builds
    again (the xDS server, on every table): parsing Envoy's JSON into protobuf is nearly all a build
    costs (about a millisecond per route), and one change of a thousand-route table leaves all but a
    route or two as they were. Per route, its plan and clusters by its name and endpoints (a weight
    changes the route configuration only); per virtual host, its message by its JSON. A build keeps
    only what it used, so the cache is as large as the table.
    """

    def __init__(self) -> None:
        self._routes: dict[tuple[Any, ...], _RouteResources] = {}
        self._used_routes: dict[tuple[Any, ...], _RouteResources] = {}
        self._virtual_hosts: dict[str, Message] = {}
        self._used_virtual_hosts: dict[str, Message] = {}

    def route(self, route: Route, trust: UpstreamTrust) -> _RouteResources:
        key = (route.namespace, route.name, route.home, route.away, route.picker, trust)
        found = self._used_routes.get(key) or self._routes.get(key)
        if found is None:
            found = _route_resources(route, trust)
        self._used_routes[key] = found
        return found

    def virtual_host(self, virtual_host: dict[str, Any]) -> Message:
        key = json.dumps(virtual_host, sort_keys=True)
        found = self._used_virtual_hosts.get(key) or self._virtual_hosts.get(key)
        if found is None:
            found = json_format.ParseDict(virtual_host, _VIRTUAL_HOST())
        self._used_virtual_hosts[key] = found
        return found

    def finish(self) -> None:
        self._routes, self._used_routes = self._used_routes, {}
        self._virtual_hosts, self._used_virtual_hosts = self._used_virtual_hosts, {}


@dataclasses.dataclass(frozen=True)
class _RouteResources:
    """A route's sides as Envoy gets them (its plan without the route), and its three resources."""

    home: SidePlan
    away: SidePlan
    home_cluster: tuple[str, any_pb2.Any]
    load_assignment: tuple[str, any_pb2.Any]
    away_cluster: tuple[str, any_pb2.Any]
    picker_cluster: tuple[str, any_pb2.Any] | None = None
    """An InferencePool's endpoint picker, for a route whose home side is one, and its endpoints."""
    picker_assignment: tuple[str, any_pb2.Any] | None = None


def _route_resources(route: Route, trust: UpstreamTrust) -> _RouteResources:
    plan = plan_route(route)
    home = cluster_name(route, "home")
    away = cluster_name(route, "away")
    picker = route.picker if route.picker is not None and not route.picker.problem else None
    policy = picked_host_policy() if picker is not None else None
    return _RouteResources(
        plan.home,
        plan.away,
        (home, pack(home_cluster(home, load_balancing_policy=policy))),
        (home, pack(home_load_assignment(home, plan.home))),
        (away, pack(away_cluster(away, plan.away, trust))),
        None if picker is None else (picker_cluster_name(picker), pack(picker_cluster(picker))),
        None if picker is None else (picker_cluster_name(picker), pack(picker_load_assignment(picker))),
    )


def build_resources(
    table: RouteTable, settings: EnvoySettings | None = None, cache: ResourceCache | None = None
) -> Resources:
    """The table's resources. `cache`, kept from one build to the next, spares parsing again what
    an earlier build parsed; the resources are the same with or without it."""
    settings = settings or EnvoySettings()
    cache = cache if cache is not None else ResourceCache()
    clusters: dict[str, any_pb2.Any] = {}
    assignments: dict[str, any_pb2.Any] = {}
    plans = []
    for route in table.routes:
        made = cache.route(route, settings.trust)
        plans.append(RoutePlan(route, made.home, made.away))
        for resources, (name, packed) in (
            (clusters, made.home_cluster),
            (assignments, made.load_assignment),
            (clusters, made.away_cluster),
            *(((clusters, made.picker_cluster),) if made.picker_cluster is not None else ()),
            *(((assignments, made.picker_assignment),) if made.picker_assignment is not None else ()),
        ):
            resources[name] = packed  # a pool's picker: one cluster, however many routes name it
    configuration = route_configuration(plans, table.host_owners)
    # Parsed a virtual host at a time (the cache keeps those a change leaves as they were), then put
    # together: the message parsing the whole configuration's JSON at once would give.
    message = _ROUTE_CONFIGURATION(name=configuration["name"])
    message.virtual_hosts.extend(cache.virtual_host(host) for host in configuration["virtual_hosts"])  # type: ignore[attr-defined]
    packed_configuration = any_pb2.Any()
    packed_configuration.Pack(message)
    cache.finish()
    return Resources(
        by_type={
            LISTENER_TYPE: _packed([listener(settings.listener_address, settings.listener_port)]),
            ROUTE_CONFIGURATION_TYPE: {str(configuration["name"]): packed_configuration},
            CLUSTER_TYPE: clusters,
            LOAD_ASSIGNMENT_TYPE: assignments,
        },
        left_out=tuple(left for plan in plans for left in (*plan.home.left_out, *plan.away.left_out)),
    )


def pack(resource: dict[str, Any]) -> any_pb2.Any:
    """A resource written as Envoy's JSON (with its `@type`) → the protobuf Any xDS carries."""
    return json_format.ParseDict(resource, any_pb2.Any())


def _packed(resources: Iterable[dict[str, Any]], name_field: str = "name") -> dict[str, any_pb2.Any]:
    return {str(resource[name_field]): pack(resource) for resource in resources}
