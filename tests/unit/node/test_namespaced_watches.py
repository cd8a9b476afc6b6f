"""A node limited to namespaces watches pods and Services in each of them, never cluster-wide, and
reads the per-namespace caches as one.

The apiserver side answers our KubeApi wrapper's list and watch calls by path (the boundary the
reflectors use); the real watch path and the RBAC are covered by tests/integration.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from vk_provider._kube.combined import CombinedReflector, Mirror
from vk_provider._kube.watching import Reflector
from vk_provider.kit.kube import WatchEvent
from vk_provider.node import watches
from vk_provider.node.settings import NodeSettings


def pod(uid: str, namespace: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": "1", "name": uid, "namespace": namespace}}


class ApiByPath:
    """Lists `items[path]` once the test releases it in `open` (`asked` tells it was asked for);
    every watch stays quiet."""

    def __init__(self, items: dict[str, list[dict[str, Any]]]) -> None:
        self.items = items
        self.open: dict[str, asyncio.Event] = {path: asyncio.Event() for path in items}
        self.asked: dict[str, asyncio.Event] = {path: asyncio.Event() for path in items}
        self.listed: list[tuple[str, dict[str, str]]] = []

    async def get(self, path: str, *, query: Any = None, compact: bool = False) -> dict[str, Any]:
        self.listed.append((path, dict(query or {})))
        self.asked[path].set()
        await self.open[path].wait()
        return {"metadata": {"resourceVersion": "1"}, "items": self.items[path]}

    async def watch(
        self, path: str, *, query: dict[str, Any], timeout_seconds: int
    ) -> AsyncIterator[WatchEvent]:
        await asyncio.Event().wait()
        yield WatchEvent("BOOKMARK", {})  # never reached: makes this an async generator


async def ignore(uid: str) -> None:
    return None


async def test_listed_namespaces_are_each_watched_and_read_as_one_cache() -> None:
    settings = NodeSettings(node_name="vk", namespaces=("team-a", "team-b"))
    api = ApiByPath(
        {
            "/api/v1/namespaces/team-a/pods": [pod("a1", "team-a")],
            "/api/v1/namespaces/team-b/pods": [pod("b1", "team-b"), pod("b2", "team-b")],
        }
    )
    pods = watches.bound_pods(api, settings, ignore)  # type: ignore[arg-type]
    running = asyncio.create_task(pods.run())
    try:
        api.open["/api/v1/namespaces/team-a/pods"].set()
        for asked in api.asked.values():
            await asyncio.wait_for(asked.wait(), 5)
        assert not pods.synced.is_set()  # team-b has not listed: "every pod bound here" is not known yet
        api.open["/api/v1/namespaces/team-b/pods"].set()
        await asyncio.wait_for(pods.synced.wait(), 5)
        assert sorted(pods.objects) == ["a1", "b1", "b2"]
        assert pods.objects["b2"]["metadata"]["namespace"] == "team-b"
        assert "nope" not in pods.objects
        assert len(pods.objects) == 3
        assert sorted(path for path, _ in api.listed) == sorted(api.items)
        assert {query["fieldSelector"] for _, query in api.listed} == {"spec.nodeName=vk"}
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_the_combined_cache_follows_a_part_that_relisted() -> None:
    """A Reflector replaces its dict on a relist: the union must read the new one, not a copy."""
    settings = NodeSettings(node_name="vk", namespaces=("team-a",))
    pods = watches.bound_pods(ApiByPath({}), settings, ignore)  # type: ignore[arg-type]
    assert isinstance(pods, CombinedReflector)
    (part,) = pods.parts
    part.objects = {"fresh": pod("fresh", "team-a")}
    assert list(pods.objects) == ["fresh"]


def test_without_namespaces_the_node_watches_cluster_wide() -> None:
    settings = NodeSettings(node_name="vk")
    services: Mirror = watches.services(ApiByPath({}), settings)  # type: ignore[arg-type]
    assert isinstance(services, Reflector)
