"""Properties of the policy's decision over generated pools, Offloads, gangs and clocks."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.policy.fixtures import NOW, RESERVED, UNHEALTHY, policy
from vk_provider.policy.decide import Action, Reason, decide
from vk_provider.policy.model import Gang, History, NodeHealth, Observed, OffloadView, PoolNode
from vk_provider.policy.spec import PolicySpec

pytestmark = pytest.mark.unit

POLICY = policy(
    flip_out_after_seconds=30, flip_back_after_seconds=60, min_away_seconds=300, min_home_seconds=120
)
KEYS = st.sampled_from([RESERVED, UNHEALTHY, "other.example/taint"])
MOMENTS = st.integers(min_value=0, max_value=7200).map(lambda seconds: NOW - timedelta(seconds=seconds))


@st.composite
def nodes(draw: st.DrawFn, index: int) -> PoolNode:
    gpus = draw(st.integers(0, 8))
    taints = draw(st.frozensets(KEYS, max_size=3))
    healthy = draw(st.booleans())
    return PoolNode(
        name=f"n{index}",
        allocatable=gpus,
        used=draw(st.integers(0, gpus)),
        taints=taints,
        policy_taints=draw(st.frozensets(KEYS, max_size=3)),
        blocked=draw(st.booleans()),
        health=NodeHealth(
            healthy=healthy, counts=healthy and draw(st.booleans()), reason=None if healthy else "Xid"
        ),
    )


@st.composite
def offloads(draw: st.DrawFn, index: int) -> OffloadView:
    placement = draw(st.sampled_from(["home", "away"]))
    mine = draw(st.booleans())
    flips = tuple(sorted(draw(st.lists(MOMENTS, max_size=6)), reverse=True))
    gpus = draw(st.integers(0, 6))
    return OffloadView(
        namespace="ns",
        name=f"o{index}",
        placement=placement,
        phase=draw(st.sampled_from(["Idle", "Succeeded", "Shifting", "RolledBack"])),
        home_gpus=gpus,
        home_gpus_held=draw(st.integers(0, gpus)),
        order=draw(st.integers(0, 3)),
        auto=draw(st.booleans()),
        hold_until=draw(st.none() | MOMENTS.map(lambda moment: moment + timedelta(hours=1))),
        flipped_by="policy/training-first" if mine else draw(st.sampled_from([None, "person"])),
        policy_flips=flips if mine else (),
        last_change=flips[0] if mine and flips else draw(st.none() | MOMENTS),
    )


@st.composite
def states(draw: st.DrawFn) -> tuple[Observed, History]:
    count = draw(st.integers(0, 5))
    observed = Observed(
        gangs=tuple(
            Gang("Pods", "train", f"g{i}", gpus, draw(st.integers(0, gpus)))
            for i, gpus in enumerate(draw(st.lists(st.integers(0, 12), max_size=3)))
        ),
        nodes=tuple(draw(nodes(i)) for i in range(draw(st.integers(0, 4)))),
        offloads=tuple([draw(offloads(i)) for i in range(count)]),
    )
    history = History(
        shortfall_since={g.key: draw(MOMENTS) for g in observed.gangs if draw(st.booleans())},
        demand_since={g.key: draw(MOMENTS) for g in observed.gangs},
        demand_gone_since=draw(st.none() | MOMENTS),
    )
    return observed, history


def flipped(outcome_decisions: tuple[object, ...]) -> list[str]:
    return [
        key
        for decision in outcome_decisions
        if getattr(decision, "action", None) in (Action.FLIP_OUT, Action.FLIP_BACK)
        for key in decision.offloads  # type: ignore[attr-defined]
    ]


@settings(max_examples=150, deadline=None)
@given(states())
def test_never_flips_an_offload_already_at_max_flips_per_hour(state: tuple[Observed, History]) -> None:
    observed, history = state
    by_key = {offload.key: offload for offload in observed.offloads}
    for key in flipped(decide(NOW, POLICY, observed, history).decisions):
        assert by_key[key].flips_within_hour(NOW) < POLICY.timing.max_flips_per_hour


@settings(max_examples=150, deadline=None)
@given(states())
def test_never_flips_back_inside_min_away_seconds(state: tuple[Observed, History]) -> None:
    observed, history = state
    by_key = {offload.key: offload for offload in observed.offloads}
    for decision in decide(NOW, POLICY, observed, history).decisions:
        if decision.action is Action.FLIP_BACK:
            (key,) = decision.offloads
            last = max(by_key[key].policy_flips, default=None)
            assert last is None or NOW - last >= timedelta(seconds=POLICY.timing.min_away_seconds)


@settings(max_examples=150, deadline=None)
@given(states())
def test_never_untaints_what_it_did_not_taint(state: tuple[Observed, History]) -> None:
    observed, history = state
    by_name = {node.name: node for node in observed.nodes}
    for decision in decide(NOW, POLICY, observed, history).decisions:
        key = {Action.RELEASE: RESERVED, Action.UNTAINT_UNHEALTHY: UNHEALTHY}.get(decision.action)
        for name in decision.nodes if key else ():
            assert key in by_name[name].policy_taints


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 6), min_size=1, max_size=6),
    st.integers(1, 20),
    st.integers(0, 8),
)
def test_never_frees_fewer_gpus_than_the_shortfall_when_enough_offloads_exist(
    holdings: list[int], unplaced: int, free: int
) -> None:
    observed = Observed(
        gangs=(Gang("Pods", "train", "g", unplaced, unplaced),),
        nodes=(PoolNode("a", allocatable=free, used=0),),
        offloads=tuple(
            OffloadView("ns", f"o{i}", "home", phase="Idle", home_gpus=gpus, home_gpus_held=gpus)
            for i, gpus in enumerate(holdings)
        ),
    )
    history = History(shortfall_since={"Pods:train/g": NOW - timedelta(hours=1)})
    decisions = decide(NOW, POLICY, observed, history).decisions
    short = max(0, unplaced - free)
    moved = [d for d in decisions if d.action is Action.FLIP_OUT]
    if short == 0:
        assert not moved
    elif sum(holdings) >= short:
        (flip,) = moved
        assert flip.gpus >= short
        # ...and with as few Offloads as possible: no smaller count of the largest holdings covers it.
        fewest = next(
            k for k in range(1, len(holdings) + 1) if sum(sorted(holdings, reverse=True)[:k]) >= short
        )
        assert len(flip.offloads) == fewest
    else:
        assert not moved
        assert [d.reason for d in decisions if d.action is Action.SKIP] == [Reason.NO_CANDIDATE]


def run(policy_spec: PolicySpec, demand: list[bool], step_seconds: int) -> list[tuple[datetime, str]]:
    """Simulate the policy against one Offload whose migrations end at once, demand toggling per step;
    returns each flip's time and direction."""
    offload = OffloadView("ns", "s", "home", phase="Idle", home_gpus=4, home_gpus_held=4)
    history = History()
    flips: list[tuple[datetime, str]] = []
    for step, present in enumerate(demand):
        now = NOW + timedelta(seconds=step * step_seconds)
        gangs = (Gang("Pods", "t", "job", 4, 4 if offload.placement == "home" else 0),) if present else ()
        used = 4 if offload.placement == "home" else (4 if present else 0)
        observed = Observed(
            gangs=gangs, nodes=(PoolNode("a", allocatable=4, used=used),), offloads=(offload,)
        )
        outcome = decide(now, policy_spec, observed, history)
        history = outcome.history
        for decision in outcome.decisions:
            if decision.action in (Action.FLIP_OUT, Action.FLIP_BACK):
                placement = "away" if decision.action is Action.FLIP_OUT else "home"
                offload = dataclasses.replace(
                    offload,
                    placement=placement,
                    phase="Succeeded",
                    flipped_by="policy/training-first",
                    policy_flips=(*offload.policy_flips, now),
                    last_change=now,
                    home_gpus_held=4 if placement == "home" else 0,
                )
                flips.append((now, placement))
    return flips


@settings(max_examples=100, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=300), st.integers(1, 60))
def test_over_any_sequence_of_demand_no_hour_holds_more_than_max_flips(demand: list[bool], step: int) -> None:
    fast = policy(flip_out_after_seconds=0, flip_back_after_seconds=0, min_away_seconds=0, min_home_seconds=0)
    flips = run(fast, demand, step)
    for index, (moment, _) in enumerate(flips):
        within = [m for m, _ in flips[index:] if m - moment < timedelta(hours=1)]
        assert len(within) <= fast.timing.max_flips_per_hour
    away_at = None
    for moment, placement in flips:
        if placement == "away":
            away_at = moment
        elif away_at is not None:
            assert moment - away_at >= timedelta(seconds=fast.timing.min_away_seconds)


def test_a_job_created_and_deleted_every_5_s_for_2_minutes_flips_once() -> None:
    flips = run(POLICY, [(step // 1) % 2 == 0 for step in range(24)], 5)
    assert len(flips) <= 1
