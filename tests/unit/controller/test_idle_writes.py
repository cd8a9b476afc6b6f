"""An Offload at rest costs the apiserver no write: its serving side is watched every few seconds,
and a pass that finds nothing new must not PATCH the same status again (at 1,000 Offloads watched
every 5 s that was 200 writes a second; bench/scale.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.unit.controller.offload_plane import OFFLOAD, controller, serving_home
from vk_provider.offload.status import set_condition

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 7, 13, 0, tzinfo=UTC)


def status_writes(writes: list[tuple[str, str, object]]) -> int:
    return sum(1 for verb, path, _ in writes if verb == "patch" and path == f"{OFFLOAD}/status")


async def test_passes_over_an_offload_at_rest_write_nothing_after_the_first() -> None:
    api = serving_home()
    control = controller(api)
    await control.reconcile()  # first sight: the status is written
    assert status_writes(api.writes) >= 1
    before = status_writes(api.writes)
    for _ in range(5):
        control.clock.advance(5)
        await control.reconcile()
    assert status_writes(api.writes) == before, api.writes[-1]


def test_setting_a_condition_to_what_it_was_keeps_the_list_as_it_was() -> None:
    first = set_condition([], "Degraded", "False", "Serving", "serves", now=NOW, generation=1)
    both = set_condition(first, "Ready", "True", "Resolved", "exists", now=NOW, generation=1)
    again = set_condition(both, "Degraded", "False", "Serving", "serves", now=NOW, generation=1)
    assert again == both  # in its place: not moved to the end
    changed = set_condition(both, "Degraded", "True", "Lost", "lost", now=NOW, generation=1)
    assert [item["type"] for item in changed] == ["Degraded", "Ready"]
    assert changed[0]["status"] == "True"
