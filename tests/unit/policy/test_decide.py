"""The policy's pure decision: tables for each rule, then properties over generated states."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from tests.unit.policy.fixtures import (
    LONG_AGO,
    NOW,
    RESERVED,
    UNHEALTHY,
    gang,
    mine,
    node,
    offload,
    policy,
    sick,
)
from vk_provider.policy.decide import Action, Decision, Reason, choose_fewest, decide
from vk_provider.policy.model import History, NodeHealth, Observed

pytestmark = pytest.mark.unit

PERSISTED = History(shortfall_since={"Pods:train/job": LONG_AGO}, demand_since={"Pods:train/job": LONG_AGO})
GONE = History(demand_gone_since=LONG_AGO)


def of(decisions: tuple[Decision, ...], action: Action) -> list[Decision]:
    return [decision for decision in decisions if decision.action is action]


def test_a_shortfall_persisting_flips_the_fewest_offloads_covering_it() -> None:
    observed = Observed(
        gangs=(gang("job", 2),),
        nodes=(node("a", used=4), node("b", used=4)),
        offloads=(offload("big", 4, order=0), offload("small", 2, order=1)),
    )
    outcome = decide(NOW, policy(), observed, PERSISTED)
    (flip,) = of(outcome.decisions, Action.FLIP_OUT)
    assert flip.offloads == ("ns/small",)
    assert flip.reason == Reason.GPU_PRESSURE
    (reserve,) = of(outcome.decisions, Action.RESERVE)
    assert reserve.nodes == ("a", "b")
    # The reservation comes before the flip: the actions are carried out in this order.
    assert outcome.decisions.index(reserve) < outcome.decisions.index(flip)


def test_one_offload_covers_before_two_smaller_ones_even_when_they_come_first() -> None:
    observed = Observed(
        gangs=(gang("job", 4),),
        nodes=(node("a", used=8, gpus=8),),
        offloads=(offload("a1", 2, order=0), offload("a2", 2, order=0), offload("b", 4, order=5)),
    )
    (flip,) = of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)
    assert flip.offloads == ("ns/b",)


def test_among_as_few_the_one_moving_the_fewest_gpus_beyond_the_shortfall() -> None:
    observed = Observed(
        gangs=(gang("job", 2),),
        nodes=(node("a", used=8, gpus=8),),
        offloads=(offload("four", 4, order=0), offload("three", 3, order=0), offload("two", 2, order=9)),
    )
    (flip,) = of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)
    assert flip.offloads == ("ns/two",)


def test_ties_go_to_the_lower_flip_order_then_the_name() -> None:
    observed = Observed(
        gangs=(gang("job", 2),),
        nodes=(node("a", used=4),),
        offloads=(offload("zeta", 2, order=1), offload("beta", 2, order=1), offload("alpha", 2, order=3)),
    )
    (flip,) = of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)
    assert flip.offloads == ("ns/beta",)


def test_a_fresh_shortfall_waits_for_flip_out_after_seconds() -> None:
    observed = Observed(gangs=(gang("job", 2),), nodes=(node("a", used=4),), offloads=(offload("s", 2),))
    first = decide(NOW, policy(), observed, History())
    assert not of(first.decisions, Action.FLIP_OUT)
    assert of(first.decisions, Action.DEMAND_DETECTED)
    later = decide(NOW + timedelta(seconds=29), policy(), observed, first.history)
    assert not of(later.decisions, Action.FLIP_OUT)
    due = decide(NOW + timedelta(seconds=30), policy(), observed, later.history)
    assert of(due.decisions, Action.FLIP_OUT)


def test_free_gpus_at_home_mean_no_shortfall() -> None:
    observed = Observed(gangs=(gang("job", 2),), nodes=(node("a", used=2),), offloads=(offload("s", 2),))
    assert not of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)


def test_gpus_an_offload_on_its_way_out_still_holds_count_as_freed() -> None:
    """What keeps a second flip (or a new leader) from moving another Offload for the same gang."""
    observed = Observed(
        gangs=(gang("job", 2),),
        nodes=(node("a", used=4),),
        offloads=(
            offload("leaving", 2, placement="away", phase="Shifting", home_gpus_held=2),
            offload("s", 2),
        ),
    )
    assert not of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)


def test_a_flip_out_that_rolled_back_frees_nothing_so_another_offload_moves() -> None:
    observed = Observed(
        gangs=(gang("job", 2),),
        nodes=(node("a", used=4),),
        offloads=(
            offload("rolled", 2, placement="away", phase="RolledBack", home_gpus_held=2),
            offload("s", 2),
        ),
    )
    (flip,) = of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)
    assert flip.offloads == ("ns/s",)


def test_unhealthy_gpus_are_not_free() -> None:
    observed = Observed(
        gangs=(gang("job", 2),),
        nodes=(node("a", used=4), node("b", used=0, health=sick())),
        offloads=(offload("s", 2),),
    )
    (flip,) = of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)
    assert flip.offloads == ("ns/s",)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"auto": False}, Reason.AUTO_OFF),
        ({"hold_until": NOW + timedelta(hours=1)}, Reason.MANUAL_HOLD),
        ({"hold_next_flip": True}, Reason.MANUAL_HOLD),
        ({"last_change": NOW - timedelta(seconds=10)}, Reason.DWELL),
        ({"policy_flips": tuple(NOW - timedelta(minutes=m) for m in (10, 20, 30, 40))}, Reason.RATE_LIMITED),
    ],
)
def test_an_offload_that_may_not_move_is_skipped_with_the_reason(
    fields: dict[str, Any], reason: Reason
) -> None:
    observed = Observed(
        gangs=(gang("job", 2),), nodes=(node("a", used=4),), offloads=(offload("s", 2, **fields),)
    )
    decisions = decide(NOW, policy(), observed, PERSISTED).decisions
    assert not of(decisions, Action.FLIP_OUT)
    assert not of(decisions, Action.RESERVE)
    skips = of(decisions, Action.SKIP)
    assert [(d.reason, d.offloads) for d in skips] == [(reason, ("ns/s",)), (Reason.NO_CANDIDATE, ())]


def test_an_expired_hold_is_no_hold() -> None:
    observed = Observed(
        gangs=(gang("job", 2),),
        nodes=(node("a", used=4),),
        offloads=(offload("s", 2, hold_until=NOW - timedelta(seconds=1)),),
    )
    assert of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)


def test_when_all_candidates_together_fall_short_nothing_moves() -> None:
    observed = Observed(gangs=(gang("job", 8),), nodes=(node("a", used=4),), offloads=(offload("s", 2),))
    decisions = decide(NOW, policy(), observed, PERSISTED).decisions
    assert not of(decisions, Action.FLIP_OUT)
    assert [d.reason for d in of(decisions, Action.SKIP)] == [Reason.NO_CANDIDATE]


def test_a_paused_policy_decides_nothing() -> None:
    observed = Observed(gangs=(gang("job", 2),), nodes=(node("a", used=4),), offloads=(offload("s", 2),))
    paused = dataclasses.replace(policy(), paused=True)
    assert decide(NOW, paused, observed, PERSISTED).decisions == ()


def test_flip_back_after_demand_is_gone_releases_then_brings_one_home() -> None:
    observed = Observed(
        nodes=(node("a", taints=frozenset({RESERVED}), policy_taints=frozenset({RESERVED})),),
        offloads=(
            offload("one", 2, placement="away", **mine()),
            offload("two", 2, placement="away", **mine()),
        ),
    )
    decisions = decide(NOW, policy(), observed, GONE).decisions
    assert [(d.action, d.nodes, d.offloads) for d in decisions] == [
        (Action.RELEASE, ("a",), ()),
        (Action.FLIP_BACK, (), ("ns/one",)),
    ]


def test_flip_back_waits_for_flip_back_after_seconds() -> None:
    observed = Observed(offloads=(offload("one", 2, placement="away", **mine()),), nodes=(node("a"),))
    first = decide(NOW, policy(), observed, History())
    assert first.history.demand_gone_since == NOW
    assert not of(first.decisions, Action.FLIP_BACK)
    later = decide(NOW + timedelta(seconds=599), policy(), observed, first.history)
    assert not of(later.decisions, Action.FLIP_BACK)
    assert of(
        decide(NOW + timedelta(seconds=600), policy(), observed, later.history).decisions, Action.FLIP_BACK
    )


def test_flip_back_waits_for_min_away_seconds_and_keeps_the_reservation() -> None:
    observed = Observed(
        nodes=(node("a", taints=frozenset({RESERVED}), policy_taints=frozenset({RESERVED})),),
        offloads=(offload("one", 2, placement="away", **mine(at=NOW - timedelta(seconds=100))),),
    )
    decisions = decide(NOW, policy(), observed, GONE).decisions
    assert [(d.action, d.reason) for d in decisions] == [(Action.DEFER, Reason.DWELL)]


def test_flip_back_one_at_a_time() -> None:
    observed = Observed(
        nodes=(node("a"),),
        offloads=(
            offload("one", 2, placement="home", phase="Shifting", **mine()),
            offload("two", 2, placement="away", **mine()),
        ),
    )
    decisions = decide(NOW, policy(), observed, GONE).decisions
    assert not of(decisions, Action.FLIP_BACK)
    assert [d.reason for d in of(decisions, Action.DEFER)] == [Reason.MIGRATING]


def test_flip_back_only_onto_enough_healthy_gpus() -> None:
    observed = Observed(
        nodes=(node("a", gpus=4), node("b", gpus=4, health=sick("Xid"))),
        offloads=(offload("big", 6, placement="away", **mine()),),
    )
    decisions = decide(NOW, policy(), observed, GONE).decisions
    assert not of(decisions, Action.FLIP_BACK)
    (defer,) = of(decisions, Action.DEFER)
    assert defer.reason == Reason.UNHEALTHY_CAPACITY
    assert "needs 6 healthy GPUs at home, 4 are free" in defer.message


def test_a_node_healthy_again_but_not_for_long_enough_does_not_count() -> None:
    settling = NodeHealth(healthy=True, counts=False, since=NOW)
    observed = Observed(
        nodes=(node("a", gpus=4, health=settling),), offloads=(offload("s", 2, placement="away", **mine()),)
    )
    assert not of(decide(NOW, policy(), observed, GONE).decisions, Action.FLIP_BACK)


def test_offloads_a_person_moved_away_are_not_brought_home() -> None:
    observed = Observed(
        nodes=(node("a"),),
        offloads=(offload("s", 2, placement="away", flipped_by="person", last_change=LONG_AGO),),
    )
    assert not of(decide(NOW, policy(), observed, GONE).decisions, Action.FLIP_BACK)


def test_demand_returning_during_a_flip_back_sends_it_away_again() -> None:
    observed = Observed(
        gangs=(gang("job", 4),),
        nodes=(node("a", used=4),),
        offloads=(offload("s", 4, placement="home", phase="Shifting", home_gpus_held=4, **mine()),),
    )
    decisions = decide(NOW, policy(), observed, History()).decisions
    (flip,) = of(decisions, Action.FLIP_OUT)
    assert (flip.reason, flip.offloads) == (Reason.DEMAND_RETURNED, ("ns/s",))
    assert of(decisions, Action.RESERVE)


def test_an_unhealthy_node_is_tainted_with_its_reason_and_untainted_only_by_us() -> None:
    observed = Observed(
        nodes=(
            node("hot", health=sick("Temperature")),
            node("mine", taints=frozenset({UNHEALTHY}), policy_taints=frozenset({UNHEALTHY})),
            node("theirs", taints=frozenset({UNHEALTHY})),
        )
    )
    decisions = decide(NOW, policy(), observed, History()).decisions
    assert [(d.action, d.reason, d.nodes) for d in decisions] == [
        (Action.TAINT_UNHEALTHY, "Temperature", ("hot",)),
        (Action.UNTAINT_UNHEALTHY, "Healthy", ("mine",)),
    ]


def test_the_policy_s_unhealthy_taint_follows_a_new_reason_but_someone_else_s_is_left() -> None:
    ours = node(
        "ours",
        taints=frozenset({UNHEALTHY}),
        taint_values={UNHEALTHY: "Temperature"},
        policy_taints=frozenset({UNHEALTHY}),
        health=sick("Xid"),
    )
    theirs = node("theirs", taints=frozenset({UNHEALTHY}), taint_values={UNHEALTHY: "x"}, health=sick("Xid"))
    decisions = decide(NOW, policy(), Observed(nodes=(ours, theirs)), History()).decisions
    assert [(d.action, d.reason, d.nodes) for d in decisions] == [(Action.TAINT_UNHEALTHY, "Xid", ("ours",))]


def test_a_reservation_someone_else_set_is_neither_claimed_nor_released() -> None:
    theirs = node("theirs", used=4, taints=frozenset({RESERVED}))
    observed = Observed(
        gangs=(gang("job", 2),), nodes=(theirs, node("a", used=4)), offloads=(offload("s", 2),)
    )
    (reserve,) = of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.RESERVE)
    assert reserve.nodes == ("a",)
    assert not of(decide(NOW, policy(), Observed(nodes=(theirs,)), GONE).decisions, Action.RELEASE)


def test_choose_fewest_is_none_when_everything_together_is_short() -> None:
    assert choose_fewest([offload("a", 1), offload("b", 1)], 3) is None


def test_home_pods_on_an_unhealthy_node_stay_when_healthy_gpus_can_replace_them() -> None:
    observed = Observed(
        nodes=(node("hot", used=2, taints=frozenset({UNHEALTHY}), health=sick()), node("fine", used=0)),
        offloads=(offload("chat", 2, home_gpus_unhealthy=2),),
    )
    decisions = decide(NOW, policy(), observed, History()).decisions
    assert not of(decisions, Action.FLIP_OUT)
    assert not of(decisions, Action.SKIP)


def test_home_pods_on_an_unhealthy_node_without_healthy_gpus_for_them_move_away_at_once() -> None:
    observed = Observed(
        nodes=(node("hot", used=2, taints=frozenset({UNHEALTHY}), health=sick()), node("full", used=4)),
        # Moved home a moment ago: no dwell time holds an evacuation from failing GPUs.
        offloads=(offload("chat", 2, home_gpus_unhealthy=2, last_change=NOW),),
    )
    (flip,) = of(decide(NOW, policy(), observed, GONE).decisions, Action.FLIP_OUT)
    assert (flip.offloads, flip.reason) == (("ns/chat",), Reason.UNHEALTHY_HOME)
    assert "2 GPUs of its home pods are on unhealthy nodes" in flip.message
    assert "lacks 2 of the 2" in flip.message


def test_healthy_gpus_a_service_already_holds_count_toward_its_replacement() -> None:
    # 4 replicas: 2 on the hot node, 2 already on a healthy node with 2 more free there.
    observed = Observed(
        nodes=(node("hot", used=2, taints=frozenset({UNHEALTHY}), health=sick()), node("fine", used=2)),
        offloads=(offload("chat", 4, home_gpus_unhealthy=2),),
    )
    assert not of(decide(NOW, policy(), observed, History()).decisions, Action.FLIP_OUT)


def test_a_person_s_hold_keeps_a_stranded_service_home_and_says_so() -> None:
    observed = Observed(
        nodes=(node("hot", used=2, taints=frozenset({UNHEALTHY}), health=sick()),),
        offloads=(offload("chat", 2, home_gpus_unhealthy=2, auto=False),),
    )
    decisions = decide(NOW, policy(), observed, History()).decisions
    assert not of(decisions, Action.FLIP_OUT)
    (skip,) = of(decisions, Action.SKIP)
    assert (skip.offloads, skip.reason) == (("ns/chat",), Reason.AUTO_OFF)


def test_a_move_home_onto_a_node_turning_unhealthy_goes_away_again_when_nothing_can_replace_it() -> None:
    observed = Observed(
        nodes=(node("hot", used=2, taints=frozenset({UNHEALTHY}), health=sick()),),
        offloads=(offload("chat", 2, home_gpus_unhealthy=2, phase="Shifting", **mine()),),
    )
    (flip,) = of(decide(NOW, policy(), observed, GONE).decisions, Action.FLIP_OUT)
    assert flip.reason == Reason.UNHEALTHY_HOME
    assert not of(decide(NOW, policy(), observed, GONE).decisions, Action.FLIP_BACK)


def test_free_gpus_of_a_pool_reserved_for_training_cannot_take_a_stranded_service() -> None:
    observed = Observed(
        nodes=(
            node("hot", used=2, taints=frozenset({UNHEALTHY}), health=sick()),
            node("reserved", used=0, taints=frozenset({RESERVED})),
        ),
        offloads=(offload("chat", 2, home_gpus_unhealthy=2),),
    )
    (flip,) = of(decide(NOW, policy(), observed, History()).decisions, Action.FLIP_OUT)
    assert flip.reason == Reason.UNHEALTHY_HOME
