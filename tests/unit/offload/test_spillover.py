"""Spill-over: where a total of replicas runs, the capacity split, and the spec that asks for it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.offload.test_spec import MINIMAL
from vk_provider.offload.spec import InvalidSpec, parse_offload
from vk_provider.offload.spillover import (
    SpillOver,
    SpillStep,
    Split,
    capacity_weight,
    home_shortfall,
    next_weight,
    spill_step,
    split_replicas,
)

TWO_HOME = SpillOver(max_home_replicas=2, max_away_replicas=6)


@pytest.mark.parametrize(
    ("total", "split"),
    [
        (0, Split(0, 0)),
        (1, Split(1, 0)),
        (2, Split(2, 0)),
        (3, Split(2, 1)),
        (8, Split(2, 6)),
        (20, Split(2, 6)),  # the spec refuses more; a stale count never starts more than the maximum
    ],
)
def test_home_fills_first_and_the_overflow_goes_away(total: int, split: Split) -> None:
    assert split_replicas(total, TWO_HOME) == split


def test_scaling_down_removes_away_replicas_first() -> None:
    totals = range(8, -1, -1)
    aways = [split_replicas(total, TWO_HOME).away for total in totals]
    homes = [split_replicas(total, TWO_HOME).home for total in totals]
    assert aways == [6, 5, 4, 3, 2, 1, 0, 0, 0]
    assert homes == [2, 2, 2, 2, 2, 2, 2, 1, 0]


def test_min_away_replicas_stay_warm() -> None:
    warm = SpillOver(max_home_replicas=2, min_away_replicas=1, max_away_replicas=3)
    assert split_replicas(1, warm) == Split(1, 1)
    assert split_replicas(4, warm) == Split(2, 2)


@pytest.mark.parametrize(
    ("home", "away", "factors", "weight"),
    [
        (2, 0, (1.0, 1.0), 0),
        (0, 3, (1.0, 1.0), 100),
        (0, 0, (1.0, 1.0), 0),
        (2, 2, (1.0, 1.0), 50),
        (2, 1, (1.0, 1.0), 33),
        (2, 6, (1.0, 1.0), 75),
        (2, 2, (1.0, 0.5), 33),  # away GPUs half as fast: half the share per replica
        (2, 2, (1.0, 3.0), 75),
        (1000, 1, (1.0, 1.0), 1),  # a ready side is never rounded away
        (1, 1000, (1.0, 1.0), 99),
    ],
)
def test_the_split_follows_ready_capacity(
    home: int, away: int, factors: tuple[float, float], weight: int
) -> None:
    spill = SpillOver(max_home_replicas=2, home_weight_factor=factors[0], away_weight_factor=factors[1])
    assert capacity_weight(home, away, spill) == weight


def test_the_weight_moves_in_bounded_changes() -> None:
    assert next_weight(0, 75) == 25
    assert next_weight(25, 75) == 50
    assert next_weight(60, 75) == 75
    assert next_weight(75, 0) == 50
    assert next_weight(40, 40) == 40


def spill_offload(**spec: Any) -> dict[str, Any]:
    offload = copy.deepcopy(MINIMAL)
    offload["spec"].update(spec)
    return offload


def test_the_spec_reads_spill_over_with_its_defaults() -> None:
    spec = parse_offload(spill_offload(spillOver={"maxHomeReplicas": 2}))
    assert spec.spill_over == SpillOver(max_home_replicas=2)
    assert (spec.replicas, spec.total_replicas) == (None, 2)
    spec = parse_offload(spill_offload(replicas=5, spillOver={"maxHomeReplicas": 2, "awayWeightFactor": 0.5}))
    assert (spec.total_replicas, spec.spill_over.away_weight_factor if spec.spill_over else None) == (5, 0.5)
    assert parse_offload(MINIMAL).spill_over is None
    assert parse_offload(MINIMAL).total_replicas == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"replicas": 3}, "spec.replicas scales a spill-over Offload: set spec.spillOver"),
        (
            {"replicas": 9, "spillOver": {"maxHomeReplicas": 2, "maxAwayReplicas": 6}},
            r"spec.replicas 9 is above what the Offload may run: 2 home \(maxHomeReplicas\) \+ 6 away",
        ),
        ({"spillOver": {}}, "spec.spillOver.maxHomeReplicas is required"),
        (
            {"spillOver": {"maxHomeReplicas": 2, "awayWeightFactor": -1}},
            "spec.spillOver.awayWeightFactor must be a number above 0 and at most 100, not -1",
        ),
        (
            {"spillOver": {"maxHomeReplicas": 2, "homeWeightFactor": 0}},
            "spec.spillOver.homeWeightFactor must be a number above 0",
        ),
        (
            {"spillOver": {"maxHomeReplicas": 2, "minAwayReplicas": 4, "maxAwayReplicas": 3}},
            "minAwayReplicas 4 is above maxAwayReplicas 3",
        ),
        ({"spillOver": {"maxHomeReplicas": -1}}, r"maxHomeReplicas -1 is outside 0..1000"),
    ],
)
def test_bad_spill_over_specs_say_which_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        parse_offload(spill_offload(**spec))


def step(**given: Any) -> SpillStep:
    values: dict[str, Any] = {
        "split": Split(2, 0),
        "spill": TWO_HOME,
        "away_replicas": 0,
        "weight": 0,
        "home_usable": 2,
        "away_usable": 0,
        "routers_agree": True,
    }
    values.update(given)
    return spill_step(**values)


def test_overflow_replicas_start_at_once_and_get_traffic_once_usable() -> None:
    started = step(split=Split(2, 2))
    assert (started.away_replicas, started.weight, started.settled) == (2, 0, False)
    one_ready = step(split=Split(2, 2), away_replicas=2, away_usable=1)
    assert (one_ready.capacity_weight, one_ready.weight) == (33, 25)  # at most 25 points a change
    both = step(split=Split(2, 2), away_replicas=2, away_usable=2, weight=25)
    assert (both.capacity_weight, both.weight, both.settled) == (50, 50, False)
    assert step(split=Split(2, 2), away_replicas=2, away_usable=2, weight=50).settled


def test_the_weight_waits_for_every_router() -> None:
    waiting = step(split=Split(2, 2), away_replicas=2, away_usable=2, weight=25, routers_agree=False)
    assert (waiting.weight, waiting.settled) == (25, False)


def test_a_scale_down_lowers_the_weight_before_it_removes_replicas() -> None:
    # 2 home + 2 away at 50; the autoscaler asks for 3: the split is 2 + 1, worth 33.
    lowered = step(split=Split(2, 1), away_replicas=2, away_usable=2, weight=50)
    assert (lowered.weight, lowered.away_replicas) == (33, 2)
    unapplied = step(split=Split(2, 1), away_replicas=2, away_usable=2, weight=33, routers_agree=False)
    assert unapplied.away_replicas == 2  # not every router applies 33 yet
    removed = step(split=Split(2, 1), away_replicas=2, away_usable=2, weight=33)
    assert (removed.weight, removed.away_replicas) == (33, 1)


def test_losing_the_home_side_sends_everything_away_in_steps() -> None:
    lost = step(split=Split(2, 2), away_replicas=2, away_usable=2, home_usable=0, weight=50)
    assert (lost.capacity_weight, lost.weight) == (100, 75)


def test_home_replicas_the_scheduler_cannot_place_are_covered_away_until_home_is_ready_again() -> None:
    # 4 wanted, home holds 2, but one home pod waits for a GPU: 3 run away meanwhile.
    short = home_shortfall(unschedulable=1, home_wanted=2, home_ready=1, away_extra=0)
    assert split_replicas(4, TWO_HOME, home_short=short) == Split(2, 3)
    # Scheduled now, not ready yet: the extra away replica stays (make before break).
    assert home_shortfall(unschedulable=0, home_wanted=2, home_ready=1, away_extra=1) == 1
    # Ready: the extra goes.
    assert home_shortfall(unschedulable=0, home_wanted=2, home_ready=2, away_extra=1) == 0
    # Never more than the home replicas, never beyond maxAwayReplicas.
    assert split_replicas(2, TWO_HOME, home_short=5) == Split(2, 2)
    assert split_replicas(8, TWO_HOME, home_short=2) == Split(2, 6)
