"""Keeping a deleted Offload's route as a KeptRoute: what is written, when, and with which age."""

from __future__ import annotations

import copy
from typing import Any, cast

from vk_provider.controller.claims import RouteClaims
from vk_provider.controller.routekeeping import RouteKeeper
from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject
from vk_provider.offload.names import kept_routes_path
from vk_provider.offload.retained import RetainedRoute, retained_route
from vk_provider.offload.spec import parse_offload

SERVICE = "/api/v1/namespaces/default/services/tokens"


class Cluster:
    """The objects the keeper reads and writes, by path; its writes are recorded."""

    def __init__(self, *objects: RawObject) -> None:
        self.objects: dict[str, RawObject] = {SERVICE: {"metadata": {"name": "tokens", "uid": "uid-svc"}}}
        for item in objects:
            self.objects[kept_routes_path("default", item["metadata"]["name"])] = item
        self.writes: list[tuple[str, str]] = []

    async def get(self, path: str) -> RawObject | None:
        found = self.objects.get(path)
        return copy.deepcopy(found) if found is not None else None

    async def create(self, collection: str, body: RawObject) -> RawObject:
        self.writes.append(("create", body["metadata"]["name"]))
        self.objects[f"{collection}/{body['metadata']['name']}"] = body
        return body

    async def patch(self, path: str, body: Any, *, content_type: str) -> RawObject:
        self.writes.append(("patch", path.rsplit("/", 1)[1]))
        spec = {**self.objects[path]["spec"], **body["spec"]}
        self.objects[path] = {**self.objects[path], "spec": {k: v for k, v in spec.items() if v is not None}}
        return self.objects[path]

    async def delete(self, path: str) -> RawObject:
        self.writes.append(("delete", path.rsplit("/", 1)[1]))
        if self.objects.pop(path, None) is None:
            raise KubeApiError(404, "not found")
        return {}

    def kept(self, name: str) -> RetainedRoute | None:
        found = self.objects.get(kept_routes_path("default", name))
        return None if found is None else retained_route(found)


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


def _keeper(cluster: Cluster, *offloads: RawObject) -> RouteKeeper:
    claims = RouteClaims(cast(KubeApi, None))  # filled by hand from `cluster`: no API call here
    claims.offloads.objects = {o["metadata"]["uid"]: o for o in offloads}
    claims.offloads.synced.set()
    claims.kept_routes.synced.set()

    def mirror() -> None:
        claims.kept_routes.objects = {
            path: item for path, item in cluster.objects.items() if "/keptroutes/" in path
        }

    mirror()
    keeper = RouteKeeper(cast(KubeApi, cluster), cluster.get, claims)
    original = keeper.keep

    async def keep_then_mirror(*arguments: Any) -> str | None:
        result = await original(*arguments)
        mirror()  # the watch catches up between passes
        return result

    keeper.keep = keep_then_mirror  # type: ignore[method-assign]
    return keeper


async def test_the_route_is_written_once_with_the_offloads_age_and_owned_by_the_service() -> None:
    cluster = Cluster()
    offload = _offload()
    keeper = _keeper(cluster, offload)
    assert await keeper.keep(parse_offload(offload), offload) == "keeping its route (KeptRoute tokens)"
    assert cluster.kept("tokens") == RetainedRoute(
        "default", "tokens", "tokens", ("tokens.demo",), "/v1", ("team",), "2026-01-01T10:00:00Z"
    )
    (owner,) = cluster.objects[kept_routes_path("default", "tokens")]["metadata"]["ownerReferences"]
    assert owner["uid"] == "uid-svc"
    assert await keeper.keep(parse_offload(offload), offload) is None
    assert cluster.writes == [("create", "tokens")]


async def test_a_route_taken_over_gives_its_older_age_and_goes_only_once_the_new_one_holds_it() -> None:
    older = RetainedRoute("default", "tokens", "previous", ("tokens.demo",), "", (), "2026-01-01T01:00:00Z")
    cluster = Cluster(older.to_object("uid-svc"))
    offload = _offload()
    keeper = _keeper(cluster, offload)
    assert await keeper.keep(parse_offload(offload), offload) == "keeping its route (KeptRoute tokens)"
    kept = cluster.kept("tokens")
    assert kept is not None
    assert kept.claimed_since == "2026-01-01T01:00:00Z"
    assert cluster.kept("previous") == older  # both hold the age for a pass
    assert await keeper.keep(parse_offload(offload), offload) == "replacing KeptRoute previous"
    assert cluster.kept("previous") is None
    assert await keeper.keep(parse_offload(offload), offload) is None


async def test_a_changed_route_is_rewritten_whole() -> None:
    before = RetainedRoute(
        "default", "tokens", "tokens", ("tokens.demo",), "/v2", ("x",), "2026-01-01T10:00:00Z"
    )
    cluster = Cluster(before.to_object("uid-svc"))
    offload = _offload()
    offload["spec"]["route"] = {"hosts": ["tokens.demo"]}
    keeper = _keeper(cluster, offload)
    assert await keeper.keep(parse_offload(offload), offload) == "keeping its route (KeptRoute tokens)"
    assert cluster.kept("tokens") == RetainedRoute(
        "default", "tokens", "tokens", ("tokens.demo",), "", (), "2026-01-01T10:00:00Z"
    )
    assert cluster.writes == [("patch", "tokens")]


async def test_an_offload_that_lost_its_route_or_has_no_service_leaves_nothing() -> None:
    cluster = Cluster()
    owner = _offload("other", "2026-01-01T09:00:00Z")
    loser = _offload()
    assert await _keeper(cluster, owner, loser).keep(parse_offload(loser), loser) is None
    del cluster.objects[SERVICE]
    assert await _keeper(cluster, loser).keep(parse_offload(loser), loser) is None
    assert cluster.writes == []
