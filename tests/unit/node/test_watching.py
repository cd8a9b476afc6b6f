"""The reflector lists, watches, skips bookmarks, relists on 410 and reports what vanished meanwhile.

The apiserver side is a scripted stand-in for our own KubeApi wrapper (the boundary the reflector
uses), not a fake API server; the real watch path is covered by the integration tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from vk_provider._kube.watching import Reflector
from vk_provider.kit.kube import KubeApiError, WatchEvent


def pod(uid: str, version: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": version, "name": uid, "namespace": "ns"}}


class ScriptedApi:
    """Answers list calls from `listings` and watch calls from `streams`, in order."""

    def __init__(
        self, listings: list[dict[str, Any]], streams: list[list[WatchEvent] | KubeApiError]
    ) -> None:
        self.listings = listings
        self.streams = streams
        self.watched_from: list[str] = []
        self.exhausted = asyncio.Event()

    async def get(self, path: str, *, query: Any = None, compact: bool = False) -> dict[str, Any]:
        return self.listings.pop(0)

    async def watch(
        self, path: str, *, query: dict[str, Any], timeout_seconds: int
    ) -> AsyncIterator[WatchEvent]:
        self.watched_from.append(query["resourceVersion"])
        if not self.streams:
            self.exhausted.set()
            await asyncio.Event().wait()  # hold the stream open until the test ends
        step = self.streams.pop(0)
        if isinstance(step, KubeApiError):
            raise step
        for event in step:
            yield event


async def run_until_exhausted(api: ScriptedApi, reflector: Reflector) -> None:
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(api.exhausted.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_events_after_the_list_update_the_cache_and_resume_from_the_last_version() -> None:
    api = ScriptedApi(
        listings=[{"metadata": {"resourceVersion": "10"}, "items": [pod("a", "9")]}],
        streams=[
            [
                WatchEvent("ADDED", pod("b", "11")),
                WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "12"}}),
            ],
            [WatchEvent("DELETED", pod("a", "13"))],
        ],
    )
    changed: list[str] = []

    async def on_change(uid: str) -> None:
        changed.append(uid)

    reflector = Reflector(api, "/pods", query={}, on_change=on_change, description="pods")  # type: ignore[arg-type]
    await run_until_exhausted(api, reflector)
    assert set(reflector.objects) == {"b"}
    assert changed == ["a", "b", "a"]
    assert api.watched_from == ["10", "12", "13"]  # bookmarks advance the version; streams resume
    assert reflector.synced.is_set()


async def test_410_gone_relists_and_reports_objects_that_vanished_in_between() -> None:
    api = ScriptedApi(
        listings=[
            {"metadata": {"resourceVersion": "10"}, "items": [pod("a", "9"), pod("b", "9")]},
            {"metadata": {"resourceVersion": "50"}, "items": [pod("b", "9"), pod("c", "40")]},
        ],
        streams=[KubeApiError(410, "Expired", "too old resource version")],
    )
    changed: list[str] = []

    async def on_change(uid: str) -> None:
        changed.append(uid)

    reflector = Reflector(api, "/pods", query={}, on_change=on_change, description="pods")  # type: ignore[arg-type]
    await run_until_exhausted(api, reflector)
    assert set(reflector.objects) == {"b", "c"}
    assert changed[2:] == ["a", "c"]  # "a" vanished, "c" is new; unchanged "b" is not reported again
    assert reflector.relists == 2
    assert api.watched_from == ["10", "50"]


async def test_the_cache_keeps_no_managed_fields() -> None:
    listed = pod("a", "9")
    listed["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    changed = pod("b", "11")
    changed["metadata"]["managedFields"] = [{"manager": "vk-provider", "fieldsV1": {"f:status": {}}}]
    api = ScriptedApi(
        listings=[{"metadata": {"resourceVersion": "10"}, "items": [listed]}],
        streams=[[WatchEvent("ADDED", changed)]],
    )

    async def on_change(uid: str) -> None:
        return None

    reflector = Reflector(api, "/api/v1/pods", query={}, on_change=on_change, description="pods")  # type: ignore[arg-type]
    await run_until_exhausted(api, reflector)
    assert set(reflector.objects) == {"a", "b"}
    assert all("managedFields" not in obj["metadata"] for obj in reflector.objects.values())


async def test_the_cache_keeps_what_keep_makes_of_listed_and_watched_objects() -> None:
    def with_spec(uid: str, version: str) -> dict[str, Any]:
        return pod(uid, version) | {"spec": {"containers": [{"name": "big", "env": []}]}}

    api = ScriptedApi(
        listings=[{"metadata": {"resourceVersion": "10"}, "items": [with_spec("a", "9")]}],
        streams=[[WatchEvent("MODIFIED", with_spec("a", "11")), WatchEvent("ADDED", with_spec("b", "12"))]],
    )

    def identity_only(obj: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": obj["metadata"]}

    reflector = Reflector(
        api,  # type: ignore[arg-type]
        "/api/v1/pods",
        query={},
        on_change=nothing_changed,
        description="pods",
        keep=identity_only,
    )
    await run_until_exhausted(api, reflector)
    assert reflector.objects == {"a": pod("a", "11"), "b": pod("b", "12")}


class TypeInstalledLater(ScriptedApi):
    """The first list answers 404 (the resource type is not served yet), later ones from `listings`;
    `synced_when_served` records whether the reflector counted itself synced by then."""

    def __init__(self, listings: list[dict[str, Any]]) -> None:
        super().__init__(listings, [])
        self.refused = 0
        self.reflector: Reflector | None = None
        self.synced_when_served: bool | None = None

    async def get(self, path: str, *, query: Any = None, compact: bool = False) -> dict[str, Any]:
        if not self.refused:
            self.refused += 1
            raise KubeApiError(404, "NotFound", "the server could not find the requested resource")
        assert self.reflector is not None
        self.synced_when_served = self.reflector.synced.is_set()
        return await super().get(path, query=query, compact=compact)


async def nothing_changed(uid: str) -> None:
    return None


@pytest.mark.parametrize(("missing_type", "synced"), [("routes are not kept", True), (None, False)])
async def test_a_resource_type_not_served_yet_is_empty_and_synced_only_where_the_caller_said_so(
    monkeypatch: pytest.MonkeyPatch, missing_type: str | None, synced: bool
) -> None:
    monkeypatch.setattr("vk_provider._kube.watching.RETRY_MAX_SECONDS", 0.01)
    monkeypatch.setattr("vk_provider._kube.watching.RETRY_INITIAL_SECONDS", 0.01)
    api = TypeInstalledLater(listings=[{"metadata": {"resourceVersion": "5"}, "items": [pod("a", "4")]}])
    api.reflector = Reflector(
        api,  # type: ignore[arg-type]
        "/keptroutes",
        query={},
        on_change=nothing_changed,
        description="kept routes",
        missing_type=missing_type,
    )
    await run_until_exhausted(api, api.reflector)
    assert api.refused == 1
    # With `missing_type` the component goes on as if the list were empty; without, it waits.
    assert api.synced_when_served is synced
    assert set(api.reflector.objects) == {"a"}  # listed once the type is served
    assert api.watched_from == ["5"]
