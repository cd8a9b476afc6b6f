"""Repeated Events fold as client-go's correlator folds them: identical ones patch a count, similar ones
combine past ten messages, and a flood about one object is held back by a token bucket.

The correlator runs on a clock the tests move; the recorder's posts go to a recording stand-in for the
KubeApi wrapper, which can answer 404 to a patch.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vk_provider._kube.eventcorrelation import (
    AGGREGATION_WINDOW_SECONDS,
    COMBINED_PREFIX,
    MAX_SIMILAR,
    SPAM_BURST,
    SPAM_REFILL_SECONDS,
    EventCorrelator,
    EventKey,
)
from vk_provider._kube.events import EventRecorder, InvolvedObject
from vk_provider.kit.kube import KubeApiError

pytestmark = pytest.mark.unit

AT = datetime(2026, 12, 3, 16, 0, tzinfo=UTC)
POD = InvolvedObject("Pod", "web", "ns", "u1")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def key(reason: str = "ProviderCreateFailed", name: str = "web", type: str = "Warning") -> EventKey:
    return EventKey("vk-provider", "n", "Pod", "ns", name, f"uid-{name}", type, reason)


def correlator(clock: Clock) -> EventCorrelator:
    names = iter(range(1_000_000))
    return EventCorrelator(clock=clock, new_name=lambda name: f"{name}.{next(names)}")


def test_identical_events_within_ten_minutes_are_one_event_with_a_count() -> None:
    clock = Clock()
    events = correlator(clock)
    first = events.correlate(key(), "quota exceeded", AT)
    assert first is not None
    assert first.count == 1
    assert not first.is_repeat
    clock.now += 60
    second = events.correlate(key(), "quota exceeded", AT + timedelta(minutes=1))
    assert second is not None
    assert (second.name, second.count, second.first_at, second.last_at) == (
        first.name,
        2,
        AT,
        AT + timedelta(minutes=1),
    )
    clock.now += AGGREGATION_WINDOW_SECONDS + 1  # a quiet window: the next one is news again
    later = events.correlate(key(), "quota exceeded", AT + timedelta(minutes=20))
    assert later is not None
    assert later.count == 1
    assert later.name != first.name


def test_a_different_reason_type_or_object_is_another_event() -> None:
    clock = Clock()
    events = correlator(clock)
    names = {
        correlated.name
        for correlated in (
            events.correlate(key(), "m", AT),
            events.correlate(key(reason="Other"), "m", AT),
            events.correlate(key(type="Normal"), "m", AT),
            events.correlate(key(name="db"), "m", AT),
        )
        if correlated is not None
    }
    assert len(names) == 4


def test_similar_events_combine_from_the_tenth_message_on() -> None:
    clock = Clock()
    events = correlator(clock)
    results = []
    for number in range(MAX_SIMILAR + 3):
        clock.now += 1
        results.append(events.correlate(key(), f"attempt {number} failed", AT))
    separate = results[: MAX_SIMILAR - 1]
    combined = results[MAX_SIMILAR - 1 :]
    assert all(result is not None and result.count == 1 for result in separate)
    assert len({result.name for result in separate if result is not None}) == MAX_SIMILAR - 1
    assert [result.message if result else None for result in combined] == [
        COMBINED_PREFIX + f"attempt {number} failed" for number in range(MAX_SIMILAR - 1, MAX_SIMILAR + 3)
    ]
    assert [result.count if result else None for result in combined] == [1, 2, 3, 4]
    assert len({result.name for result in combined if result is not None}) == 1


def test_similar_events_spread_wider_than_the_window_do_not_combine() -> None:
    clock = Clock()
    events = correlator(clock)
    for number in range(MAX_SIMILAR * 2):
        clock.now += AGGREGATION_WINDOW_SECONDS + 1
        result = events.correlate(key(), f"attempt {number} failed", AT)
        assert result is not None
        assert not result.message.startswith(COMBINED_PREFIX)


def test_a_flood_about_one_object_is_held_back_by_a_token_bucket_of_25_refilled_every_5_minutes() -> None:
    clock = Clock()
    events = correlator(clock)
    allowed = [events.correlate(key(), "same", AT) is not None for _ in range(SPAM_BURST + 5)]
    assert allowed == [True] * SPAM_BURST + [False] * 5
    assert events.dropped == 5
    assert events.correlate(key(name="db"), "same", AT) is not None  # another object has its own bucket
    clock.now += SPAM_REFILL_SECONDS - 1
    assert events.correlate(key(), "same", AT) is None
    clock.now += 1
    repeat = events.correlate(key(), "same", AT)
    assert repeat is not None
    assert repeat.count == SPAM_BURST + 7


class EventsApi:
    """Records creates and patches of Events; patches of names in `gone` answer 404."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.gone: set[str] = set()

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", path, body))
        return body

    async def patch(self, path: str, body: dict[str, Any], *, content_type: str = "") -> dict[str, Any]:
        self.calls.append(("patch", path, body))
        if path.rsplit("/", 1)[-1] in self.gone:
            raise KubeApiError(404, "NotFound", "gone")
        return body


async def drain(recorder: EventRecorder) -> None:
    while not recorder._queue.empty():
        await recorder._post(recorder._queue.get_nowait())


async def test_the_recorder_creates_once_then_patches_the_count_and_recreates_an_event_that_is_gone() -> None:
    api = EventsApi()
    clock = Clock()
    recorder = EventRecorder(api, host="n", clock=clock)  # type: ignore[arg-type]
    for _ in range(3):
        recorder.record(POD, "Warning", "ProviderCreateFailed", "quota exceeded")
    await drain(recorder)
    (create, *patches) = api.calls
    assert create[0] == "create"
    assert create[1] == "/api/v1/namespaces/ns/events"
    name = create[2]["metadata"]["name"]
    assert name.startswith("web.")
    assert create[2]["count"] == 1
    assert [(kind, path.rsplit("/", 1)[-1], body["count"]) for kind, path, body in patches] == [
        ("patch", name, 2),
        ("patch", name, 3),
    ]
    assert set(patches[0][2]) == {"count", "lastTimestamp", "message"}

    api.calls.clear()
    api.gone.add(name)
    recorder.record(POD, "Warning", "ProviderCreateFailed", "quota exceeded")
    await drain(recorder)
    assert [kind for kind, _, _ in api.calls] == ["patch", "create"]
    recreated = api.calls[1][2]
    assert (recreated["metadata"]["name"], recreated["count"]) == (name, 4)
    assert recreated["firstTimestamp"] <= recreated["lastTimestamp"]
