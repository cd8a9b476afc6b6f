"""Early warm-up in the pure decision: each sign of foreseen demand warms what a flip would move."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from tests.unit.policy.fixtures import LONG_AGO, NOW, gang, node, offload, policy
from vk_provider.policy.decide import Action, Decision, Reason, choose_fewest, decide
from vk_provider.policy.model import Gang, History, Observed
from vk_provider.policy.schedule import ScheduledRun
from vk_provider.policy.spec import PolicySpec

pytestmark = pytest.mark.unit

FULL = (node("a", used=4), node("b", used=4))
OFFLOADS = (offload("big", 4, order=0), offload("small", 2, order=1), offload("tiny", 1, order=2))
JUST_NOW = History(shortfall_since={"Pods:train/job": NOW}, demand_since={"Pods:train/job": NOW})
PERSISTED = History(shortfall_since={"Pods:train/job": LONG_AGO}, demand_since={"Pods:train/job": LONG_AGO})


def of(decisions: tuple[Decision, ...], action: Action) -> list[Decision]:
    return [decision for decision in decisions if decision.action is action]


def warming(spec: PolicySpec | None = None, **warm_up: Any) -> PolicySpec:
    spec = spec or policy()
    return dataclasses.replace(spec, warm_up=dataclasses.replace(spec.warm_up, **warm_up))


def test_a_shortfall_not_yet_due_warms_what_the_flip_would_move() -> None:
    observed = Observed(gangs=(gang("job", 2),), nodes=FULL, offloads=OFFLOADS)
    outcome = decide(NOW, policy(), observed, History())
    assert not of(outcome.decisions, Action.FLIP_OUT)
    [warm] = of(outcome.decisions, Action.WARM)
    assert warm.reason == Reason.FORESEEN_DEMAND
    assert warm.offloads == ("ns/small",)  # what choose_fewest takes for 2 GPUs
    assert warm.gpus == 2
    assert "Pods train/job is short" in warm.message


def test_a_due_shortfall_flips_and_warms_nothing() -> None:
    observed = Observed(gangs=(gang("job", 2),), nodes=FULL, offloads=OFFLOADS)
    outcome = decide(NOW, policy(), observed, PERSISTED)
    assert [d.offloads for d in of(outcome.decisions, Action.FLIP_OUT)] == [("ns/small",)]
    assert not of(outcome.decisions, Action.WARM)


def test_a_queued_workload_warms_before_it_is_any_demand() -> None:
    queued = Gang("Workload", "train", "wl", 5, 0, foreseen_gpus=5)
    observed = Observed(nodes=(node("a", used=4), node("b", used=3)), offloads=OFFLOADS, foreseen=(queued,))
    outcome = decide(NOW, policy(), observed, History())
    [warm] = of(outcome.decisions, Action.WARM)
    assert warm.offloads == ("ns/big",)  # 5 foreseen, 1 free: 4 to free
    assert warm.gpus == 4
    assert outcome.history.demand_since == {}  # foreseen is not demand: no clock starts


def test_a_gang_not_yet_all_created_warms_for_the_members_to_come() -> None:
    forming = Gang("Pods", "train", "job", 2, 0, foreseen_gpus=6)  # 2 pods pending untried, 6 GPUs to come
    observed = Observed(gangs=(forming,), nodes=(node("a", used=2), node("b", used=4)), offloads=OFFLOADS)
    [warm] = of(decide(NOW, policy(), observed, History()).decisions, Action.WARM)
    assert warm.offloads == ("ns/big",)
    assert warm.gpus == 4


def test_an_open_schedule_window_warms_with_reason_scheduled() -> None:
    spec = warming(schedule=(ScheduledRun(cron="5 12 * * *", gpus=3),))  # NOW is 12:00, lead 600 s
    observed = Observed(nodes=FULL, offloads=OFFLOADS)
    [warm] = of(decide(NOW, spec, observed, History()).decisions, Action.WARM)
    assert warm.reason == Reason.SCHEDULED
    assert warm.offloads == ("ns/big",)  # one Offload: the fewest covering 3
    assert "5 12 * * *" in warm.message
    closed = NOW - timedelta(hours=1)
    assert not of(decide(closed, spec, observed, History()).decisions, Action.WARM)


def test_free_home_gpus_covering_the_foreseen_demand_warm_nothing() -> None:
    queued = Gang("Workload", "train", "wl", 4, 0, foreseen_gpus=4)
    observed = Observed(nodes=(node("a", used=0), node("b", used=4)), offloads=OFFLOADS, foreseen=(queued,))
    assert not of(decide(NOW, policy(), observed, History()).decisions, Action.WARM)


def test_warm_up_disabled_or_a_paused_policy_warms_nothing() -> None:
    observed = Observed(gangs=(gang("job", 2),), nodes=FULL, offloads=OFFLOADS)
    assert not of(decide(NOW, warming(enabled=False), observed, History()).decisions, Action.WARM)
    paused = dataclasses.replace(policy(), paused=True)
    assert not decide(NOW, paused, observed, History()).decisions


@pytest.mark.parametrize(
    ("left", "rewritten"),
    [
        (None, True),
        (timedelta(seconds=-1), True),  # expired
        (timedelta(seconds=299), True),  # less than half of the 600 s hold left
        (timedelta(seconds=300), False),
        (timedelta(seconds=599), False),
    ],
)
def test_a_warm_up_is_rewritten_only_once_less_than_half_its_hold_is_left(
    left: timedelta | None, rewritten: bool
) -> None:
    until = None if left is None else NOW + left
    offloads = (offload("small", 2, warm_until=until, warmed_by="policy/training-first"),)
    observed = Observed(gangs=(gang("job", 2),), nodes=FULL, offloads=offloads)
    warms = of(decide(NOW, policy(), observed, JUST_NOW).decisions, Action.WARM)
    assert bool(warms) is rewritten


def test_the_warm_up_chooses_as_the_flip_does_among_the_same_candidates() -> None:
    held = offload("held", 4, order=0, hold_until=NOW + timedelta(hours=1))
    off = offload("off", 4, order=0, auto=False)
    dwelling = offload("dwelling", 4, order=0, last_change=NOW - timedelta(seconds=10))
    moving = offload("moving", 4, order=0, phase="Shifting")
    offloads = (held, off, dwelling, moving, *OFFLOADS)
    observed = Observed(gangs=(gang("job", 3),), nodes=FULL, offloads=offloads)
    [warm] = of(decide(NOW, policy(), observed, JUST_NOW).decisions, Action.WARM)
    [flip] = of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)
    expected = choose_fewest(list(OFFLOADS), 3)
    assert expected is not None
    assert warm.offloads == flip.offloads == tuple(o.key for o in expected) == ("ns/big",)


def test_no_warm_up_when_no_candidates_could_cover_the_foreseen_shortfall() -> None:
    observed = Observed(gangs=(gang("job", 20),), nodes=FULL, offloads=OFFLOADS)
    assert not of(decide(NOW, policy(), observed, JUST_NOW).decisions, Action.WARM)


def test_a_due_gang_takes_the_free_gpus_before_the_foreseen_demand_counts_them() -> None:
    queued = Gang("Workload", "train", "wl", 2, 0, foreseen_gpus=2)
    due = gang("job", 3)  # 2 free: short 1, due: the flip takes small (2)
    observed = Observed(
        gangs=(due,), nodes=(node("a", used=2), node("b", used=4)), offloads=OFFLOADS, foreseen=(queued,)
    )
    outcome = decide(NOW, policy(), observed, PERSISTED)
    assert of(outcome.decisions, Action.FLIP_OUT)
    assert not of(outcome.decisions, Action.WARM)  # a flipping pass warms nothing
    # Next pass, the flip under way: small releases 2, which the due gang takes; the queued 2 are short.
    leaving = offload("small", 2, placement="away", phase="Preparing", home_gpus_held=2)
    after = dataclasses.replace(observed, offloads=(OFFLOADS[0], leaving, OFFLOADS[2]))
    [warm] = of(decide(NOW, policy(), after, PERSISTED).decisions, Action.WARM)
    assert warm.gpus == 1  # 3 unplaced + 2 queued, 2 free + 2 being freed
    assert warm.offloads == ("ns/tiny",)


def test_a_flip_prefers_the_offloads_kept_warm_when_they_cover_the_shortfall() -> None:
    warm = NOW + timedelta(minutes=5)
    offloads = (offload("big", 4, order=0, warm_until=warm), offload("small", 2, order=1))
    observed = Observed(gangs=(gang("job", 2),), nodes=FULL, offloads=offloads)
    [flip] = of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)
    assert flip.offloads == ("ns/big",)  # cold small would fit better, but waits for a cold start
    expired = (offload("big", 4, order=0, warm_until=NOW - timedelta(seconds=1)), offloads[1])
    observed = dataclasses.replace(observed, offloads=expired)
    [flip] = of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)
    assert flip.offloads == ("ns/small",)
    too_small = (offload("tiny", 1, warm_until=warm), offload("small", 2, order=1))
    observed = dataclasses.replace(observed, offloads=too_small)
    [flip] = of(decide(NOW, policy(), observed, PERSISTED).decisions, Action.FLIP_OUT)
    assert flip.offloads == ("ns/small",)  # the warm ones alone do not cover it: chosen among all


def test_a_warm_up_already_covering_the_foreseen_shortfall_is_kept_not_doubled() -> None:
    early = NOW + timedelta(seconds=100)  # less than half the hold left: due for a refresh
    offloads = (offload("big", 4, order=0, warm_until=early), offload("small", 2, order=1))
    observed = Observed(gangs=(gang("job", 2),), nodes=FULL, offloads=offloads)
    [warm] = of(decide(NOW, policy(), observed, JUST_NOW).decisions, Action.WARM)
    assert warm.offloads == ("ns/big",)  # refreshed; small is not warmed as well
