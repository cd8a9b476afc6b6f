"""Who owns a route when several Offloads claim it: a host belongs to one namespace, the oldest claim's.

Without this rule the router took whichever Offload sorted first, so an Offload created later in any
namespace could take another namespace's traffic, and both reported Ready; and even with the oldest
route kept, a longer path prefix in another namespace still carved part of a service's traffic out.
Now the router and the controller apply the same pure rule to the same objects, so they agree on the
winner without talking to each other:

- an Offload claims one key per host it names, `(host, path prefix)`, or `("", path prefix)` when it
  names no host (every host: `""` is owned like a host). Hosts are compared as the router matches
  them (lower case, no trailing dot); the path prefix without trailing slashes, with no prefix read
  as `/` (both take every path);
- claims are taken oldest first (`metadata.creationTimestamp`, then `namespace/name`, the Gateway
  API's tie-break). The first claim that wins a host makes its namespace the host's owner, for every
  path under it. A later claim on that host, with any path prefix, wins only from the owner's
  namespace or from one the owning claim lists in `spec.route.allowedNamespaces` (the owner decides,
  as a Gateway's `allowedRoutes` or a ReferenceGrant does); among those, only identical keys
  conflict, the older keeping the key, and a longer prefix is a more specific route (longest prefix
  wins in the router, as in every ingress controller);
- a claim that meets a foreign host or a held key loses as a whole: it gets no traffic at all and
  holds nothing, so it blocks no younger claim.

Routes kept after their Offload was deleted (`vk_provider.offload.retained`) claim like Offloads,
with the age the Offload had, so no other namespace takes their hosts once the Offload is gone. A
live Offload of the same namespace naming the same Service (or with the same name) takes such a route
over: the kept route then routes nothing, but still anchors its hosts and keys for its namespace at
its age, so recreating an Offload never lets another namespace's younger claim in.

An Offload being deleted keeps its claim until it is gone: it is still being migrated home and serving.
An Offload whose route cannot be read claims nothing (the router skips it anyway).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from vk_provider.offload.retained import RetainedRoute

ClaimKey = tuple[str, str]
"""(host, path prefix) as compared: host '' means every host."""


@dataclasses.dataclass(frozen=True)
class Conflict:
    """A claim that lost its route: which key it met first, and which claim holds that key or host."""

    loser: str
    """`namespace/name` of the Offload (or kept route) that gets no traffic."""
    winner: str
    """`namespace/name` of the older claim holding the key, or owning the host."""
    key: ClaimKey
    foreign_host: bool = False
    """The host belongs to the winner's namespace, which does not allow the loser's."""
    kept_on: str = ""
    """`namespace/service` when the winner is a route kept after its Offload was deleted."""

    @property
    def message(self) -> str:
        host, prefix = self.key
        winner = (
            f"the route the deleted Offload {self.winner} left (KeptRoute {self.winner}, "
            f"for Service {self.kept_on})"
            if self.kept_on
            else f"the older Offload {self.winner}"
        )
        if self.foreign_host:
            owner = self.winner.partition("/")[0]
            what = f"host {host}" if host else "every host (an Offload with no hosts)"
            return (
                f"{what} belongs to namespace {owner}, claimed first by {winner}, which does not list "
                f"namespace {self.loser.partition('/')[0]} in spec.route.allowedNamespaces; this Offload "
                "gets no traffic on any path of it"
            )
        where = f"host {host} " if host else "every host, "
        return (
            f"route ({where}path prefix {prefix}) is already claimed by {winner}; "
            f"this Offload gets no traffic until that one is deleted or changes its route"
        )


@dataclasses.dataclass(frozen=True)
class Claims:
    """The outcome of resolving every claim: who routes, who does not and why, who owns each host."""

    winners: frozenset[str] = frozenset()
    losers: Mapping[str, Conflict] = dataclasses.field(default_factory=dict)
    owners: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Host → the namespace owning it ('' is every host)."""
    kept: frozenset[RetainedRoute] = frozenset()
    """The kept routes that route (won, and not taken over by a live Offload)."""

    def conflict(self, namespace: str, name: str) -> Conflict | None:
        return self.losers.get(f"{namespace}/{name}")


def claim_keys(offload: Mapping[str, Any]) -> frozenset[ClaimKey]:
    """The keys an Offload claims; empty when its route cannot be read."""
    route = _mapping(_mapping(offload.get("spec")).get("route"))
    hosts = route.get("hosts") or ()
    prefix = route.get("pathPrefix") or ""
    if not isinstance(hosts, list | tuple) or not isinstance(prefix, str):
        return frozenset()
    return _keys(hosts, prefix)


def allowed_namespaces(offload: Mapping[str, Any]) -> frozenset[str]:
    """The namespaces an Offload lets claim paths of the hosts it owns (`spec.route.allowedNamespaces`)."""
    allowed = _mapping(_mapping(offload.get("spec")).get("route")).get("allowedNamespaces") or ()
    if not isinstance(allowed, list | tuple):
        return frozenset()
    return frozenset(item for item in allowed if isinstance(item, str) and item)


def resolve_claims(
    offloads: Iterable[Mapping[str, Any]],
    retained: Iterable[RetainedRoute] = (),
    *,
    claim_of: Callable[[Mapping[str, Any]], RouteClaim | None] | None = None,
) -> Claims:
    """Winners and losers among these Offloads and kept routes (pure; any order in, the same answer out).

    `claim_of` reads an Offload's claim (default: `live_claim`); a caller that rebuilds often hands one
    that remembers the claims of the Offloads it has read (`vk_provider.routetable.building.BuildMemo`).
    """
    read = claim_of or live_claim
    live = [claim for claim in map(read, offloads) if claim is not None]
    claims = sorted([*live, *_kept_claims(retained, live)], key=lambda claim: claim.order)
    owners: dict[str, tuple[str, frozenset[str], RouteClaim]] = {}
    held: dict[ClaimKey, RouteClaim] = {}
    winners: set[str] = set()
    losers: dict[str, Conflict] = {}
    for claim in claims:
        conflict = _first_conflict(claim, owners, held)
        if conflict is not None:
            if not claim.anchor_only:
                losers.setdefault(claim.identity, conflict)
            continue
        for host, _ in claim.keys:
            owners.setdefault(host, (claim.namespace, claim.allowed, claim))
        held.update(dict.fromkeys(claim.keys, claim))
        if not claim.anchor_only:
            winners.add(claim.identity)
    return Claims(
        frozenset(winners),
        losers,
        {host: namespace for host, (namespace, _, _) in owners.items()},
        frozenset(
            claim.retained
            for claim in claims
            if claim.retained is not None and not claim.anchor_only and claim.identity in winners
        ),
    )


@dataclasses.dataclass(frozen=True)
class RouteClaim:
    """One claim on route keys: a live Offload's (`live_claim`), or a kept route's."""

    since: str
    identity: str
    namespace: str
    keys: frozenset[ClaimKey]
    allowed: frozenset[str]
    service: str
    retained: RetainedRoute | None = None
    anchor_only: bool = False
    """A kept route taken over by a live Offload: it owns its hosts at its age, routes nothing."""

    @property
    def order(self) -> tuple[str, str, bool]:
        # RFC 3339 in UTC with second precision, as the apiserver writes it, sorts as text. A claim
        # without a time (only seen in hand-built test objects) counts as the youngest. At the same
        # age a live Offload comes before a kept route of the same name.
        return (self.since or "~", self.identity, self.retained is not None)


def _first_conflict(
    claim: RouteClaim,
    owners: Mapping[str, tuple[str, frozenset[str], RouteClaim]],
    held: Mapping[ClaimKey, RouteClaim],
) -> Conflict | None:
    for key in sorted(claim.keys):
        owner = owners.get(key[0])
        if owner is not None:
            namespace, allowed, owning = owner
            if namespace != claim.namespace and claim.namespace not in allowed:
                return _conflict(claim, owning, key, foreign_host=True)
        holder = held.get(key)
        # A kept route taken over holds its keys against other namespaces only: its heir is meant
        # to take them.
        if holder is not None and not (holder.anchor_only and holder.namespace == claim.namespace):
            return _conflict(claim, holder, key, foreign_host=False)
    return None


def _conflict(claim: RouteClaim, holder: RouteClaim, key: ClaimKey, *, foreign_host: bool) -> Conflict:
    kept_on = f"{holder.namespace}/{holder.service}" if holder.retained is not None else ""
    return Conflict(claim.identity, holder.identity, key, foreign_host=foreign_host, kept_on=kept_on)


def live_claim(offload: Mapping[str, Any]) -> RouteClaim | None:
    """What an Offload claims; None when it claims nothing (no name, or a route that cannot be read)."""
    metadata = _mapping(offload.get("metadata"))
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not name:
        return None
    keys = claim_keys(offload)
    if not keys:
        return None
    created = metadata.get("creationTimestamp")
    service = _mapping(_mapping(offload.get("spec")).get("home")).get("service")
    return RouteClaim(
        since=created if isinstance(created, str) else "",
        identity=f"{namespace}/{name}",
        namespace=namespace,
        keys=keys,
        allowed=allowed_namespaces(offload),
        service=service if isinstance(service, str) else "",
    )


def _kept_claims(retained: Iterable[RetainedRoute], live: list[RouteClaim]) -> Iterable[RouteClaim]:
    """Kept routes as claims; each one a live Offload took over becomes an anchor with its allowances."""
    seen: set[str] = set()
    for route in sorted(retained, key=lambda route: (route.claimed_since, route.service)):
        keys = _keys(route.hosts, route.path_prefix)
        if not keys or route.key in seen:
            continue  # unreadable, or a second route of one name (hand-made: the controller keeps one)
        seen.add(route.key)
        heirs = [
            claim
            for claim in live
            if (claim.namespace == route.namespace and claim.service == route.service)
            or claim.identity == route.key
        ]
        # Who may share the hosts is the live Offload's to say once it took the route over.
        allowed = frozenset(route.allowed_namespaces)
        if heirs:
            allowed = frozenset(namespace for heir in heirs for namespace in heir.allowed)
        yield RouteClaim(
            since=route.claimed_since,
            identity=route.key,
            namespace=route.namespace,
            keys=keys,
            allowed=allowed,
            service=route.service,
            retained=route,
            anchor_only=bool(heirs),
        )


def _keys(hosts: Iterable[Any], prefix: str) -> frozenset[ClaimKey]:
    hosts = tuple(hosts)
    if not all(isinstance(host, str) and host for host in hosts):
        return frozenset()
    if not hosts and not prefix:
        return frozenset()
    path = _normalize_prefix(prefix)
    if not hosts:
        return frozenset({("", path)})
    return frozenset((_normalize_host(host), path) for host in hosts)


def _normalize_host(host: str) -> str:
    return host.strip().lower().rstrip(".")


def _normalize_prefix(prefix: str) -> str:
    return prefix.rstrip("/") or "/"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
