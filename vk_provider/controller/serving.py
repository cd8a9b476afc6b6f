"""Has the side that serves all of an Offload's traffic lost its endpoints? Asked of the routers.

Why the routers' view and not the pods' Ready condition: when a virtual node goes Unknown (its daemon
down, its workloads running fine at the provider), the node lifecycle controller marks every pod on
it Ready=False although the workloads still answer. The router keeps such endpoints on its own active
health checks, so traffic keeps flowing; an emergency migration triggered by Ready=False would move
traffic (and start paid or GPU-hungry replicas) for nothing. The routers' usable count is what the
traffic actually gets: it drops when the endpoints really stop answering (refused connections eject
them; failed active checks drop them), whatever the node's state. Pods going not Ready while the
workloads are really gone shows up there too, since the router drops endpoints it cannot use.

The side counts as lost only when no router has enough usable endpoints there (the best router's
count is below what is needed): one router with a private network problem does not move a service.
Pure, apart from `LossClock`, which remembers since when (in memory: after a restart the grace period
simply starts again, so a loss is acted on late, never early).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vk_provider.controller.routers import RouteView
from vk_provider.offload.plan import MAX_WEIGHT, MIN_WEIGHT


def serving_side(weight: int) -> str | None:
    """The side getting all the traffic, or None while traffic is split (the router falls back)."""
    return {MIN_WEIGHT: "home", MAX_WEIGHT: "away"}.get(weight)


NOT_SERVING_YET_REASON = "NotServingYet"
"""Degraded=False: the serving side has never been seen serving (a new Offload's first pods are still
starting), so it has not been lost either."""


def has_served(degraded: Mapping[str, Any] | None, *, migrated: bool) -> bool:
    """Whether the side serving all the traffic has been seen serving, so that losing it is a loss: a
    migration has ended there (it waited for that side's endpoints), or a look found it serving (the
    Degraded condition, set from then on, says so by any reason but `NOT_SERVING_YET_REASON`)."""
    seen = degraded is not None and degraded.get("reason") != NOT_SERVING_YET_REASON
    return seen or migrated


def other_side(side: str) -> str:
    return "home" if side == "away" else "away"


def needed_endpoints(desired: int, min_serving_percent: int) -> int:
    """Fewer usable endpoints than this and the side counts as lost (at least one is always needed)."""
    return max(1, math.ceil(desired * min_serving_percent / 100))


def routed(views: Sequence[RouteView]) -> list[RouteView]:
    """The views of routers that serve the route at all (one that does not has nothing to say)."""
    return [view for view in views if view.away_weight is not None]


def best_usable(views: Sequence[RouteView], side: str) -> int:
    return max((view.usable.get(side, 0) for view in views), default=0)


def worst_usable(views: Sequence[RouteView], side: str) -> int:
    return min((view.usable.get(side, 0) for view in views), default=0)


class LossClock:
    """Since when a condition (a side lost, a side back) has held, per Offload; forgotten on recovery."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._since: dict[str, float] = {}

    def held_for(self, key: str) -> float:
        """Seconds the condition has held for `key`, starting the clock at 0 now if it was not running."""
        now = self._monotonic()
        return now - self._since.setdefault(key, now)

    def forget(self, key: str) -> None:
        self._since.pop(key, None)
