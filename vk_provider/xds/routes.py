"""The route configuration: which Offload a request belongs to, and its home/away split.

The table's matching rules, in Envoy's terms: a route that names the request's host beats one that
does not, then the longest path prefix wins, and a prefix matches whole path segments (`/v1` takes
`/v1/chat`, not `/v1x`). Envoy first picks one virtual host by the Host header and then only looks at
its routes, in order; so each host's virtual host lists the routes naming it and then every host-less
route (longest prefixes first in each group), and the catch-all virtual host lists the host-less routes.
A host a namespace owns (`RouteTable.host_owners`) gets a virtual host even when no route names it,
and lists only the host-less routes of its owner's namespace: another namespace's route for every host
takes no path of it, as in the router.

Each route splits by weight between its home and away clusters (`weighted_clusters`, weights summing
to 100). A side with no endpoint taking requests gets no weight, whatever the table says: its share
goes to the other side, as in the router, rather than to 503s. With neither side serving, the answer
is a 503 naming the Offload.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

from vk_provider.routetable.table import SIDES, Side
from vk_provider.xds.names import ROUTE_CONFIGURATION_NAME, ROUTE_CONFIGURATION_TYPE, cluster_name, type_url
from vk_provider.xds.pickers import asked, enabling
from vk_provider.xds.sides import RoutePlan

STREAM_IDLE_TIMEOUT = "600s"
"""How long a request may go without a byte either way: the router's wait for a response head. A
model may think that long before its first token; once it streams, tokens keep the stream alive."""

_RETRY_POLICY = {
    # Only what is safe for any request: the connection failed, or broke before the request went out.
    "retry_on": "connect-failure,reset-before-request",
    "num_retries": 2,
    "retry_host_predicate": [
        {
            "name": "envoy.retry_host_predicates.previous_hosts",
            "typed_config": {
                "@type": type_url("envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate")
            },
        }
    ],
    "host_selection_retry_max_attempts": 3,
}


def side_weights(plan: RoutePlan) -> dict[Side, int]:
    """Percent of new requests per side, only sides with a positive share; {} when neither serves."""
    serving = {side: plan.side(side).serving for side in SIDES}
    if serving["home"] and serving["away"]:
        shares: dict[Side, int] = {"home": 100 - plan.route.away_weight, "away": plan.route.away_weight}
        return {side: share for side, share in shares.items() if share > 0}
    return {side: 100 for side in SIDES if serving[side]}


def route_configuration(
    plans: Sequence[RoutePlan], host_owners: Mapping[str, str] | None = None
) -> dict[str, Any]:
    owners = host_owners or {}
    hostless = _by_specificity([plan for plan in plans if not plan.route.match.hosts])
    by_host: dict[str, list[RoutePlan]] = {host: [] for host in owners}
    for plan in plans:
        for host in plan.route.match.hosts:
            by_host.setdefault(host, []).append(plan)
    # Hosts with the same routes share one virtual host; a host is never in two (Envoy refuses that).
    hosts_by_routes: dict[tuple[str, ...], list[str]] = collections.defaultdict(list)
    for host, named in by_host.items():
        owner = owners.get(host)
        fallback = [plan for plan in hostless if owner is None or plan.route.namespace == owner]
        ordered = [*_by_specificity(named), *fallback]
        hosts_by_routes[tuple(plan.route.key for plan in ordered)].append(host)
    plan_by_key = {plan.route.key: plan for plan in plans}
    virtual_hosts = [
        _virtual_host(sorted(hosts), [plan_by_key[key] for key in keys])
        for keys, hosts in sorted(hosts_by_routes.items(), key=lambda item: sorted(item[1]))
    ]
    virtual_hosts.append(_virtual_host([], hostless))
    return {
        "@type": ROUTE_CONFIGURATION_TYPE,
        "name": ROUTE_CONFIGURATION_NAME,
        "virtual_hosts": virtual_hosts,
    }


def _by_specificity(plans: Sequence[RoutePlan]) -> list[RoutePlan]:
    return sorted(plans, key=lambda plan: (-len(plan.route.match.path_prefix), plan.route.key))


def _virtual_host(hosts: list[str], plans: list[RoutePlan]) -> dict[str, Any]:
    """A virtual host for `hosts` (the catch-all when empty), ending in a 404 for what none takes."""
    # Hosts come normalised (lower case, no port, no trailing dot); the listener strips the port,
    # and a client may still send the trailing dot of a fully qualified name.
    domains = [variant for host in hosts for variant in (host, f"{host}.")] or ["*"]
    not_found = {
        "name": "no route",
        "match": {"prefix": "/"},
        "direct_response": {
            "status": 404,
            "body": {"inline_string": "no Offload routes this host and path\n"},
        },
    }
    return {
        "name": hosts[0] if hosts else "*",
        "domains": domains,
        "routes": [*(_route(plan) for plan in plans), not_found],
    }


def _route(plan: RoutePlan) -> dict[str, Any]:
    route = plan.route
    entry: dict[str, Any] = {"name": route.key, "match": _path_match(route.match.path_prefix)}
    weights = side_weights(plan)
    if not weights:
        entry["direct_response"] = {
            "status": 503,
            "body": {"inline_string": f"no usable endpoint for {route.key}\n"},
        }
        return entry
    clusters: list[dict[str, Any]] = []
    for side, share in weights.items():
        cluster: dict[str, Any] = {"name": cluster_name(route, side), "weight": share}
        if side == "home" and route.picker is not None and asked(route.picker):
            # Only the home share asks the pool's picker: the away share does not wait on it.
            cluster["typed_per_filter_config"] = enabling(route.picker)
        clusters.append(cluster)
    entry["route"] = {
        "weighted_clusters": {"clusters": clusters},
        # Away endpoints carry their own Host (a provider's front routes by it); home ones carry none,
        # so home pods keep the client's. The client's Host goes along as X-Forwarded-Host.
        "auto_host_rewrite": True,
        "append_x_forwarded_host": True,
        # No limit on a whole response (an LLM stream may run for many minutes), only on silence.
        "timeout": "0s",
        "idle_timeout": STREAM_IDLE_TIMEOUT,
        "retry_policy": _RETRY_POLICY,
    }
    return entry


def _path_match(prefix: str) -> dict[str, str]:
    """Whole-segment prefix matching, as the table's `path_has_prefix`."""
    if not prefix or prefix.endswith("/"):
        return {"prefix": prefix or "/"}
    return {"path_separated_prefix": prefix}
