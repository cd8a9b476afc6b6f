"""A route that outlives its Offload: the marker the controller leaves on the home Service.

Deleting an Offload (a GitOps prune, a `kubectl delete`) brings its service home and then lets the
Offload go; without more, its route would go with it and its hosts would answer 404 at once. So
before it lets go, the controller writes the route onto the home Service (annotation
`ROUTE_ANNOTATION`, JSON), and the routers keep sending those hosts to that Service's endpoints,
home only, until someone removes the annotation or deletes the Service. A kept route is a claim like
an Offload's (`vk_provider.offload.claims`), with the age of the Offload that held it, so no other
namespace can take its hosts over once the Offload is gone.

Trust: the marker is read only from a Service in its own namespace and only routes to that Service,
so it gives whoever may write Services there what an Offload there gives them. One thing more is
bounded: the age it states counts no earlier than the Service's own `creationTimestamp`, which the
apiserver sets, so a marker written onto a new Service cannot claim an age older than that Service.
On a Service that is older than the host's current owner, a forged age could still win the host:
grant write access to Services only to those you would let own the namespace's hosts.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

from vk_provider.offload.names import ROUTE_ANNOTATION


@dataclasses.dataclass(frozen=True)
class RetainedRoute:
    """The route kept on one Service after the Offload that held it was deleted."""

    namespace: str
    service: str
    offload: str
    """The name of the Offload that held the route (the route keeps its name in tables and metrics)."""
    hosts: tuple[str, ...]
    path_prefix: str
    allowed_namespaces: tuple[str, ...]
    claimed_since: str
    """RFC 3339 (UTC, seconds): the age of the claim, the older of the Offload's creation and the
    marker it took over, never earlier than the Service's creation."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.offload}"

    def to_annotation(self) -> str:
        """The annotation's value (its namespace and Service are where it is written)."""
        return json.dumps(
            {
                "offload": self.offload,
                "hosts": list(self.hosts),
                "pathPrefix": self.path_prefix,
                "allowedNamespaces": list(self.allowed_namespaces),
                "claimedSince": self.claimed_since,
            },
            sort_keys=True,
        )


def retained_route(service: Mapping[str, Any]) -> RetainedRoute | None:
    """The route kept on this Service, or None when it carries no readable marker."""
    metadata = _mapping(service.get("metadata"))
    namespace, name = metadata.get("namespace"), metadata.get("name")
    marker = _marker(_mapping(metadata.get("annotations")).get(ROUTE_ANNOTATION))
    if not isinstance(namespace, str) or not isinstance(name, str) or marker is None:
        return None
    offload, hosts, prefix = marker.get("offload"), marker.get("hosts") or [], marker.get("pathPrefix") or ""
    allowed, since = marker.get("allowedNamespaces") or [], marker.get("claimedSince")
    if not (isinstance(offload, str) and offload and isinstance(prefix, str) and isinstance(since, str)):
        return None
    if not _strings(hosts) or not _strings(allowed) or not (hosts or prefix) or not since:
        return None
    if prefix and not prefix.startswith("/"):
        return None
    # Both are RFC 3339 UTC with second precision (the apiserver's and our own writing), which sort
    # as text: the later of the two is the age the marker may claim.
    created = metadata.get("creationTimestamp")
    if isinstance(created, str) and created > since:
        since = created
    return RetainedRoute(namespace, name, offload, tuple(hosts), prefix, tuple(allowed), since)


def _marker(raw: Any) -> Mapping[str, Any] | None:
    if not isinstance(raw, str):
        return None
    try:
        marker = json.loads(raw)
    except ValueError:
        return None
    return marker if isinstance(marker, Mapping) else None


def retained_routes(services: Iterable[Mapping[str, Any]]) -> list[RetainedRoute]:
    """Every readable route kept on these Services."""
    return [route for route in map(retained_route, services) if route is not None]


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) and item for item in value)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
