"""An Offload at rest costs the apiserver no write: its serving side is watched every few seconds,
and a pass that finds nothing new must not PATCH the same status again (at 1,000 Offloads watched
every 5 s that was 200 writes a second; bench/scale.py)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.unit.controller.offload_plane import OFFLOAD, controller, serving_home
from vk_provider.controller.passes import POLL_SECONDS
from vk_provider.controller.reconciler import ROUTER_LAG_REPORTED_AFTER_SECONDS
from vk_provider.controller.routers import RouteView
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


async def test_routers_picking_a_step_up_are_waited_for_without_a_write_until_the_lag_lasts() -> None:
    """A wave of a hundred migrations spent a status write per step and Offload on saying that the
    routers had not applied a weight written a moment before; only a lag that lasts is said."""
    api = serving_home()
    control = controller(api)
    await control.reconcile()
    api.change_spec(placement="away")
    held_at: list[int] = []
    real_views = control.routes.views

    async def lagging_views(spec: Any) -> list[RouteView]:
        views = await real_views(spec)
        if not held_at:
            return views
        return [dataclasses.replace(view, away_weight=held_at[0]) for view in views]

    control.routes.views = lagging_views  # type: ignore[method-assign]
    for _ in range(10):  # prepare: the away side comes up and every router sees it
        await control.reconcile()
        api.settle()
        if api.status().get("phase") == "Shifting":
            break
    assert api.status()["phase"] == "Shifting"
    assert api.status()["awayWeight"] == 100
    held_at.append(0)  # the routers still apply 0
    before = status_writes(api.writes)
    control.clock.advance(1)
    assert await control.reconcile() == POLL_SECONDS
    control.clock.advance(1)
    await control.reconcile()
    assert status_writes(api.writes) == before  # two seconds behind: waited for, nothing written
    control.clock.advance(ROUTER_LAG_REPORTED_AFTER_SECONDS)
    await control.reconcile()
    assert status_writes(api.writes) == before + 1
    progressing = api.condition("Progressing")
    assert progressing["reason"] == "WaitingForRouters"
    assert "do not apply away weight 100" in progressing["message"]
