"""Whether the serving side is lost, from the routers' view, and the clock that measures for how long."""

from __future__ import annotations

from vk_provider.controller.routers import RouteView
from vk_provider.controller.serving import (
    NOT_SERVING_YET_REASON,
    LossClock,
    best_usable,
    has_served,
    needed_endpoints,
    other_side,
    routed,
    serving_side,
    worst_usable,
)


def view(home: int, away: int) -> RouteView:
    return RouteView("http://router", 100, {"home": home, "away": away})


def test_only_a_resting_weight_has_a_serving_side() -> None:
    assert (serving_side(0), serving_side(100), serving_side(50)) == ("home", "away", None)
    assert (other_side("home"), other_side("away")) == ("away", "home")


def test_at_least_one_endpoint_is_needed_and_the_share_rounds_up() -> None:
    assert needed_endpoints(4, 0) == 1  # the default: lost only when nothing is left
    assert needed_endpoints(4, 50) == 2
    assert needed_endpoints(3, 50) == 2
    assert needed_endpoints(0, 50) == 1


def test_the_best_router_decides_a_loss_and_the_worst_a_return() -> None:
    views = [view(0, 0), view(0, 2)]
    assert best_usable(views, "away") == 2  # one router still reaches them: not lost
    assert worst_usable(views, "away") == 0  # but not back everywhere either
    assert best_usable([], "away") == 0


def test_the_clock_counts_from_the_first_look_until_forgotten() -> None:
    now = [100.0]
    clock = LossClock(lambda: now[0])
    assert clock.held_for("ns/a") == 0
    now[0] = 112.5
    assert clock.held_for("ns/a") == 12.5
    assert clock.held_for("ns/b") == 0
    clock.forget("ns/a")
    assert clock.held_for("ns/a") == 0


def test_a_router_without_the_route_has_no_say() -> None:
    unrouted = RouteView("http://other", None, {"home": 0, "away": 0})
    assert routed([unrouted, view(1, 2)]) == [view(1, 2)]
    assert routed([unrouted]) == []


def test_only_a_side_seen_serving_can_be_lost() -> None:
    assert not has_served(None, migrated=False)  # a new Offload whose first pods are starting
    not_yet = {"type": "Degraded", "status": "False", "reason": NOT_SERVING_YET_REASON}
    assert not has_served(not_yet, migrated=False)
    for reason in ("Serving", "Recovered", "ServingSideLost", "PlacementChanged"):
        assert has_served({"type": "Degraded", "reason": reason}, migrated=False), reason
    assert has_served(None, migrated=True)  # a migration ended there: it waited for those endpoints
    assert has_served(not_yet, migrated=True)
