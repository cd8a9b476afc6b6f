"""Which of a route side's endpoints Envoy gets, and which it cannot take.

The route table holds what the cluster says; Envoy's clusters take less. A home cluster takes its
endpoints from EDS, which carries IP addresses only (a home Service's EndpointSlices hold nothing
else) and plain HTTP. An away cluster signs every request for one credential scope or none, so its
endpoints must agree on their authentication: when they do not, the scope most of them share is kept,
since sending a SigV4 endpoint unsigned (or wrongly scoped) requests would only collect 403s.

An endpoint left out is reported with the reason, never silently dropped. A terminating endpoint is
kept, as draining: Envoy sends it no new requests but lets its streams finish.
"""

from __future__ import annotations

import collections
import dataclasses

from vk_provider.kit.traffic_auth import TrafficAuth
from vk_provider.routetable.table import Endpoint, Route, Side
from vk_provider.xds.addresses import UpstreamAddress, upstream_address


@dataclasses.dataclass(frozen=True)
class LeftOut:
    """An endpoint of the table that Envoy does not get."""

    route: str
    side: Side
    url: str
    reason: str

    def __str__(self) -> str:
        return f"{self.route} {self.side} endpoint {self.url}: {self.reason}"


@dataclasses.dataclass(frozen=True)
class PlacedEndpoint:
    endpoint: Endpoint
    address: UpstreamAddress

    @property
    def draining(self) -> bool:
        return self.endpoint.terminating


@dataclasses.dataclass(frozen=True)
class SidePlan:
    """What one side of a route sends Envoy."""

    endpoints: tuple[PlacedEndpoint, ...] = ()
    auth: TrafficAuth | None = None
    left_out: tuple[LeftOut, ...] = ()

    @property
    def serving(self) -> bool:
        """Whether any endpoint takes new requests: a side without one must get no weight."""
        return any(not placed.draining for placed in self.endpoints)

    @property
    def rewrites_paths(self) -> bool:
        return any(placed.address.rewrites_path for placed in self.endpoints)


def plan_side(route: Route, side: Side) -> SidePlan:
    placed: list[PlacedEndpoint] = []
    left_out: list[LeftOut] = []
    for endpoint in route.endpoints(side):
        try:
            address = upstream_address(endpoint)
        except ValueError as error:
            left_out.append(LeftOut(route.key, side, endpoint.url, str(error)))
            continue
        reason = _home_refusal(endpoint, address) if side == "home" else None
        if reason is not None:
            left_out.append(LeftOut(route.key, side, endpoint.url, reason))
        else:
            placed.append(PlacedEndpoint(endpoint, address))
    if side == "home" or not placed:
        return SidePlan(tuple(placed), None, tuple(left_out))
    auth = _shared_auth(placed)
    kept = [p for p in placed if p.endpoint.auth == auth]
    left_out += [
        LeftOut(route.key, side, p.endpoint.url, f"its authentication differs from the side's ({auth})")
        for p in placed
        if p.endpoint.auth != auth
    ]
    return SidePlan(tuple(kept), auth, tuple(left_out))


def _home_refusal(endpoint: Endpoint, address: UpstreamAddress) -> str | None:
    if not address.is_ip:
        return "a home endpoint must be an IP address (EDS carries addresses, not names)"
    if address.tls or endpoint.auth is not None or address.rewrites_path:
        return "a home endpoint must be plain http://IP:PORT"
    return None


def _shared_auth(placed: list[PlacedEndpoint]) -> TrafficAuth | None:
    """The authentication most endpoints want; on a tie, the first in the table's order."""
    counts = collections.Counter(p.endpoint.auth for p in placed)
    best = max(counts.values())
    return next(p.endpoint.auth for p in placed if counts[p.endpoint.auth] == best)


@dataclasses.dataclass(frozen=True)
class RoutePlan:
    route: Route
    home: SidePlan
    away: SidePlan

    def side(self, side: Side) -> SidePlan:
        return self.home if side == "home" else self.away


def plan_route(route: Route) -> RoutePlan:
    return RoutePlan(route, plan_side(route, "home"), plan_side(route, "away"))
