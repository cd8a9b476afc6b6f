"""Who owns a route when several Offloads claim it: the oldest claim wins, as in the Gateway API.

Without this rule the router took whichever Offload sorted first, so an Offload created later in any
namespace could take another namespace's traffic, and both reported Ready. Now the router and the
controller apply the same pure rule to the same objects, so they agree on the winner without talking
to each other:

- an Offload claims one key per host it names, `(host, path prefix)`, or `("", path prefix)` when it
  names no host (every host). Hosts are compared as the router matches them (lower case, no trailing
  dot); the path prefix without trailing slashes, with no prefix read as `/` (both take every path);
- Offloads are taken oldest first (`metadata.creationTimestamp`, then `namespace/name`, the Gateway
  API's tie-break); one whose keys are all free wins and holds them, one that meets a held key loses
  as a whole (it gets no traffic at all, and holds nothing, so it blocks no younger Offload);
- only identical keys conflict: a longer path prefix or a named host is a more specific route the
  router already prefers, as in every ingress controller, not a theft of the same one.

An Offload being deleted keeps its claim until it is gone: it is still being migrated home and serving,
and its loser takes the route over once it disappears. An Offload whose route cannot be read claims
nothing (the router skips it anyway).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

ClaimKey = tuple[str, str]
"""(host, path prefix) as compared: host '' means every host."""


@dataclasses.dataclass(frozen=True)
class Conflict:
    """An Offload that lost its route: which key it met first, and which Offload holds that key."""

    loser: str
    """`namespace/name` of the Offload that gets no traffic."""
    winner: str
    """`namespace/name` of the older Offload holding the key."""
    key: ClaimKey

    @property
    def message(self) -> str:
        host, prefix = self.key
        where = f"host {host} " if host else "every host, "
        return (
            f"route ({where}path prefix {prefix}) is already claimed by the older Offload {self.winner}; "
            f"this Offload gets no traffic until that one is deleted or changes its route"
        )


@dataclasses.dataclass(frozen=True)
class Claims:
    """The outcome of resolving every claim: who routes, who does not and why."""

    winners: frozenset[str] = frozenset()
    losers: Mapping[str, Conflict] = dataclasses.field(default_factory=dict)

    def conflict(self, namespace: str, name: str) -> Conflict | None:
        return self.losers.get(f"{namespace}/{name}")


def claim_keys(offload: Mapping[str, Any]) -> frozenset[ClaimKey]:
    """The keys an Offload claims; empty when its route cannot be read."""
    spec = _mapping(offload.get("spec"))
    route = _mapping(spec.get("route"))
    hosts = route.get("hosts") or ()
    prefix = route.get("pathPrefix") or ""
    if not isinstance(hosts, list | tuple) or not isinstance(prefix, str):
        return frozenset()
    if not all(isinstance(host, str) and host for host in hosts):
        return frozenset()
    if not hosts and not prefix:
        return frozenset()
    path = _normalize_prefix(prefix)
    if not hosts:
        return frozenset({("", path)})
    return frozenset((_normalize_host(host), path) for host in hosts)


def resolve_claims(offloads: Iterable[Mapping[str, Any]]) -> Claims:
    """Winners and losers among these Offloads (pure; any order in, the same answer out)."""
    held: dict[ClaimKey, str] = {}
    winners: set[str] = set()
    losers: dict[str, Conflict] = {}
    for _, identity, keys in sorted(_claimants(offloads)):
        taken = sorted(key for key in keys if key in held)
        if taken:
            losers[identity] = Conflict(identity, held[taken[0]], taken[0])
            continue
        winners.add(identity)
        held.update(dict.fromkeys(keys, identity))
    return Claims(frozenset(winners), losers)


def _claimants(
    offloads: Iterable[Mapping[str, Any]],
) -> Iterable[tuple[str, str, frozenset[ClaimKey]]]:
    for offload in offloads:
        metadata = _mapping(offload.get("metadata"))
        namespace, name = metadata.get("namespace"), metadata.get("name")
        if not isinstance(namespace, str) or not isinstance(name, str) or not name:
            continue
        keys = claim_keys(offload)
        if not keys:
            continue
        created = metadata.get("creationTimestamp")
        # RFC 3339 in UTC with second precision, as the apiserver writes it, sorts as text. An object
        # without one (only seen in hand-built test objects) counts as the youngest.
        yield (created if isinstance(created, str) and created else "~"), f"{namespace}/{name}", keys


def _normalize_host(host: str) -> str:
    return host.strip().lower().rstrip(".")


def _normalize_prefix(prefix: str) -> str:
    return prefix.rstrip("/") or "/"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
