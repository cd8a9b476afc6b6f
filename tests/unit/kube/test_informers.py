"""Reads answered from watch caches: what reaches the apiserver, and what a reader sees.

The apiserver side is a scripted stand-in for our own KubeApi wrapper (lists, a watch stream the test
feeds, and direct requests it records), not a fake API server; the real paths run in the integration
tests, whose controller and policy read through `CachedApi`.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator
from typing import Any

import pytest

from vk_provider._kube.informers import CachedApi, Informers, ResourcePath, Watched, uncached
from vk_provider._kube.selectorquery import label_matcher
from vk_provider.kit.kube import KubeApiError, WatchEvent

pytestmark = pytest.mark.unit

PODS = "/api/v1/pods"
NODES = "/api/v1/nodes"


def pod(
    name: str, version: int, *, namespace: str = "ns", phase: str = "Running", **labels: str
) -> dict[str, Any]:
    return {
        "metadata": {
            "uid": f"uid-{namespace}-{name}",
            "name": name,
            "namespace": namespace,
            "resourceVersion": str(version),
            "labels": labels,
        },
        "status": {"phase": phase},
    }


class StandIn:
    """Lists what `objects` holds, streams what the test `send`s, and records every direct request."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.api_client = types.SimpleNamespace()
        self.budget = None
        self.objects = objects
        self.requests: list[tuple[str, str]] = []
        self.streams: dict[str, asyncio.Queue[WatchEvent]] = {}
        self.not_served: set[str] = set()

    async def get(self, path: str, *, query: Any = None, compact: bool = False) -> dict[str, Any]:
        return await self.request("GET", path, query=query, compact=compact)

    async def request(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        self.requests.append((method, path))
        if path in self.not_served:
            raise KubeApiError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET" and path in self.objects:
            return {"metadata": {"resourceVersion": "100"}, "items": list(self.objects[path])}
        if method == "GET":
            name = path.rsplit("/", 1)[1]
            for items in self.objects.values():
                for item in items:
                    if item["metadata"]["name"] == name:
                        return item
            raise KubeApiError(404, "NotFound", f"{name} not found")
        body: dict[str, Any] = options["body"]
        return body

    async def watch(self, path: str, *, query: Any, timeout_seconds: int) -> AsyncIterator[WatchEvent]:
        queue = self.streams.setdefault(path, asyncio.Queue())
        while True:
            yield await queue.get()

    async def send(self, path: str, event: WatchEvent) -> None:
        self.streams.setdefault(path, asyncio.Queue()).put_nowait(event)
        for _ in range(20):  # let the reflector's task take it
            await asyncio.sleep(0)

    def lists(self) -> list[str]:
        return [path for method, path in self.requests if method == "GET" and path in self.objects]


async def cached(stand_in: StandIn, *, namespace: str | None = None) -> CachedApi:
    watched = [Watched(PODS), Watched(NODES, namespaced=False)]
    return CachedApi(stand_in, Informers(stand_in, watched, namespace=namespace))  # type: ignore[arg-type]


async def synced(api: CachedApi, path: str) -> None:
    informer = api.informers.informer(ResourcePath.parse(path))  # type: ignore[arg-type]
    await asyncio.wait_for(informer.reflector.synced.wait(), 5)


async def test_a_first_read_goes_to_the_apiserver_and_later_ones_to_the_mirror() -> None:
    stand_in = StandIn({PODS: [pod("a", 1, app="web"), pod("b", 2, app="api")]})
    api = await cached(stand_in)
    try:
        first = await api.get(PODS, query={"labelSelector": "app=web"})  # not listed yet: asked directly
        assert first["items"]  # the stand-in ignores selectors: the apiserver's answer, unfiltered
        await synced(api, PODS)
        before = len(stand_in.requests)
        for _ in range(10):
            answer = await api.get(PODS, query={"labelSelector": "app=web"})
            assert [item["metadata"]["name"] for item in answer["items"]] == ["a"]
        assert len(stand_in.requests) == before  # ten reads, no request
    finally:
        await api.close()


async def test_the_mirror_follows_the_watch() -> None:
    stand_in = StandIn({PODS: [pod("a", 1)]})
    api = await cached(stand_in)
    try:
        api.informers.informer(ResourcePath.parse(PODS))  # type: ignore[arg-type]
        await synced(api, PODS)
        await stand_in.send(PODS, WatchEvent("ADDED", pod("c", 3, namespace="other")))
        await stand_in.send(PODS, WatchEvent("MODIFIED", pod("a", 4, phase="Succeeded")))
        unfinished = await api.get(
            PODS, query={"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}
        )
        assert [item["metadata"]["name"] for item in unfinished["items"]] == ["c"]
        in_ns = await api.get("/api/v1/namespaces/ns/pods")
        assert [item["metadata"]["name"] for item in in_ns["items"]] == ["a"]
        await stand_in.send(PODS, WatchEvent("DELETED", pod("a", 5)))
        with pytest.raises(KubeApiError) as missing:
            await api.get("/api/v1/namespaces/ns/pods/a")
        assert missing.value.not_found
        assert ("GET", "/api/v1/namespaces/ns/pods/a") not in stand_in.requests  # deleted: known absent
    finally:
        await api.close()


async def test_a_missing_object_is_asked_for_once_then_trusted_absent_until_the_watch_brings_it() -> None:
    stand_in = StandIn({PODS: []})
    api = await cached(stand_in)
    try:
        api.informers.informer(ResourcePath.parse(PODS))  # type: ignore[arg-type]
        await synced(api, PODS)
        for _ in range(3):
            with pytest.raises(KubeApiError):
                await api.get("/api/v1/namespaces/ns/pods/later")
        assert stand_in.requests.count(("GET", "/api/v1/namespaces/ns/pods/later")) == 1
        await stand_in.send(PODS, WatchEvent("ADDED", pod("later", 7)))
        found = await api.get("/api/v1/namespaces/ns/pods/later")
        assert found["metadata"]["resourceVersion"] == "7"
    finally:
        await api.close()


async def test_an_object_created_before_the_watch_shows_it_is_read_from_the_apiserver() -> None:
    stand_in = StandIn({PODS: []})
    api = await cached(stand_in)
    try:
        api.informers.informer(ResourcePath.parse(PODS))  # type: ignore[arg-type]
        await synced(api, PODS)
        stand_in.objects["/elsewhere"] = [pod("fresh", 9)]  # created; its watch event not here yet
        found = await api.get("/api/v1/namespaces/ns/pods/fresh")
        assert found["metadata"]["name"] == "fresh"
    finally:
        await api.close()


async def test_a_write_answer_is_read_back_when_newer_and_never_revives_a_deleted_object() -> None:
    stand_in = StandIn({PODS: [pod("a", 5)]})
    api = await cached(stand_in)
    path = "/api/v1/namespaces/ns/pods/a"
    try:
        api.informers.informer(ResourcePath.parse(PODS))  # type: ignore[arg-type]
        await synced(api, PODS)
        await api.patch(path, pod("a", 8, written="yes"))
        assert (await api.get(path))["metadata"]["labels"] == {"written": "yes"}
        await api.patch(path, pod("a", 6, stale="yes"))  # older than the mirror's copy: ignored
        assert (await api.get(path))["metadata"]["labels"] == {"written": "yes"}
        await stand_in.send(PODS, WatchEvent("DELETED", pod("a", 9)))
        await api.patch(path, pod("a", 10))  # a late answer after the deletion
        with pytest.raises(KubeApiError):
            await api.get(path)
    finally:
        await api.close()


async def test_reads_outside_the_scope_or_with_options_go_to_the_apiserver() -> None:
    stand_in = StandIn({"/api/v1/namespaces/mine/pods": [pod("a", 1, namespace="mine")], NODES: []})
    api = await cached(stand_in, namespace="mine")
    try:
        await api.get("/api/v1/namespaces/mine/pods")
        await synced(api, "/api/v1/namespaces/mine/pods")
        stand_in.requests.clear()
        await api.get("/api/v1/namespaces/mine/pods")
        assert stand_in.requests == []
        await api.get("/api/v1/namespaces/mine/pods", query={"fieldSelector": "spec.schedulerName=x"})
        await api.get("/api/v1/namespaces/mine/pods", query={"resourceVersion": "0"})
        with pytest.raises(KubeApiError):  # the stand-in has no logs; what matters is where it asked
            await api.get("/api/v1/namespaces/mine/pods/a/log")  # a subresource
        assert len(stand_in.requests) == 3
        stand_in.objects[PODS] = []
        await api.get(PODS)  # cluster-wide: outside the scope
        assert stand_in.requests[-1] == ("GET", PODS)
        assert uncached(api) is stand_in  # type: ignore[comparison-overlap]
    finally:
        await api.close()


async def test_a_type_the_cluster_does_not_serve_is_a_404_as_from_the_apiserver() -> None:
    stand_in = StandIn({NODES: []})
    stand_in.not_served.add(NODES)
    api = await cached(stand_in)
    try:
        with pytest.raises(KubeApiError):
            await api.get(NODES)  # not listed yet: the apiserver says so itself
        await synced(api, NODES)
        with pytest.raises(KubeApiError) as error:
            await api.get(NODES)
        assert error.value.not_found
    finally:
        await api.close()


def test_paths_are_taken_apart_as_the_apiserver_lays_them_out() -> None:
    assert ResourcePath.parse("/api/v1/namespaces") == ResourcePath("/api/v1", "namespaces")
    assert ResourcePath.parse("/api/v1/namespaces/ns") == ResourcePath("/api/v1", "namespaces", None, "ns")
    assert ResourcePath.parse("/apis/apps/v1/namespaces/ns/deployments/web/scale") == ResourcePath(
        "/apis/apps/v1", "deployments", "ns", "web", "scale"
    )
    assert ResourcePath.parse("/api/v1/nodes/n1") == ResourcePath("/api/v1", "nodes", None, "n1")
    assert ResourcePath.parse("/version") is None


def test_a_watched_path_must_be_a_cluster_wide_collection() -> None:
    with pytest.raises(ValueError, match="cluster-wide path"):
        Informers(None, [Watched("/api/v1/namespaces/ns/pods")])  # type: ignore[arg-type]


async def test_a_subscriber_woken_by_a_change_reads_that_change() -> None:
    stand_in = StandIn({PODS: [pod("a", 1)]})
    api = await cached(stand_in)
    seen: list[str | None] = []

    async def woken(uid: str) -> None:
        read = await api.get("/api/v1/namespaces/ns/pods/a")
        seen.append(read["metadata"]["labels"].get("step"))

    try:
        api.informers.watch(PODS, woken)
        await synced(api, PODS)
        await stand_in.send(PODS, WatchEvent("MODIFIED", pod("a", 2, step="two")))
        assert seen == [None, "two"]  # the list, then the change: each read shows what woke it
        with pytest.raises(ValueError, match="not a watched collection"):
            api.informers.watch("/api/v1/services", woken)
    finally:
        await api.close()


async def test_what_a_mirror_keeps_is_what_every_read_and_write_returns() -> None:
    def labels_only(obj: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": obj["metadata"]}

    stand_in = StandIn({PODS: [{**pod("a", 1), "spec": {"big": "x" * 100}}]})
    api = CachedApi(stand_in, Informers(stand_in, [Watched(PODS, keep=labels_only)]))  # type: ignore[arg-type]
    try:
        api.informers.informer(ResourcePath.parse(PODS))  # type: ignore[arg-type]
        await synced(api, PODS)
        assert "spec" not in (await api.get(PODS))["items"][0]
        assert "spec" not in await api.get("/api/v1/namespaces/ns/pods/a")
        written = await api.patch("/api/v1/namespaces/ns/pods/a", {**pod("a", 2), "spec": {"big": "y"}})
        assert "spec" not in written
    finally:
        await api.close()


async def test_a_list_by_label_reads_its_index_which_follows_every_change() -> None:
    pods = [pod(f"p{number}", number, app=f"app-{number % 50}") for number in range(500)]
    stand_in = StandIn({PODS: pods})
    api = await cached(stand_in)
    informer = api.informers.informer(ResourcePath.parse(PODS))  # type: ignore[arg-type]
    looked_at = 0

    def counting(text: str) -> Any:
        matcher = label_matcher(text)

        def match(labels: Any) -> bool:
            nonlocal looked_at
            looked_at += 1
            return bool(matcher(labels))

        return match

    try:
        await synced(api, PODS)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("vk_provider._kube.informers.label_matcher", counting)

            async def names(selector: str, namespace: str = "ns") -> list[str]:
                answer = await api.get(
                    f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": selector}
                )
                return [item["metadata"]["name"] for item in answer["items"]]

            assert await names("app=app-7,tier!=db") == [f"p{n}" for n in sorted(range(7, 500, 50), key=str)]
            assert looked_at == 10  # the ten pods with app=app-7, not the 500
            await stand_in.send(PODS, WatchEvent("MODIFIED", pod("p7", 600, app="app-8")))
            await stand_in.send(PODS, WatchEvent("ADDED", pod("new", 601, app="app-7")))
            await stand_in.send(
                PODS, WatchEvent("ADDED", pod("elsewhere", 602, namespace="other", app="app-7"))
            )
            await stand_in.send(PODS, WatchEvent("DELETED", pod("p57", 603, app="app-7")))
            seven = await names("app=app-7")
            assert "new" in seven
            assert not {"p7", "p57", "elsewhere"} & set(seven)
            assert "p7" in await names("app = app-8")
            assert await names("app=app-7", namespace="other") == ["elsewhere"]
            informer.remember(pod("new", 700, app="app-9"))  # a write's answer moves it too
            assert "new" not in await names("app=app-7")
            assert "new" in await names("app=app-9")
            assert len(await names("app in (app-1,app-2)")) == 20  # no one value required: all are looked at
    finally:
        await api.close()
