"""Build a `RouteTable` from the cluster's raw JSON: Offloads, EndpointSlices and away pods.

Pure: no API calls, no clocks, no randomness. Whoever watches the cluster hands the current objects
in and swaps the returned table into the router. The output is sorted (routes by namespace/name,
endpoints by URL), so building twice from the same objects, in any order, gives equal tables and the
caller can skip a swap when nothing changed.

Home endpoints come from the EndpointSlices of the Offload's home Service (label
`kubernetes.io/service-name`, same namespace) that a trusted manager wrote (Kubernetes' EndpointSlice
controller, or one the operator names: `vk_provider.offload.homeslices`); a labelled slice of a home
Service from anyone else is left out and reported in `BuildResult.untrusted_slices`, for a Warning
Event. The trusted slices are read with the API's documented condition semantics:

- `ready` true (a missing `ready` counts as true, as the API says) and not terminating: a live
  endpoint;
- `terminating` true and `serving` true (a missing `serving` defers to `ready`): a draining
  endpoint (`terminating=True`: its in-flight requests finish, it gets no new ones);
- anything else: left out.

The port is the slice's port named `http`, else its first port; a slice without a usable port gives
nothing. IPv6 addresses are written in brackets. If the same URL shows up twice (an endpoint can be in
two slices while they are rebalanced), the live reading beats the draining one.

Away endpoints are the pods in the Offload's namespace labelled `offload.vk-provider.dev/offload=<name>`
and bound (`spec.nodeName`) to one of our virtual nodes (a Node labelled
`node-restriction.kubernetes.io/vk-provider=true`, handed in; not just `type=virtual-kubelet`, which any
virtual-kubelet carries, AKS's virtual nodes too). A pod with a traffic address bound to any other node
is left out and reported in `BuildResult.foreign`, for a Warning Event. The traffic address (the URL
the virtual node publishes) and the auth marker are the messages of the pod status conditions
`vk-provider.dev/TrafficAddress` and `vk-provider.dev/TrafficAuth`, taken only with the node's seal over
both and the pod's UID in `vk-provider.dev/TrafficSignature`, verified with the traffic keys handed in
(`vk_provider.kit.traffic_signature`): whoever else may write pod status or label Nodes, no one without
the key can publish an address. A pod without a seal that verifies is left out and reported in
`BuildResult.unverified`, for a Warning Event (`accept_unsigned` lets a pod with no seal at all
through, for the minutes an upgrade from unsealing nodes takes; a bad seal is refused even then). The old
annotations of those names are never read, since any pod editor may set them: a pod carrying one is
reported in `BuildResult.untrusted`, for a Warning Event. A pod whose address is not an http(s) URL is
left out. A pod with an auth marker (e.g. `aws-sigv4; service=sagemaker; region=eu-west-1`, see
`vk_provider.kit.traffic_auth`) becomes a signed endpoint when the router signs for that service at that
host (`vk_provider.routetable.signingscope`: SageMaker's runtime, and the hosts the operator names); one
whose marker the router cannot or will not act on is left out, since unsigned requests would only be
refused there, and reported in `BuildResult.refused_signing`, for a Warning Event.

An away pod serves when its `Ready` condition is `True`; one being deleted
(`metadata.deletionTimestamp` set) drains. When its node is not Ready (the node daemon is down, the
node goes Unknown, and the node lifecycle controller marks its pods `Ready=False` though they run on
at the provider), a pod whose `ContainersReady` is still `True` (the node's last word: it was ready)
keeps serving as long as the router's own active checks of its address pass (`active_checks`, URL →
verdict, from `vk_provider.routetable.health`); such endpoints are marked `kept_on_active_checks`. The
same holds once the node is Ready again until it has rewritten the pod's status (the pod's `Ready`
turned False no later than the node's `Ready` turned True): otherwise the seconds between the node's
return and its first status patch of each pod would drop them all. Every
unsigned away endpoint is a check target (`BuildResult.check_targets`), checked at its address plus
the path of the pod's readiness probe (`httpGet`), else `/`.

An Offload on the `gatewayapi` data plane gets the route of the router's away-only role: away weight
100 whatever its status says (the gateway has drawn the side already).

An Offload on the `inferencepool` data plane names an InferencePool (`spec.traffic.inferencePool`)
whose pods are its home side; its route carries the pool's endpoint picker (`EndpointPicker`): the
ready endpoints of the Service the pool's `endpointPickerRef` names, read from that Service's trusted
EndpointSlices like a home Service's, and the pool's `failureMode`. A missing pool or reference is the
picker's `problem`, never a skipped route: the home side keeps serving as the pool's failure mode says.

An Offload that cannot make a `Route` (no hosts and no path prefix, a prefix not starting with `/`, no
home Service, a weight outside 0..100, no name) is skipped: `build_table` logs a warning for it, and
`build_routes` returns it as a `SkippedOffload` for callers that want to report it (e.g. as an event).

An Offload that claims a host and path prefix an older Offload already holds, or any path of a host
another namespace owns without allowing its namespace (see `vk_provider.offload.claims`), gets no
route either, skipped with the conflict as its reason, so an Offload in another namespace cannot take
any of a service's traffic. The table carries each named host's owner, so that an every-host route of
another namespace takes no path of that host either.

A route kept after its Offload was deleted (a KeptRoute, `vk_provider.offload.retained`, handed in as
`kept_routes`) becomes a home-only route under the Offload's name: away weight 0, its Service's ready
endpoints, no away side. It claims like the Offload did, so its hosts stay with its namespace.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Generic, TypeVar

from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.kit.traffic_auth import TrafficAuth, parse_traffic_auth
from vk_provider.kit.traffic_signature import TrafficKey, seal_refusal
from vk_provider.offload.claims import Claims, RouteClaim, live_claim, resolve_claims
from vk_provider.offload.homeslices import SliceManagers, manager_of
from vk_provider.offload.names import (
    OFFLOAD_LABEL,
    TRAFFIC_ADDRESS_ANNOTATION,
    TRAFFIC_ADDRESS_CONDITION,
    TRAFFIC_AUTH_ANNOTATION,
    TRAFFIC_AUTH_CONDITION,
    TRAFFIC_SIGNATURE_CONDITION,
    VIRTUAL_NODE_LABEL,
    VIRTUAL_NODE_LABEL_VALUE,
)
from vk_provider.offload.retained import RetainedRoute, retained_routes
from vk_provider.offload.status import OffloadStatus
from vk_provider.routetable.signingscope import SigningScope
from vk_provider.routetable.table import Endpoint, EndpointPicker, Route, RouteMatch, RouteTable

logger = logging.getLogger(__name__)

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
"""The label an EndpointSlice carries naming the Service it belongs to."""
GATEWAY_API = "gatewayapi"
"""An Offload whose weights a gateway applies (`spec.traffic.dataPlane`): the router serves its away
share only, so its route sends everything away (falling back home only if no away endpoint is usable)."""
INFERENCE_POOL = "inferencepool"
"""An Offload whose home side is an InferencePool: its route carries the pool's endpoint picker."""
HTTP_PORT_NAME = "http"
"""The EndpointSlice port name preferred over the first port."""
UNTRUSTED_ANNOTATIONS: Final = (TRAFFIC_ADDRESS_ANNOTATION, TRAFFIC_AUTH_ANNOTATION)
"""Where older nodes published the traffic address and marker; forgeable, so never read."""
DEFAULT_CHECK_PATH = "/"

__all__ = [
    "HTTP_PORT_NAME",
    "SERVICE_NAME_LABEL",
    "BuildMemo",
    "BuildResult",
    "CheckTarget",
    "ForeignNodePod",
    "RefusedSigning",
    "SkippedOffload",
    "UntrustedPod",
    "UntrustedSlice",
    "UnverifiedPod",
    "away_pod_fields",
    "build_routes",
    "build_table",
]


@dataclasses.dataclass(frozen=True)
class SkippedOffload:
    """An Offload left out of the table, and why."""

    namespace: str
    name: str
    reason: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True)
class UntrustedPod:
    """An away pod carrying traffic annotations the router ignored (forged, or left by an old node)."""

    namespace: str
    name: str
    uid: str
    annotations: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ForeignNodePod:
    """An away pod with a traffic address, bound to a node that is not one of ours: ignored."""

    namespace: str
    name: str
    uid: str
    node: str


@dataclasses.dataclass(frozen=True)
class RefusedSigning:
    """An away pod whose traffic-auth marker the router cannot or will not act on: left out."""

    namespace: str
    name: str
    uid: str
    reason: str


@dataclasses.dataclass(frozen=True)
class UnverifiedPod:
    """An away pod on one of our nodes whose traffic address carries no seal the router verifies."""

    namespace: str
    name: str
    uid: str
    reason: str


@dataclasses.dataclass(frozen=True)
class UntrustedSlice:
    """An EndpointSlice of a home Service written by a manager the router does not trust: ignored."""

    namespace: str
    name: str
    uid: str
    manager: str
    """Its `endpointslice.kubernetes.io/managed-by` label ("" when it has none)."""


@dataclasses.dataclass(frozen=True)
class CheckTarget:
    """An away endpoint to check actively: `url` is its traffic address, `check_url` what to GET."""

    url: str
    check_url: str


@dataclasses.dataclass(frozen=True)
class BuildResult:
    """The table built, the Offloads that could not be part of it (sorted by key), the away pods with
    ignored traffic annotations, those ignored for their node, the away endpoints to check actively,
    the away pods left out for their auth marker, the home Services' slices left out for their
    manager and the away pods left out for an address without a seal that verifies (all sorted)."""

    table: RouteTable
    skipped: tuple[SkippedOffload, ...] = ()
    untrusted: tuple[UntrustedPod, ...] = ()
    check_targets: tuple[CheckTarget, ...] = ()
    foreign: tuple[ForeignNodePod, ...] = ()
    refused_signing: tuple[RefusedSigning, ...] = ()
    untrusted_slices: tuple[UntrustedSlice, ...] = ()
    unverified: tuple[UnverifiedPod, ...] = ()


_ReadingT = TypeVar("_ReadingT")


class _Readings(Generic[_ReadingT]):
    """One kind of object's readings, by object identity, for the objects of the last build.

    An entry holds its object, so no other object can take its `id` while the entry lives. The
    mirrors replace an object on every change and never edit one in place, so the same object is
    the same content; a changed object is a new one and is read afresh.
    """

    def __init__(self) -> None:
        self._previous: dict[int, tuple[Mapping[str, Any], _ReadingT]] = {}
        self._current: dict[int, tuple[Mapping[str, Any], _ReadingT]] = {}
        self.reads = 0
        """Objects read (not found in the memo) since this was made: what a test counts."""

    def get(self, obj: Mapping[str, Any], read: Callable[[Mapping[str, Any]], _ReadingT]) -> _ReadingT:
        key = id(obj)
        entry = self._current.get(key)
        if entry is None:
            entry = self._previous.get(key)
            if entry is None or entry[0] is not obj:
                self.reads += 1
                entry = (obj, read(obj))
            self._current[key] = entry
        return entry[1]

    def clear(self) -> None:
        self._previous = {}
        self._current = {}

    def finish(self) -> None:
        """Keep what this build read; forget the objects it was not handed."""
        self._previous, self._current = self._current, {}


class BuildMemo:
    """What `build_routes` read from each Offload, EndpointSlice and away pod, kept from one build to
    the next by whoever rebuilds (the feed, on every change of its mirrors).

    Reading the objects is nearly all a build costs (an away pod's seal is an HMAC); with the memo a
    rebuild reads only the objects that are new since the last one, and reuses the routes whose
    Offload and endpoints are unchanged, so the new table shares them with the old one and comparing
    the two is cheap. What a reading depends on beyond its object (the trusted slice managers, the
    signing scope, the traffic keys) is checked on every build: a change of those reads everything again.
    """

    def __init__(self) -> None:
        self.offloads: _Readings[_OffloadReading] = _Readings()
        self.endpoint_slices: _Readings[_SliceReading | None] = _Readings()
        self.away_pods: _Readings[_PodReading | None] = _Readings()
        self.claims: _Readings[RouteClaim | None] = _Readings()
        self._routes: dict[int, tuple[Route, Route]] = {}
        """By the Offload's id: the template and the route made of it. The Offload is held by the
        offloads' readings (`finish` keeps both for the same objects), so no other takes its id."""
        self._built: dict[int, tuple[Route, Route]] = {}
        self._resolved: tuple[list[Mapping[str, Any]], list[Mapping[str, Any]], Claims] | None = None
        """The Offloads and KeptRoutes the claims were last resolved for (held, so their ids stay
        theirs), and the outcome."""
        self._managers = SliceManagers()
        self._signing_scope = SigningScope()
        self._seals = _Seals((), accept_unsigned=False)
        self._read_slice = functools.partial(_read_slice, managers=self._managers)
        self._read_pod = functools.partial(_read_pod, signing_scope=self._signing_scope, seals=self._seals)

    def start(self, managers: SliceManagers, signing_scope: SigningScope, seals: _Seals) -> None:
        if managers != self._managers:
            self.endpoint_slices.clear()
        if signing_scope != self._signing_scope or seals != self._seals:
            self.away_pods.clear()
        self._managers, self._signing_scope, self._seals = managers, signing_scope, seals
        self._read_slice = functools.partial(_read_slice, managers=managers)
        self._read_pod = functools.partial(_read_pod, signing_scope=signing_scope, seals=seals)

    def resolved_claims(
        self, offloads: list[Mapping[str, Any]], kept_routes: list[Mapping[str, Any]]
    ) -> Claims:
        """The claims of these Offloads and KeptRoutes: the last build's when they are the same objects
        (a change of a pod or a slice leaves every claim as it was)."""
        last = self._resolved
        if (
            last is not None
            and len(last[0]) == len(offloads)
            and len(last[1]) == len(kept_routes)
            and all(map(operator.is_, last[0], offloads))
            and all(map(operator.is_, last[1], kept_routes))
        ):
            return last[2]
        claims = resolve_claims(offloads, retained_routes(kept_routes), claim_of=self.claim)
        self.claims.finish()  # keep the claims of these Offloads until the claims are resolved again
        self._resolved = (offloads, kept_routes, claims)
        return claims

    def finish(self) -> None:
        for readings in (self.offloads, self.endpoint_slices, self.away_pods):
            readings.finish()
        self._routes, self._built = self._built, {}

    def offload(self, offload: Mapping[str, Any]) -> _OffloadReading:
        return self.offloads.get(offload, _read_offload)

    def claim(self, offload: Mapping[str, Any]) -> RouteClaim | None:
        return self.claims.get(offload, live_claim)

    def endpoint_slice(self, endpoint_slice: Mapping[str, Any]) -> _SliceReading | None:
        return self.endpoint_slices.get(endpoint_slice, self._read_slice)

    def away_pod(self, pod: Mapping[str, Any]) -> _PodReading | None:
        return self.away_pods.get(pod, self._read_pod)

    def route(
        self,
        offload: Mapping[str, Any],
        template: Route,
        home_service: tuple[str, str],
        home_index: _Index,
        away_index: _Index,
        *,
        picker: EndpointPicker | None = None,
    ) -> Route:
        """The Offload's route (`template`, from its reading) with its endpoints and picker: the last
        build's when nothing in it changed."""
        home = _endpoints(home_index.get(home_service, {}))
        away = _endpoints(away_index.get((template.namespace, template.name), {}))
        last = self._routes.get(id(offload))
        if (
            last is not None
            and last[0] is template
            and last[1].home == home
            and last[1].away == away
            and last[1].picker == picker
        ):
            route = last[1]
        else:
            route = dataclasses.replace(template, home=home, away=away, picker=picker)
        self._built[id(offload)] = (template, route)
        return route


def build_table(
    offloads: Iterable[Mapping[str, Any]],
    endpoint_slices: Iterable[Mapping[str, Any]],
    away_pods: Iterable[Mapping[str, Any]],
    *,
    virtual_nodes: Iterable[Mapping[str, Any]] = (),
    active_checks: Mapping[str, bool] | None = None,
    kept_routes: Iterable[Mapping[str, Any]] = (),
    signing_scope: SigningScope | None = None,
    slice_managers: SliceManagers | None = None,
    traffic_keys: Sequence[TrafficKey] = (),
    accept_unsigned: bool = False,
    inference_pools: Iterable[Mapping[str, Any]] = (),
) -> RouteTable:
    """The route table for these objects; each skipped Offload is logged as a warning."""
    result = build_routes(
        offloads,
        endpoint_slices,
        away_pods,
        virtual_nodes=virtual_nodes,
        active_checks=active_checks,
        kept_routes=kept_routes,
        signing_scope=signing_scope,
        slice_managers=slice_managers,
        traffic_keys=traffic_keys,
        accept_unsigned=accept_unsigned,
        inference_pools=inference_pools,
    )
    for skipped in result.skipped:
        logger.warning("offload %s left out of the route table: %s", skipped.key, skipped.reason)
    return result.table


def build_routes(
    offloads: Iterable[Mapping[str, Any]],
    endpoint_slices: Iterable[Mapping[str, Any]],
    away_pods: Iterable[Mapping[str, Any]],
    *,
    virtual_nodes: Iterable[Mapping[str, Any]] = (),
    active_checks: Mapping[str, bool] | None = None,
    kept_routes: Iterable[Mapping[str, Any]] = (),
    signing_scope: SigningScope | None = None,
    slice_managers: SliceManagers | None = None,
    traffic_keys: Sequence[TrafficKey] = (),
    accept_unsigned: bool = False,
    inference_pools: Iterable[Mapping[str, Any]] = (),
    memo: BuildMemo | None = None,
) -> BuildResult:
    """The route table for these objects, plus the Offloads skipped as invalid or losing their
    route's claim (no logging).

    `virtual_nodes` are our Node objects, labelled `node-restriction.kubernetes.io/vk-provider=true`
    (others are ignored); only pods bound to one of them are away endpoints. `active_checks` are the
    router's latest verdicts on away addresses (URL → passing), which keep the pods of a node gone not
    Ready serving.
    `kept_routes` are the KeptRoutes deleted Offloads left. `signing_scope` says which signed endpoints
    the router takes (default: SageMaker's runtime hosts only), `slice_managers` whose EndpointSlices
    are home endpoints (default: Kubernetes' EndpointSlice controller's only). `traffic_keys` verify
    the away pods' seals (none: no away pod is taken); `accept_unsigned` takes a pod with no seal.
    `inference_pools` are the InferencePools the `inferencepool` Offloads may name: each such route
    gets its pool's endpoint picker (`EndpointPicker`), its addresses the ready endpoints of the
    Service the pool's `endpointPickerRef` names, read like a home Service's.

    `memo`, kept by the caller from one build to the next, holds what each object read to: an object
    handed in again (the same object, not an equal copy) is not read again, so a rebuild after one
    change re-reads that change only. The result is the same with or without it.
    """
    memo = memo if memo is not None else BuildMemo()
    memo.start(
        slice_managers or SliceManagers(),
        signing_scope or SigningScope(),
        _Seals(tuple(traffic_keys), accept_unsigned),
    )
    home = _index_home_endpoints(endpoint_slices, memo)
    home_index = home.index
    away = _index_away_endpoints(away_pods, _node_states(virtual_nodes), active_checks or {}, memo)
    away_index = away.index
    routes: list[Route] = []
    skipped: list[SkippedOffload] = []
    readings = [(offload, memo.offload(offload)) for offload in offloads]
    pools = {_identity(_mapping(pool.get("metadata")))[:2]: pool for pool in inference_pools}
    for offload, reading in readings:
        if reading.template is None:
            skipped.append(SkippedOffload(reading.namespace, reading.name, reading.error))
            continue
        picker = None if reading.pool is None else _picker(reading.pool, pools, home_index)
        routes.append(
            memo.route(offload, reading.template, reading.home_service, home_index, away_index, picker=picker)
        )
    routed = {route.key for route in routes}
    claims = memo.resolved_claims(
        [offload for offload, reading in readings if reading.key in routed], list(kept_routes)
    )
    routes = _drop_claim_losers(claims, routes, skipped)
    routes.extend(_kept_route(kept, home_index) for kept in claims.kept)
    routes.sort(key=lambda route: (route.namespace, route.name))
    skipped.sort(key=lambda item: (item.namespace, item.name, item.reason))
    owners = {host: namespace for host, namespace in claims.owners.items() if host}
    # Only the slices of Services that routes read: a selector-less Service nobody offloads is none of
    # the router's business, and warning about every one in the cluster would bury the real ones.
    home_services = {reading.home_service for _, reading in readings} | {
        (kept.namespace, kept.service) for kept in claims.kept
    }
    untrusted_slices = tuple(
        found
        for key in sorted(home.untrusted.keys() & home_services)
        for found in sorted(home.untrusted[key], key=lambda found: (found.name, found.uid))
    )
    memo.finish()
    return BuildResult(
        RouteTable.of(routes, owners),
        tuple(skipped),
        away.untrusted,
        away.check_targets,
        away.foreign,
        away.refused_signing,
        untrusted_slices,
        away.unverified,
    )


def _home_service_key(offload: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, home Service) of an Offload, as the home index keys it."""
    service = _text(_mapping(_mapping(offload.get("spec")).get("home")).get("service"))
    return (_text(_mapping(offload.get("metadata")).get("namespace")), service)


def _drop_claim_losers(claims: Claims, routes: list[Route], skipped: list[SkippedOffload]) -> list[Route]:
    """The routes of the Offloads that hold their claims; each loser is recorded as skipped.

    Only Offloads that made a route claim one (the caller resolves those alone): a broken Offload
    gets no traffic, so it must not keep a valid one from getting any either. A kept route that lost
    is recorded too.
    """
    kept: list[Route] = []
    for route in routes:
        conflict = claims.conflict(route.namespace, route.name)
        if conflict is None:
            kept.append(route)
        else:
            skipped.append(SkippedOffload(route.namespace, route.name, conflict.message))
    live = {route.key for route in routes}
    for key, conflict in claims.losers.items():
        if key not in live:
            namespace, _, name = key.partition("/")
            skipped.append(SkippedOffload(namespace, name, f"kept route: {conflict.message}"))
    return kept


def _kept_route(kept: RetainedRoute, home_index: _Index) -> Route:
    """The home-only route kept after its Offload was deleted."""
    return Route(
        namespace=kept.namespace,
        name=kept.offload,
        generation=0,
        match=RouteMatch(hosts=tuple(sorted(kept.hosts)), path_prefix=kept.path_prefix),
        away_weight=0,
        home=_endpoints(home_index.get((kept.namespace, kept.service), {})),
    )


# Endpoints by (namespace, service or offload name) → {url: endpoint}.
_Index = dict[tuple[str, str], dict[str, Endpoint]]


@dataclasses.dataclass(frozen=True)
class _OffloadReading:
    """What an Offload says for the table: its route without endpoints, or why it has none."""

    namespace: str
    name: str
    home_service: tuple[str, str]
    """(namespace, home Service), as the home index keys it."""
    template: Route | None
    """The route with no endpoints yet (None when the Offload cannot make one)."""
    error: str = ""
    pool: tuple[str, str] | None = None
    """(namespace, name) of the InferencePool an `inferencepool` Offload's home side is."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


OffloadTableReading = tuple[_OffloadReading, RouteClaim | None]


def offload_table_reading(offload: Mapping[str, Any]) -> OffloadTableReading:
    """All that `build_routes` reads of an Offload: its route without endpoints (or why it makes
    none) and its claim. Two Offloads with equal readings make the same table."""
    return _read_offload(offload), live_claim(offload)


def _read_offload(offload: Mapping[str, Any]) -> _OffloadReading:
    metadata = _mapping(offload.get("metadata"))
    namespace = _text(metadata.get("namespace"))
    name = _text(metadata.get("name"))
    home_service = _home_service_key(offload)
    try:
        template = _route_template(offload, namespace, name)
    except ValueError as error:
        return _OffloadReading(namespace, name, home_service, None, str(error))
    return _OffloadReading(namespace, name, home_service, template, pool=_pool_ref(offload, namespace))


def _pool_ref(offload: Mapping[str, Any], namespace: str) -> tuple[str, str] | None:
    traffic = _mapping(_mapping(offload.get("spec")).get("traffic"))
    if traffic.get("dataPlane") != INFERENCE_POOL:
        return None
    pool = _mapping(traffic.get("inferencePool"))
    return (_text(pool.get("namespace")) or namespace, _text(pool.get("name")))


def _picker(
    pool_ref: tuple[str, str], pools: Mapping[tuple[str, str], Mapping[str, Any]], home_index: _Index
) -> EndpointPicker:
    """The pool's endpoint picker: the ready endpoints of the Service its `endpointPickerRef` names
    (in the pool's namespace), or the problem that leaves none to ask."""
    namespace, name = pool_ref
    key = f"{namespace}/{name}"
    pool = pools.get(pool_ref)
    if pool is None:
        return EndpointPicker(key, problem=f"InferencePool {key} not found")
    reference = _mapping(_mapping(pool.get("spec")).get("endpointPickerRef"))
    fail_open = reference.get("failureMode") == "FailOpen"
    service = _text(reference.get("name"))
    if not service or (reference.get("kind") or "Service") != "Service" or reference.get("group"):
        problem = f"InferencePool {key} names no endpoint picker Service (spec.endpointPickerRef)"
        return EndpointPicker(key, fail_open=fail_open, problem=problem)
    found = home_index.get((namespace, service), {})
    addresses = tuple(
        sorted(url.removeprefix("http://") for url, endpoint in found.items() if not endpoint.terminating)
    )
    return EndpointPicker(key, addresses, fail_open)


def _route_template(offload: Mapping[str, Any], namespace: str, name: str) -> Route:
    """The Offload's route with no endpoints; ValueError when it cannot make one."""
    if not name:
        raise ValueError("the Offload has no name")
    metadata = _mapping(offload.get("metadata"))
    spec = _mapping(offload.get("spec"))
    service = _text(_mapping(spec.get("home")).get("service"))
    if not service:
        raise ValueError("spec.home.service is missing")
    route_spec = _mapping(spec.get("route"))
    raw_hosts = route_spec.get("hosts") or ()
    if not isinstance(raw_hosts, list | tuple) or not all(isinstance(h, str) and h for h in raw_hosts):
        raise ValueError("spec.route.hosts must be a list of non-empty strings")
    path_prefix = route_spec.get("pathPrefix") or ""
    if not isinstance(path_prefix, str):
        raise ValueError("spec.route.pathPrefix must be a string")
    match = RouteMatch(hosts=tuple(sorted(raw_hosts)), path_prefix=path_prefix)
    away_weight = OffloadStatus.from_raw(_mapping(offload.get("status"))).away_weight or 0
    if _mapping(spec.get("traffic")).get("dataPlane") == GATEWAY_API:
        # The router is the HTTPRoute's away backend: what reaches it is the away share already.
        away_weight = 100
    generation = _integer(metadata.get("generation"), "metadata.generation")
    return Route(namespace=namespace, name=name, generation=generation, match=match, away_weight=away_weight)


def _endpoints(found: Mapping[str, Endpoint]) -> tuple[Endpoint, ...]:
    return tuple(found[url] for url in sorted(found))


def _add(index: _Index, key: tuple[str, str], endpoint: Endpoint) -> None:
    """Record an endpoint; a live reading of a URL beats a draining one."""
    side = index.setdefault(key, {})
    known = side.get(endpoint.url)
    if known is not None and not known.terminating:
        return
    side[endpoint.url] = endpoint


@dataclasses.dataclass(frozen=True)
class _HomeReading:
    index: _Index
    untrusted: Mapping[tuple[str, str], list[UntrustedSlice]]
    """By (namespace, service): the slices labelled with a Service but written by an untrusted manager."""


@dataclasses.dataclass(frozen=True)
class _SliceReading:
    """What a labelled EndpointSlice gives: its home endpoints, or the report of its manager."""

    key: tuple[str, str]
    """(namespace, Service)."""
    endpoints: tuple[Endpoint, ...] = ()
    untrusted: UntrustedSlice | None = None


def _read_slice(endpoint_slice: Mapping[str, Any], managers: SliceManagers) -> _SliceReading | None:
    """None for a slice with no Service label."""
    metadata = _mapping(endpoint_slice.get("metadata"))
    service = _text(_mapping(metadata.get("labels")).get(SERVICE_NAME_LABEL))
    if not service:
        return None
    key = (_text(metadata.get("namespace")), service)
    if not managers.trusts(endpoint_slice):
        found = UntrustedSlice(
            key[0], _text(metadata.get("name")), _text(metadata.get("uid")), manager_of(endpoint_slice)
        )
        return _SliceReading(key, untrusted=found)
    port = _slice_port(endpoint_slice.get("ports"))
    if port is None:
        return _SliceReading(key)
    ipv6_slice = endpoint_slice.get("addressType") == "IPv6"
    endpoints: list[Endpoint] = []
    for endpoint in endpoint_slice.get("endpoints") or ():
        if not isinstance(endpoint, Mapping):
            continue
        terminating = _endpoint_state(_mapping(endpoint.get("conditions")))
        if terminating is None:
            continue
        for address in endpoint.get("addresses") or ():
            if isinstance(address, str) and address:
                host = f"[{address}]" if ipv6_slice or ":" in address else address
                endpoints.append(Endpoint(f"http://{host}:{port}", terminating=terminating))
    return _SliceReading(key, tuple(endpoints))


def _index_home_endpoints(endpoint_slices: Iterable[Mapping[str, Any]], memo: BuildMemo) -> _HomeReading:
    index: _Index = {}
    untrusted: dict[tuple[str, str], list[UntrustedSlice]] = {}
    for endpoint_slice in endpoint_slices:
        reading = memo.endpoint_slice(endpoint_slice)
        if reading is None:
            continue
        if reading.untrusted is not None:
            untrusted.setdefault(reading.key, []).append(reading.untrusted)
            continue
        for endpoint in reading.endpoints:
            _add(index, reading.key, endpoint)
    return _HomeReading(index, untrusted)


def _endpoint_state(conditions: Mapping[str, Any]) -> bool | None:
    """None: left out; False: live; True: draining. Nil conditions read as the API documents."""
    ready = conditions.get("ready") is not False  # nil means true
    serving_value = conditions.get("serving")
    serving = ready if serving_value is None else serving_value is True
    if conditions.get("terminating") is True:
        return True if serving else None
    return False if ready else None


def _slice_port(ports: Any) -> int | None:
    """The port named `http`, else the first one; None when the slice has no usable port."""
    candidates = [port for port in ports or () if isinstance(port, Mapping)]
    named = [port for port in candidates if port.get("name") == HTTP_PORT_NAME]
    for port in (named or candidates)[:1]:
        number = port.get("port")
        if isinstance(number, int) and not isinstance(number, bool) and 0 < number < 65536:
            return number
    return None


@dataclasses.dataclass(frozen=True)
class _AwayReading:
    index: _Index
    untrusted: tuple[UntrustedPod, ...]
    check_targets: tuple[CheckTarget, ...]
    foreign: tuple[ForeignNodePod, ...]
    refused_signing: tuple[RefusedSigning, ...]
    unverified: tuple[UnverifiedPod, ...]


@dataclasses.dataclass(frozen=True)
class _Seals:
    """How away pods' seals are judged (see `build_routes`)."""

    keys: tuple[TrafficKey, ...]
    accept_unsigned: bool

    def refusal(self, pod: Mapping[str, Any], address: str, marker: str) -> str | None:
        text = _condition_message(pod, TRAFFIC_SIGNATURE_CONDITION)
        if not text.strip() and self.accept_unsigned:
            return None
        uid = _text(_mapping(pod.get("metadata")).get("uid"))
        return seal_refusal(self.keys, text, uid=uid, address=address, marker=marker)


@dataclasses.dataclass(frozen=True)
class _NodeState:
    ready: bool
    ready_since: datetime | None
    """When the node's `Ready` condition last turned `True` (None when not Ready, or not said)."""


def _node_states(nodes: Iterable[Mapping[str, Any]]) -> dict[str, _NodeState]:
    """Our virtual nodes' names → whether its `Ready` condition is `True` (False, Unknown or none: not)."""
    states: dict[str, _NodeState] = {}
    for node in nodes:
        metadata = _mapping(node.get("metadata"))
        name = _text(metadata.get("name"))
        if name and _mapping(metadata.get("labels")).get(VIRTUAL_NODE_LABEL) == VIRTUAL_NODE_LABEL_VALUE:
            ready = _find_condition(node, "Ready")
            is_ready = ready.get("status") == "True"
            since = parse_timestamp(ready.get("lastTransitionTime")) if is_ready else None
            states[name] = _NodeState(is_ready, since)
    return states


@dataclasses.dataclass(frozen=True)
class _PodReading:
    """What an away pod says, read once: everything but what depends on its node and the checks."""

    namespace: str
    offload: str
    identity: tuple[str, str, str]
    """Namespace, name and UID, as the reports of ignored pods start."""
    forged: tuple[str, ...]
    """The old traffic annotations it carries."""
    node_name: str
    address: str
    """Its published traffic address ("" when there is none)."""
    url: str | None
    """The address as an endpoint URL; None when it is not an http(s) URL."""
    auth: TrafficAuth | _Distrust | None
    """As `_trusted_auth` says (None also when there is no URL)."""
    check_target: CheckTarget | None
    """Its address and what to GET there, when its address is taken without signing."""
    ready: bool
    """Its `Ready` condition is `True`."""
    containers_ready: bool
    """Its `ContainersReady` condition is `True`."""
    ready_flipped: datetime | None
    """When its `Ready` condition last changed."""
    deleting: bool
    serving: Endpoint | None = None
    """Its endpoint when it is Ready, trusted and takes plain or signed requests: the same object
    from build to build, so routes built of it compare equal at a glance."""


def away_pod_fields(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What the route feed keeps of an away pod: the fields `build_routes` reads, and the identity a
    mirror needs. A pod of a real cluster carries its whole spec (containers, environment, volumes,
    tolerations) and container statuses, several times what the table needs, for every away pod.

    Kept: metadata's name, namespace, uid, resourceVersion, deletionTimestamp, the Offload label
    and the old traffic annotations (to warn about them); spec's nodeName and each container's
    readiness probe path; every status condition's type, status, message and lastTransitionTime.
    """
    metadata = _mapping(pod.get("metadata"))
    spec = _mapping(pod.get("spec"))
    labels = _mapping(metadata.get("labels"))
    annotations = _mapping(metadata.get("annotations"))
    kept_metadata = {
        key: metadata[key]
        for key in ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")
        if key in metadata
    }
    if OFFLOAD_LABEL in labels:
        kept_metadata["labels"] = {OFFLOAD_LABEL: labels[OFFLOAD_LABEL]}
    forged = {name: annotations[name] for name in UNTRUSTED_ANNOTATIONS if name in annotations}
    if forged:
        kept_metadata["annotations"] = forged
    kept_spec: dict[str, Any] = {
        "containers": [_probe_path_only(item) for item in spec.get("containers") or ()]
    }
    if "nodeName" in spec:
        kept_spec["nodeName"] = spec["nodeName"]
    conditions = [
        {
            key: condition[key]
            for key in ("type", "status", "message", "lastTransitionTime")
            if key in condition
        }
        for condition in _conditions(pod)
    ]
    return {"metadata": kept_metadata, "spec": kept_spec, "status": {"conditions": conditions}}


def _probe_path_only(container: Any) -> dict[str, Any]:
    """A container as `_check_path` reads it: its readiness probe's `httpGet` path, if any."""
    path = _mapping(_mapping(_mapping(container).get("readinessProbe")).get("httpGet")).get("path")
    return {"readinessProbe": {"httpGet": {"path": path}}} if path is not None else {}


def _read_pod(pod: Mapping[str, Any], signing_scope: SigningScope, seals: _Seals) -> _PodReading | None:
    """None for a pod without the Offload label."""
    metadata = _mapping(pod.get("metadata"))
    offload = _text(_mapping(metadata.get("labels")).get(OFFLOAD_LABEL))
    if not offload:
        return None
    annotations = _mapping(metadata.get("annotations"))
    address = _condition_message(pod, TRAFFIC_ADDRESS_CONDITION).strip()
    url: str | None = address.rstrip("/")
    try:
        Endpoint(url or "")  # validates the URL
    except ValueError:
        url = None
    ready = _find_condition(pod, "Ready")
    auth = _trusted_auth(pod, address, url, seals, signing_scope) if address and url else None
    deleting = metadata.get("deletionTimestamp") is not None
    is_ready = ready.get("status") == "True"
    return _PodReading(
        namespace=_text(metadata.get("namespace")),
        offload=offload,
        identity=_identity(metadata),
        forged=tuple(name for name in UNTRUSTED_ANNOTATIONS if name in annotations),
        node_name=_text(_mapping(pod.get("spec")).get("nodeName")),
        address=address,
        url=url,
        auth=auth,
        check_target=CheckTarget(url, url + _check_path(pod)) if url and auth is None else None,
        ready=is_ready,
        containers_ready=_condition(pod, "ContainersReady") == "True",
        ready_flipped=parse_timestamp(ready.get("lastTransitionTime")),
        deleting=deleting,
        serving=(
            Endpoint(url, terminating=deleting, auth=auth)
            if is_ready and url and not isinstance(auth, _Distrust)
            else None
        ),
    )


def _marked_not_ready_by_node_outage(pod: _PodReading, node: _NodeState) -> bool:
    """Whether the pod's `Ready=False` says only that its node was away, not that the pod failed.

    The node lifecycle controller flips only `Ready` (its `ContainersReady` stays the node's last
    word, `True`); the node itself writes both together. So: containers ready, not Ready, and the node
    not Ready, or Ready again since before the pod's flip (it has not rewritten the pod yet).
    """
    if pod.ready or not pod.containers_ready:
        return False
    if not node.ready:
        return True
    flipped = pod.ready_flipped
    return flipped is not None and node.ready_since is not None and flipped <= node.ready_since


def _index_away_endpoints(
    away_pods: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, _NodeState],
    active_checks: Mapping[str, bool],
    memo: BuildMemo,
) -> _AwayReading:
    index: _Index = {}
    untrusted: list[UntrustedPod] = []
    foreign: list[ForeignNodePod] = []
    refused: list[RefusedSigning] = []
    unverified: list[UnverifiedPod] = []
    targets: dict[str, CheckTarget] = {}
    read = memo.away_pod
    for pod in away_pods:
        reading = read(pod)
        if reading is None:
            continue
        if reading.forged:
            untrusted.append(UntrustedPod(*reading.identity, reading.forged))
        node = nodes.get(reading.node_name)
        if not reading.address:
            continue  # its node has published no address (or it is not bound yet)
        if node is None:
            # Another virtual-kubelet (an AKS virtual node) or a kubelet wrote it: not ours to trust.
            foreign.append(ForeignNodePod(*reading.identity, reading.node_name))
            continue
        url = reading.url
        if url is None:
            continue
        auth = reading.auth
        if isinstance(auth, _Distrust):
            if auth.of_seal:
                unverified.append(UnverifiedPod(*reading.identity, auth.reason))
            else:
                refused.append(RefusedSigning(*reading.identity, auth.reason))
            continue
        if reading.check_target is not None:  # a signed endpoint (an invocation URL) takes no GET
            targets[url] = reading.check_target
        endpoint = _serving_endpoint(reading, url, auth, node, active_checks)
        if endpoint is not None:
            _add(index, (reading.namespace, reading.offload), endpoint)
    untrusted.sort(key=lambda pod: (pod.namespace, pod.name, pod.uid))
    foreign.sort(key=lambda pod: (pod.namespace, pod.name, pod.uid))
    refused.sort(key=lambda pod: (pod.namespace, pod.name, pod.uid))
    unverified.sort(key=lambda pod: (pod.namespace, pod.name, pod.uid))
    return _AwayReading(
        index,
        tuple(untrusted),
        tuple(targets[url] for url in sorted(targets)),
        tuple(foreign),
        tuple(refused),
        tuple(unverified),
    )


def _serving_endpoint(
    pod: _PodReading,
    url: str,
    auth: TrafficAuth | None,
    node: _NodeState,
    active_checks: Mapping[str, bool],
) -> Endpoint | None:
    """The trusted pod's endpoint if it serves (draining while it is deleted), else None."""
    if pod.ready:
        return pod.serving
    if active_checks.get(url) and _marked_not_ready_by_node_outage(pod, node):
        # The node went away, not the pod: the node lifecycle controller's Ready=False says
        # nothing about the workload, which our own checks find serving.
        return Endpoint(url, terminating=pod.deleting, auth=auth, kept_on_active_checks=True)
    return None


def _identity(metadata: Mapping[str, Any]) -> tuple[str, str, str]:
    """An object's namespace, name and UID, as the reports of ignored objects start."""
    return _text(metadata.get("namespace")), _text(metadata.get("name")), _text(metadata.get("uid"))


@dataclasses.dataclass(frozen=True)
class _Distrust:
    """Why an away pod's address is not taken: its seal (`of_seal`), else its auth marker."""

    of_seal: bool
    reason: str


def _trusted_auth(
    pod: Mapping[str, Any], address: str, url: str, seals: _Seals, signing_scope: SigningScope
) -> TrafficAuth | _Distrust | None:
    """The authentication the pod's address wants (None: plain requests), once its seal verifies and
    its marker is one the router acts on; else why not. The seal first: a marker is worth reading only
    when one of our nodes published it."""
    unsealed = seals.refusal(pod, address, _condition_message(pod, TRAFFIC_AUTH_CONDITION).strip())
    if unsealed is not None:
        return _Distrust(of_seal=True, reason=unsealed)
    try:
        auth = _traffic_auth(pod, url)
    except ValueError as error:
        return _Distrust(of_seal=False, reason=str(error))
    refusal = signing_scope.refusal(auth, url) if auth is not None else None
    return auth if refusal is None else _Distrust(of_seal=False, reason=refusal)


def _traffic_auth(pod: Mapping[str, Any], url: str) -> TrafficAuth | None:
    """The pod's traffic-auth marker read for its address; ValueError if the router cannot do it."""
    marker = _condition_message(pod, TRAFFIC_AUTH_CONDITION).strip()
    return parse_traffic_auth(marker, url) if marker else None


def _check_path(pod: Mapping[str, Any]) -> str:
    """The path of the first container's readiness probe `httpGet`, else `/`."""
    for container in _mapping(pod.get("spec")).get("containers") or ():
        if not isinstance(container, Mapping):
            continue
        http_get = _mapping(_mapping(container.get("readinessProbe")).get("httpGet"))
        path = _text(http_get.get("path"))
        if path:
            return path if path.startswith("/") else "/" + path
    return DEFAULT_CHECK_PATH


def _conditions(pod: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    conditions = _mapping(pod.get("status")).get("conditions") or ()
    return (condition for condition in conditions if isinstance(condition, Mapping))


def _find_condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The condition `kind`, or {} when there is none."""
    return next((c for c in _conditions(obj) if c.get("type") == kind), {})


def _condition(obj: Mapping[str, Any], kind: str) -> str:
    """The status of condition `kind` (`True`, `False`, `Unknown`), or "" when it has none."""
    return _text(_find_condition(obj, kind).get("status"))


def _condition_message(pod: Mapping[str, Any], kind: str) -> str:
    """The message of a published (`True`) condition `kind`, or ""."""
    return next(
        (
            _text(c.get("message"))
            for c in _conditions(pod)
            if c.get("type") == kind and c.get("status") == "True"
        ),
        "",
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _integer(value: Any, field: str) -> int:
    """An optional integer field: absent is 0, anything but an integer is invalid."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} must be an integer, not {value!r}")
    return value
