"""Keeping a deleted Offload's route on its home Service: what is written, when, and with which age."""

from __future__ import annotations

import copy
from typing import Any, cast

from vk_provider.controller.claims import RouteClaims
from vk_provider.controller.routekeeping import RouteKeeper
from vk_provider.kit.kube import KubeApi, RawObject
from vk_provider.offload.names import ROUTE_ANNOTATION
from vk_provider.offload.retained import RetainedRoute, retained_route
from vk_provider.offload.spec import parse_offload


class Services:
    """The Services of a cluster the keeper reads and patches (merge patches on annotations only)."""

    def __init__(self, *services: RawObject) -> None:
        self.by_path = {
            f"/api/v1/namespaces/{s['metadata']['namespace']}/services/{s['metadata']['name']}": s
            for s in services
        }
        self.patches: list[str] = []

    async def get(self, path: str) -> RawObject | None:
        found = self.by_path.get(path)
        return copy.deepcopy(found) if found is not None else None

    async def patch(self, path: str, body: Any, *, content_type: str) -> RawObject:
        self.patches.append(path)
        annotations = self.by_path[path]["metadata"].setdefault("annotations", {})
        for key, value in body["metadata"]["annotations"].items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        return self.by_path[path]


def _service(name: str, marker: RetainedRoute | None = None) -> RawObject:
    metadata: dict[str, Any] = {
        "namespace": "default",
        "name": name,
        "uid": f"uid-{name}",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if marker is not None:
        metadata["annotations"] = {ROUTE_ANNOTATION: marker.to_annotation()}
    return {"metadata": metadata}


def _offload(namespace: str = "default", created: str = "2026-01-01T10:00:00Z") -> RawObject:
    return {
        "metadata": {
            "namespace": namespace,
            "name": "tokens",
            "uid": f"uid-{namespace}",
            "creationTimestamp": created,
            "deletionTimestamp": "2026-01-02T00:00:00Z",
        },
        "spec": {
            "home": {"deployment": "tokens", "service": "tokens"},
            "placement": "home",
            "route": {"hosts": ["tokens.demo"], "pathPrefix": "/v1", "allowedNamespaces": ["team"]},
        },
    }


def _keeper(services: Services, *offloads: RawObject) -> RouteKeeper:
    claims = RouteClaims(cast(KubeApi, None))  # filled by hand: the API is never called here
    claims.offloads.objects = {o["metadata"]["uid"]: o for o in offloads}
    claims.services.objects = {s["metadata"]["uid"]: s for s in services.by_path.values()}
    claims.offloads.synced.set()
    claims.services.synced.set()
    return RouteKeeper(cast(KubeApi, services), services.get, claims)


async def test_the_route_is_written_once_with_the_offloads_age_and_then_left_in_place() -> None:
    services = Services(_service("tokens"))
    offload = _offload()
    keeper = _keeper(services, offload)
    assert await keeper.keep(parse_offload(offload), offload) == "keeping the route on Service tokens"
    written = retained_route(services.by_path["/api/v1/namespaces/default/services/tokens"])
    assert written == RetainedRoute(
        "default", "tokens", "tokens", ("tokens.demo",), "/v1", ("team",), "2026-01-01T10:00:00Z"
    )
    assert await keeper.keep(parse_offload(offload), offload) is None
    assert len(services.patches) == 1


async def test_a_route_taken_over_keeps_its_older_age_and_an_old_route_of_the_name_goes() -> None:
    older = RetainedRoute("default", "tokens", "previous", ("tokens.demo",), "", (), "2026-01-01T01:00:00Z")
    elsewhere = RetainedRoute("default", "old-svc", "tokens", ("old.demo",), "", (), "2026-01-01T02:00:00Z")
    services = Services(_service("tokens", older), _service("old-svc", elsewhere))
    offload = _offload()
    keeper = _keeper(services, offload)
    message = await keeper.keep(parse_offload(offload), offload)
    assert message == "removed its old route from Service old-svc; keeping the route on Service tokens"
    written = retained_route(services.by_path["/api/v1/namespaces/default/services/tokens"])
    assert written is not None
    assert (written.offload, written.claimed_since) == ("tokens", "2026-01-01T01:00:00Z")
    assert (
        ROUTE_ANNOTATION
        not in services.by_path["/api/v1/namespaces/default/services/old-svc"]["metadata"]["annotations"]
    )


async def test_an_offload_that_lost_its_route_or_has_no_service_leaves_nothing() -> None:
    services = Services(_service("tokens"))
    owner = _offload("other", "2026-01-01T09:00:00Z")
    loser = _offload()
    keeper = _keeper(services, owner, loser)
    assert await keeper.keep(parse_offload(loser), loser) is None
    assert services.patches == []
    nowhere = Services()
    assert await _keeper(nowhere, loser).keep(parse_offload(loser), loser) is None
    assert nowhere.patches == []
