"""Spill-over: the service stays home as far as the home GPUs hold it, the rest of its replicas run away,
and traffic is split by serving capacity. Pure, no I/O.

An Offload with `spec.spillOver` is scaled by its total replica count (`spec.replicas`, which the
`scale` subresource and so any HorizontalPodAutoscaler writes). `split_replicas` places that count:
home first, up to `maxHomeReplicas`; the rest away, between `minAwayReplicas` and `maxAwayReplicas`. On
the way down the away share shrinks first, since it is what costs money. A home replica the scheduler
cannot place (its GPUs are taken) is covered by one more away until a home one is ready again.

`capacity_weight` is the share of requests the away side gets: each ready replica serves in proportion
to its side's weight factor (a provider's GPU may be faster or slower than ours). The counts it is given
are the endpoints every router can use, so a replica still starting gets nothing. `next_weight` moves
the applied weight toward that share by at most `MAX_WEIGHT_CHANGE` points at a time, so a burst of
replicas becoming ready (or leaving) shifts traffic in steps the routers apply one after another.
"""

from __future__ import annotations

import dataclasses

from vk_provider.offload.plan import MAX_WEIGHT, MIN_WEIGHT

MAX_WEIGHT_CHANGE = 25
"""The most points the away weight moves in one change while spilling over."""


@dataclasses.dataclass(frozen=True)
class SpillOver:
    """`spec.spillOver`: how many replicas the home GPUs hold, and what the away side may run."""

    max_home_replicas: int
    min_away_replicas: int = 0
    max_away_replicas: int = 100
    home_weight_factor: float = 1.0
    away_weight_factor: float = 1.0
    """What one ready replica of each side serves, relative to the other (only the ratio counts)."""

    @property
    def max_replicas(self) -> int:
        """The most replicas the Offload can run at once: a larger `spec.replicas` is refused."""
        return self.max_home_replicas + self.max_away_replicas


@dataclasses.dataclass(frozen=True)
class Split:
    """Replicas wanted on each side."""

    home: int
    away: int

    @property
    def total(self) -> int:
        return self.home + self.away


def split_replicas(total: int, spill: SpillOver, *, home_short: int = 0) -> Split:
    """Place `total` replicas: home first, the overflow away within its bounds. `home_short` home
    replicas cannot run at home now (`home_shortfall`): as many more run away meanwhile."""
    home = min(max(total, 0), spill.max_home_replicas)
    overflow = total - home + min(max(home_short, 0), home)
    away = min(max(overflow, spill.min_away_replicas), spill.max_away_replicas)
    return Split(home=home, away=away)


def home_shortfall(*, unschedulable: int, home_wanted: int, home_ready: int, away_extra: int) -> int:
    """Home replicas to cover away: those the scheduler cannot place at home (their GPUs are taken),
    and, make before break, those already covered (`away_extra`, the away replicas beyond the split
    without a shortfall) until as many home replicas are ready again."""
    still_short = min(max(away_extra, 0), max(home_wanted - home_ready, 0))
    return max(unschedulable, still_short)


def capacity_weight(home_ready: int, away_ready: int, spill: SpillOver) -> int:
    """The away side's share of serving capacity, in percent; a side with no ready replica gets 0.

    A split never rounds a side that has ready replicas down to nothing (or up to everything): 1..99.
    With neither side ready the answer is 0, home, where a service without replicas anywhere waits.
    """
    home = max(home_ready, 0) * spill.home_weight_factor
    away = max(away_ready, 0) * spill.away_weight_factor
    if away <= 0:
        return MIN_WEIGHT
    if home <= 0:
        return MAX_WEIGHT
    share = round(MAX_WEIGHT * away / (home + away))
    return min(max(share, MIN_WEIGHT + 1), MAX_WEIGHT - 1)


def next_weight(current: int, wanted: int, *, max_change: int = MAX_WEIGHT_CHANGE) -> int:
    """The weight to apply next on the way from `current` to `wanted`."""
    if wanted > current:
        return min(wanted, current + max_change)
    return max(wanted, current - max_change)


@dataclasses.dataclass(frozen=True)
class SpillStep:
    """What one pass of a spilling-over Offload does: the away replicas to run and the weight to apply."""

    away_replicas: int
    weight: int
    capacity_weight: int
    """The share the weight is moving toward (what the ready replicas, within the split, can serve)."""
    settled: bool
    """Nothing is moving: the replicas are what the split wants and the weight is the capacity share."""


def spill_step(
    *,
    split: Split,
    spill: SpillOver,
    away_replicas: int,
    weight: int,
    home_usable: int,
    away_usable: int,
    routers_agree: bool,
) -> SpillStep:
    """Decide one pass. The counts of usable endpoints are those every router has.

    More away replicas are started at once (they get traffic only once the routers can use them). Fewer
    are removed only after the weight is down to what the remaining ones carry and every router applies
    it, so a replica about to go is carrying less by then. The weight moves only while every router
    applies the current one: a change waits for the last.
    """
    serving_away = min(away_usable, split.away)
    wanted = capacity_weight(home_usable, serving_away, spill)
    target_away = away_replicas
    if split.away > away_replicas or (split.away < away_replicas and routers_agree and weight <= wanted):
        target_away = split.away
    next_applied = next_weight(weight, wanted) if routers_agree else weight
    settled = (
        routers_agree and next_applied == weight == wanted and target_away == away_replicas == split.away
    )
    return SpillStep(away_replicas=target_away, weight=next_applied, capacity_weight=wanted, settled=settled)
