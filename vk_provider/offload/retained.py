"""A route that outlives its Offload: the KeptRoute the controller leaves for the home Service.

Deleting an Offload (a GitOps prune, a `kubectl delete`) brings its service home and then lets the
Offload go; without more, its route would go with it and its hosts would answer 404 at once. So
before it lets go, the controller writes the route as a KeptRoute of the same name in the same
namespace, owned by the home Service, and the routers keep sending those hosts to that Service's
endpoints, home only, until someone deletes the KeptRoute (or the Service, which takes it along).
A kept route is a claim like an Offload's (`vk_provider.offload.claims`), with the age of the Offload
that held it, so no other namespace can take its hosts over once the Offload is gone.

Trust: a KeptRoute only ever routes to a Service of its own namespace, and only the controller writes
KeptRoutes (namespace admins and editors may read and delete them, not create or change them: see
manifests/traffic/rbac-controller.yaml), so the age it states is the controller's word, not a
tenant's. Whoever a cluster admin lets write KeptRoutes in a namespace can claim hosts for it with any
age: grant that to no one else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from vk_provider._kube.watching import Reflector
from vk_provider.kit.kube import KubeApi
from vk_provider.offload.names import API_VERSION, KEPT_ROUTE_KIND, KEPT_ROUTES_MISSING, kept_routes_path


@dataclasses.dataclass(frozen=True)
class RetainedRoute:
    """The route kept for one Service after the Offload that held it was deleted."""

    namespace: str
    service: str
    offload: str
    """The name of the Offload that held the route, and of its KeptRoute (the route keeps the name in
    tables and metrics)."""
    hosts: tuple[str, ...]
    path_prefix: str
    allowed_namespaces: tuple[str, ...]
    claimed_since: str
    """RFC 3339 (UTC, seconds): the age of the claim, the older of the Offload's creation and that of
    a kept route it took over."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.offload}"

    def spec(self) -> dict[str, Any]:
        """The KeptRoute's spec (empty fields left out, as the CRD refuses an empty path prefix)."""
        spec: dict[str, Any] = {"service": self.service, "claimedSince": self.claimed_since}
        for field, value in (
            ("hosts", list(self.hosts)),
            ("pathPrefix", self.path_prefix),
            ("allowedNamespaces", list(self.allowed_namespaces)),
        ):
            if value:
                spec[field] = value
        return spec

    def to_object(self, service_uid: str) -> dict[str, Any]:
        """The whole KeptRoute, owned by its Service (so deleting the Service deletes it)."""
        return {
            "apiVersion": API_VERSION,
            "kind": KEPT_ROUTE_KIND,
            "metadata": {
                "name": self.offload,
                "namespace": self.namespace,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Service", "name": self.service, "uid": service_uid}
                ],
            },
            "spec": self.spec(),
        }


def retained_route(kept: Mapping[str, Any]) -> RetainedRoute | None:
    """The route a KeptRoute holds, or None when it cannot be read."""
    metadata, spec = _mapping(kept.get("metadata")), _mapping(kept.get("spec"))
    namespace, name = metadata.get("namespace"), metadata.get("name")
    service, since = spec.get("service"), spec.get("claimedSince")
    hosts, prefix = spec.get("hosts") or [], spec.get("pathPrefix") or ""
    allowed = spec.get("allowedNamespaces") or []
    names = (namespace, name, service, since)
    if not all(isinstance(item, str) and item for item in names) or not isinstance(prefix, str):
        return None
    if not _strings(hosts) or not _strings(allowed) or not (hosts or prefix):
        return None
    if prefix and not prefix.startswith("/"):
        return None
    return RetainedRoute(
        str(namespace), str(service), str(name), tuple(hosts), prefix, tuple(allowed), str(since)
    )


def retained_routes(kept: Iterable[Mapping[str, Any]]) -> list[RetainedRoute]:
    """Every readable route of these KeptRoutes."""
    return [route for route in map(retained_route, kept) if route is not None]


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) and item for item in value)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def kept_routes_reflector(
    api: KubeApi, namespace: str | None, on_change: Callable[[str], Awaitable[None]]
) -> Reflector:
    """A mirror of the KeptRoutes of one namespace (None: all), as the routers and the controller
    keep it: a cluster without the KeptRoute CRD counts as having none, and says so once."""
    return Reflector(
        api,
        kept_routes_path(namespace),
        query={},
        on_change=on_change,
        description="kept routes",
        missing_type=KEPT_ROUTES_MISSING,
    )
