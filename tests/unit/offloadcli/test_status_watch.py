"""`status` with its Events, and `status --watch`: a redraw on each change of the Offload and on a timer.

The apiserver is a fake that answers GETs from fields and streams watch events from a queue, and the
timer is a fake `sleep` the test rings by hand, so nothing here waits on the wall clock.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Mapping
from typing import Any, TypeVar, cast

import pytest

from vk_provider.kit.kube import KubeApi, KubeApiError, WatchEvent
from vk_provider.offloadcli import commands, rendering

STEP = 5.0
"""Seconds a test waits for the command to get somewhere; only reached when something is broken."""
T = TypeVar("T")


async def soon(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, timeout=STEP)


def offload(phase: str, weight: int, version: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "offload.vk-provider.dev/v1alpha1",
        "kind": "Offload",
        "metadata": {
            "name": "chat",
            "namespace": "ml",
            "uid": "offload-uid",
            "resourceVersion": str(version),
            "creationTimestamp": "2026-12-02T11:55:00Z",
        },
        "spec": {"placement": "away", "strategy": {"toAwaySteps": [50, 100]}},
        "status": {"phase": phase, "targetPlacement": "away", "awayWeight": weight, "stepIndex": 1},
    }


def event(reason: str, version: int, uid: str = "offload-uid") -> dict[str, Any]:
    return {
        "metadata": {"name": f"chat.{version}", "uid": f"event-{version}", "resourceVersion": str(version)},
        "involvedObject": {"kind": "Offload", "name": "chat", "uid": uid},
        "type": "Normal",
        "reason": reason,
        "message": f"{reason} message",
        "lastTimestamp": f"2026-12-02T11:5{version % 10}:00Z",
    }


class FakeApi:
    """GETs of the Offload and of its Events, and one watch of Offloads fed by `changes`."""

    def __init__(self, current: dict[str, Any], events: list[dict[str, Any]] | KubeApiError) -> None:
        self.current = current
        self.events = events
        self.changes: asyncio.Queue[WatchEvent] = asyncio.Queue()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.watches = 0
        self.watch_closed = False

    async def get(self, path: str, *, query: Mapping[str, str | int | bool] | None = None) -> dict[str, Any]:
        self.requests.append((path, dict(query or {})))
        if path.endswith("/events"):
            if isinstance(self.events, KubeApiError):
                raise self.events
            return {"kind": "EventList", "items": copy.deepcopy(self.events)}
        return copy.deepcopy(self.current)

    async def watch(
        self, path: str, *, query: Mapping[str, str | int | bool], timeout_seconds: int
    ) -> AsyncIterator[WatchEvent]:
        self.watches += 1
        try:
            while True:
                yield await self.changes.get()
        finally:
            self.watch_closed = True

    def change(self, new: dict[str, Any], kind: str = "MODIFIED") -> None:
        self.changes.put_nowait(WatchEvent(type=kind, object=new))

    @property
    def event_lists(self) -> list[dict[str, Any]]:
        return [query for path, query in self.requests if path.endswith("/events")]


class Timer:
    """A `sleep` that returns only when the test rings, and tells the test each time it starts one."""

    def __init__(self) -> None:
        self.started: asyncio.Queue[float] = asyncio.Queue()
        self._rings: asyncio.Queue[None] = asyncio.Queue()

    async def sleep(self, seconds: float) -> None:
        self.started.put_nowait(seconds)
        await self._rings.get()

    def ring(self) -> None:
        self._rings.put_nowait(None)


def status_arguments(*, watch: bool = False, output: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(name="chat", watch=watch, output=output)


def start_status(
    api: FakeApi, timer: Timer, *, interactive: bool = False, output: str | None = None
) -> asyncio.Task[int]:
    return asyncio.create_task(
        commands.run_status(
            cast(KubeApi, api),
            status_arguments(watch=True, output=output),
            "ml",
            sleep=timer.sleep,
            interactive=interactive,
        )
    )


async def test_status_lists_the_events_of_the_offload_and_shows_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    api = FakeApi(offload("Shifting", 50), [event("MigrationStarted", 1), event("Other", 2, uid="old")])

    assert await commands.run_status(cast(KubeApi, api), status_arguments(), "ml") == 0

    assert api.requests[1] == (
        "/api/v1/namespaces/ml/events",
        {"fieldSelector": "involvedObject.kind=Offload,involvedObject.name=chat"},
    )
    out = capsys.readouterr().out
    assert "Gates:\n  Limits:      error rate <= 1%, p99 <= 2000 ms" in out
    events = out.split("Recent events:\n", 1)[1].splitlines()
    assert [line.split()[2] for line in events[1:]] == ["MigrationStarted"]
    assert api.watches == 0


@pytest.mark.parametrize(
    ("error", "note"),
    [
        (
            KubeApiError(403, "Forbidden", "events is forbidden"),
            'listing events in namespace "ml" is forbidden',
        ),
        (KubeApiError(500, "InternalError", "etcd is sad"), "listing events failed: 500 InternalError"),
    ],
)
async def test_events_that_cannot_be_listed_become_a_note(
    error: KubeApiError, note: str, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeApi(offload("Shifting", 50), error)

    assert await commands.run_status(cast(KubeApi, api), status_arguments(), "ml") == 0

    last = capsys.readouterr().out.rstrip("\n").splitlines()[-2:]
    assert last[0] == "Recent events:"
    assert last[1].startswith("  (not shown: ")
    assert note in last[1]


@pytest.mark.parametrize("output", ["json", "yaml"])
async def test_status_as_a_document_is_the_raw_object_without_events(
    output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeApi(offload("Shifting", 50), [event("MigrationStarted", 1)])

    assert await commands.run_status(cast(KubeApi, api), status_arguments(output=output), "ml") == 0

    assert capsys.readouterr().out == rendering.render_document(offload("Shifting", 50), output) + "\n"
    assert api.event_lists == []


async def test_watch_redraws_for_new_events_on_the_timer_and_for_changes_until_interrupted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    api = FakeApi(offload("Shifting", 50), [event("MigrationStarted", 1)])
    timer = Timer()
    status = start_status(api, timer)

    assert await soon(timer.started.get()) <= commands.REFRESH_SECONDS
    first = capsys.readouterr().out
    assert "Phase:        Shifting" in first
    assert "MigrationStarted" in first

    # A tick with nothing new: the Events are listed again, but a log gets no identical page.
    timer.ring()
    await soon(timer.started.get())
    assert capsys.readouterr().out == ""
    assert len(api.event_lists) == 2

    # A tick after a new Event: the page is drawn again, with it.
    api.events = [event("MigrationStarted", 1), event("StepApplied", 2)]
    timer.ring()
    await soon(timer.started.get())
    page = capsys.readouterr().out
    assert page.startswith("\nName:         chat")
    assert [line.split()[2] for line in page.split("Recent events:\n")[1].splitlines()[1:]] == [
        "MigrationStarted",
        "StepApplied",
    ]

    # A change of the Offload: drawn at once, without waiting for the timer.
    api.change(offload("Shifting", 100, version=2))
    await soon(timer.started.get())
    assert "[####################] 100% away" in capsys.readouterr().out

    # The migration ends: its page is drawn, and the watch goes on (a later flip shows too) until
    # interrupted, like `kubectl get --watch`.
    api.change(offload("Succeeded", 100, version=3))
    await soon(timer.started.get())
    assert "Phase:        Succeeded" in capsys.readouterr().out
    assert not status.done()
    status.cancel()
    await asyncio.wait({status})
    assert api.watch_closed


async def test_on_a_tty_every_tick_redraws_from_the_top(capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeApi(offload("Paused", 50), [event("Paused", 1)])
    timer = Timer()
    status = start_status(api, timer, interactive=True)
    await soon(timer.started.get())
    capsys.readouterr()

    timer.ring()
    await soon(timer.started.get())

    assert capsys.readouterr().out.startswith(commands.CLEAR_SCREEN + "\nName:         chat")
    status.cancel()
    await asyncio.wait({status})
    assert api.watch_closed


async def test_watch_without_a_migration_running_keeps_watching(capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeApi(offload("RolledBack", 0), [])
    timer = Timer()
    status = start_status(api, timer)
    await soon(timer.started.get())
    assert "Next:         the migration to away ended RolledBack" in capsys.readouterr().out

    api.change(offload("Preparing", 0, version=2))  # someone flips: the watch shows the new migration
    await soon(timer.started.get())
    assert "Phase:        Preparing" in capsys.readouterr().out
    assert api.watches == 1
    assert not status.done()
    status.cancel()
    await asyncio.wait({status})
    assert api.watch_closed


async def test_watch_fails_when_the_offload_is_deleted(capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeApi(offload("Shifting", 50), [])
    timer = Timer()
    status = start_status(api, timer)
    await soon(timer.started.get())

    api.change(offload("Shifting", 50, version=2), kind="DELETED")

    with pytest.raises(commands.CommandError, match='offload "chat" was deleted'):
        await soon(status)
    assert api.watch_closed


async def test_watch_as_json_prints_each_change_and_no_ticks(capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeApi(offload("Shifting", 50), [event("MigrationStarted", 1)])
    timer = Timer()
    status = start_status(api, timer, output="json")

    api.change(offload("Succeeded", 100, version=2))
    api.change(offload("Preparing", 0, version=3))

    async def printed(count: int) -> list[str]:
        out = ""
        while out.count("\n}") < count:
            await asyncio.sleep(0.01)  # captured output has no event to wait on (noqa: sleep-ok)
            out += capsys.readouterr().out
        return out.replace("}\n{", "}\x00{").split("\x00")

    documents = await soon(printed(3))
    assert [json.loads(text)["status"]["phase"] for text in documents] == [
        "Shifting",
        "Succeeded",
        "Preparing",
    ]
    assert not status.done()
    status.cancel()
    await asyncio.wait({status})
    assert api.event_lists == []
    assert timer.started.empty()


async def test_refreshes_race_the_changes_against_the_timer() -> None:
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    closed = asyncio.Event()

    async def changes() -> AsyncGenerator[dict[str, Any], None]:
        try:
            while (item := await queue.get()) is not None:
                yield item
        finally:
            closed.set()

    timer = Timer()
    first = {"version": 1}
    pages = commands.refreshes(changes(), first, 2.0, sleep=timer.sleep)

    nothing_new = asyncio.ensure_future(anext(pages))
    assert 0.5 <= await soon(timer.started.get()) <= 2.0  # what is left of 2s, and no less than 2s/4
    timer.ring()
    assert await soon(nothing_new) == (first, False)

    queue.put_nowait({"version": 2})
    assert await soon(anext(pages)) == ({"version": 2}, True)

    queue.put_nowait(None)  # the changes end: so do the refreshes
    with pytest.raises(StopAsyncIteration):
        await soon(anext(pages))
    assert closed.is_set()


async def test_closing_the_refreshes_closes_the_changes() -> None:
    closed = asyncio.Event()

    async def changes() -> AsyncGenerator[dict[str, Any], None]:
        try:
            await asyncio.Event().wait()
            yield {}
        finally:
            closed.set()

    timer = Timer()
    pages = commands.refreshes(changes(), {"version": 1}, 2.0, sleep=timer.sleep)
    waiting = asyncio.ensure_future(anext(pages))
    await soon(timer.started.get())
    timer.ring()
    await soon(waiting)

    await pages.aclose()

    assert closed.is_set()
