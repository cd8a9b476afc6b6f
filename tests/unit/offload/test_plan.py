"""The pure step logic of a weighted migration: schedules, verdicts, rollback, abort, promote and pause."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vk_provider.offload.plan import (
    DEFAULT_TO_HOME_STEPS,
    Action,
    Decision,
    Direction,
    Ending,
    MigrationState,
    Verdict,
    abort,
    begin,
    begin_from,
    next_step,
    pause,
    promote,
    resume,
    validate_steps,
    weight_schedule,
)

PROPERTY = settings(database=None, deadline=None, max_examples=300)

valid_steps = st.lists(st.integers(1, 99), unique=True, max_size=12).map(lambda xs: (*sorted(xs), 100))
directions = st.sampled_from(Direction)
verdicts = st.sampled_from(Verdict)
tolerances = st.integers(1, 5)
# A run is a sequence of controller inputs: verdicts, and now and then an operator command.
commands = st.one_of(
    verdicts,
    st.sampled_from(["pause", "resume", "abort", "promote"]),
)


def apply(state: MigrationState, command: Verdict | str) -> Decision:
    if isinstance(command, Verdict):
        return next_step(state, command)
    if command == "abort":
        return abort(state)
    if command == "promote":
        return promote(state)
    changed = pause(state) if command == "pause" else resume(state)
    return Decision(Action.HOLD, changed, command)


def run(state: MigrationState, inputs: Sequence[Verdict | str]) -> list[Decision]:
    decisions = []
    for command in inputs:
        decision = apply(state, command)
        decisions.append(decision)
        state = decision.state
    return decisions


def drive_to_the_end(state: MigrationState) -> MigrationState:
    """Resume and feed healthy verdicts until the migration ends (it must, within its schedule)."""
    state = resume(state)
    for _ in range(len(state.schedule) + 1):
        if state.ended:
            return state
        state = next_step(state, Verdict.HEALTHY).state
    raise AssertionError(f"the migration did not end: {state}")


def toward_target(direction: Direction, before: int, after: int) -> bool:
    return after >= before if direction is Direction.TO_AWAY else after <= before


def steps_are_valid(steps: Sequence[int]) -> bool:
    return (
        len(steps) > 0
        and all(1 <= step <= 100 for step in steps)
        and all(a < b for a, b in itertools.pairwise(steps))
        and steps[-1] == 100
    )


# Examples.


def test_the_default_schedules_walk_away_in_two_steps_and_home_in_five() -> None:
    assert weight_schedule(Direction.TO_AWAY, (50, 100)) == (0, 50, 100)
    assert weight_schedule(Direction.TO_HOME, (10, 25, 50, 75, 100)) == (100, 90, 75, 50, 25, 0)
    assert begin(Direction.TO_AWAY).schedule == (0, 50, 100)
    assert begin(Direction.TO_HOME).schedule == (100, 90, 75, 50, 25, 0)


def test_a_migration_starts_at_its_start_weight_which_counts_as_good() -> None:
    state = begin(Direction.TO_HOME)
    assert (state.step_index, state.weight, state.last_good_weight) == (0, 100, 100)
    assert state.consecutive_failures == 0
    assert not state.paused
    assert not state.ended


def test_healthy_checks_advance_step_by_step_and_finish_at_the_target() -> None:
    decisions = run(begin(Direction.TO_AWAY), [Verdict.HEALTHY] * 3)
    assert [(d.action, d.weight, d.state.step_index) for d in decisions] == [
        (Action.ADVANCE, 50, 1),
        (Action.ADVANCE, 100, 2),
        (Action.FINISH, 100, 2),
    ]
    assert decisions[-1].state.ending is Ending.SUCCEEDED
    assert decisions[-1].state.last_good_weight == 100


def test_the_tolerated_number_of_failures_rolls_back_to_the_last_good_weight() -> None:
    state = begin(Direction.TO_HOME, failures_before_rollback=3)
    state = run(state, [Verdict.HEALTHY, Verdict.HEALTHY])[-1].state
    assert (state.weight, state.last_good_weight) == (75, 90)
    decisions = run(state, [Verdict.UNHEALTHY] * 3)
    assert [d.action for d in decisions] == [Action.HOLD, Action.HOLD, Action.ROLL_BACK]
    assert [d.state.consecutive_failures for d in decisions] == [1, 2, 3]
    rolled_back = decisions[-1]
    assert rolled_back.weight == 90
    assert rolled_back.state.ending is Ending.ROLLED_BACK
    assert "rolled back to the last good away weight 90" in rolled_back.reason


def test_a_failure_on_the_first_step_rolls_back_to_the_start_weight() -> None:
    state = begin(Direction.TO_AWAY, failures_before_rollback=1)
    advanced = next_step(state, Verdict.HEALTHY)
    rolled_back = next_step(advanced.state, Verdict.UNHEALTHY)
    assert rolled_back.action is Action.ROLL_BACK
    assert rolled_back.weight == 0


def test_a_healthy_check_forgives_earlier_failures() -> None:
    state = begin(Direction.TO_AWAY, failures_before_rollback=2)
    decisions = run(state, [Verdict.UNHEALTHY, Verdict.HEALTHY, Verdict.UNHEALTHY])
    assert [d.action for d in decisions] == [Action.HOLD, Action.ADVANCE, Action.HOLD]
    assert decisions[-1].state.consecutive_failures == 1


def test_not_enough_data_holds_without_counting_or_forgiving_failures() -> None:
    state = begin(Direction.TO_AWAY, failures_before_rollback=2)
    decisions = run(state, [Verdict.UNHEALTHY, Verdict.NOT_ENOUGH_DATA, Verdict.NOT_ENOUGH_DATA])
    assert [d.action for d in decisions] == [Action.HOLD] * 3
    assert decisions[-1].state.consecutive_failures == 1
    assert next_step(decisions[-1].state, Verdict.UNHEALTHY).action is Action.ROLL_BACK


def test_a_paused_migration_holds_until_it_is_resumed() -> None:
    state = pause(begin(Direction.TO_AWAY))
    held = next_step(state, Verdict.HEALTHY)
    assert held.action is Action.HOLD
    assert held.state == state
    assert "paused" in held.reason
    assert next_step(resume(state), Verdict.HEALTHY).action is Action.ADVANCE


def test_abort_goes_back_to_the_start_weight_and_ends_the_migration() -> None:
    state = run(begin(Direction.TO_HOME), [Verdict.HEALTHY] * 3)[-1].state
    assert state.weight == 50
    aborted = abort(state)
    assert aborted.action is Action.ABORT
    assert (aborted.weight, aborted.state.step_index) == (100, 0)
    assert aborted.state.ending is Ending.ABORTED


def test_promote_skips_the_remaining_steps() -> None:
    promoted = promote(next_step(begin(Direction.TO_HOME), Verdict.HEALTHY).state)
    assert promoted.action is Action.FINISH
    assert (promoted.weight, promoted.state.step_index) == (0, 5)
    assert promoted.state.ending is Ending.SUCCEEDED


def test_an_ended_migration_keeps_answering_with_what_ended_it() -> None:
    rolled_back = run(begin(Direction.TO_AWAY, failures_before_rollback=1), [Verdict.UNHEALTHY])[-1]
    assert rolled_back.action is Action.ROLL_BACK
    for again in (
        next_step(rolled_back.state, Verdict.HEALTHY),
        abort(rolled_back.state),
        promote(rolled_back.state),
    ):
        assert again.action is Action.ROLL_BACK
        assert again.state == rolled_back.state
        assert "already ended (RolledBack)" in again.reason


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        pytest.param((), "must not be empty", id="empty"),
        pytest.param((50, 25, 100), "strictly increasing, but 50 is followed by 25", id="decreasing"),
        pytest.param((50, 50, 100), "strictly increasing, but 50 is followed by 50", id="repeated"),
        pytest.param((0, 100), "step 0 is outside 1..100", id="zero"),
        pytest.param((50, 101), "step 101 is outside 1..100", id="over-100"),
        pytest.param((25, 50), "the last step must be 100, not 50", id="last-not-100"),
        pytest.param((50, True), "whole numbers", id="not-a-number"),
    ],
)
def test_invalid_step_lists_are_refused_with_the_reason(steps: tuple[int, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_steps(steps)
    with pytest.raises(ValueError, match=message):
        weight_schedule(Direction.TO_HOME, steps)
    with pytest.raises(ValueError, match=message):
        begin(Direction.TO_AWAY, steps)


def test_a_state_that_points_outside_its_schedule_is_refused() -> None:
    state = begin(Direction.TO_AWAY)
    with pytest.raises(ValueError, match=r"step index 3 is outside 0\.\.2"):
        dataclasses.replace(state, step_index=3)
    with pytest.raises(ValueError, match=r"weight 101 is outside 0\.\.100"):
        dataclasses.replace(state, weight=101)
    with pytest.raises(ValueError, match="at least 1"):
        dataclasses.replace(state, failures_before_rollback=0)


# Properties.


@PROPERTY
@given(steps=st.lists(st.integers(-5, 110), max_size=8))
def test_a_step_list_is_accepted_exactly_when_it_is_increasing_within_1_to_100_and_ends_at_100(
    steps: list[int],
) -> None:
    if steps_are_valid(steps):
        assert validate_steps(steps) == tuple(steps)
    else:
        with pytest.raises(ValueError, match=r"."):
            validate_steps(steps)


@PROPERTY
@given(direction=directions, steps=valid_steps)
def test_a_schedule_runs_strictly_monotonically_from_the_start_weight_to_the_target(
    direction: Direction, steps: tuple[int, ...]
) -> None:
    schedule = weight_schedule(direction, steps)
    assert schedule[0] == direction.start_weight
    assert schedule[-1] == direction.target_weight
    assert len(schedule) == len(steps) + 1
    assert all(toward_target(direction, a, b) and a != b for a, b in itertools.pairwise(schedule))


@PROPERTY
@given(direction=directions, steps=valid_steps, tolerance=tolerances, inputs=st.lists(commands, max_size=60))
def test_weights_always_stay_within_0_to_100(
    direction: Direction, steps: tuple[int, ...], tolerance: int, inputs: list[Verdict | str]
) -> None:
    state = begin(direction, steps, failures_before_rollback=tolerance)
    for decision in run(state, inputs):
        assert 0 <= decision.weight <= 100
        assert 0 <= decision.state.last_good_weight <= 100
        assert decision.weight in decision.state.schedule


@PROPERTY
@given(direction=directions, steps=valid_steps, tolerance=tolerances, inputs=st.lists(verdicts, max_size=60))
def test_until_a_rollback_the_weight_only_moves_toward_the_target_one_step_at_a_time(
    direction: Direction, steps: tuple[int, ...], tolerance: int, inputs: list[Verdict]
) -> None:
    state = begin(direction, steps, failures_before_rollback=tolerance)
    for decision in run(state, inputs):
        if decision.action is Action.ROLL_BACK:
            break
        assert toward_target(direction, state.weight, decision.weight)
        assert decision.state.step_index - state.step_index in (0, 1)
        assert toward_target(direction, decision.state.last_good_weight, decision.weight)
        state = decision.state


@PROPERTY
@given(direction=directions, steps=valid_steps, tolerance=tolerances, inputs=st.lists(verdicts, max_size=60))
def test_a_rollback_comes_only_after_the_tolerated_number_of_consecutive_failures(
    direction: Direction, steps: tuple[int, ...], tolerance: int, inputs: list[Verdict]
) -> None:
    state = begin(direction, steps, failures_before_rollback=tolerance)
    consecutive = 0
    for verdict, decision in zip(inputs, run(state, inputs), strict=False):
        if decision.state.ended and verdict is not Verdict.UNHEALTHY:
            break
        if verdict is Verdict.HEALTHY:
            consecutive = 0
        elif verdict is Verdict.UNHEALTHY:
            consecutive += 1
        assert (decision.action is Action.ROLL_BACK) == (consecutive == tolerance)
        if decision.action is Action.ROLL_BACK:
            break


@PROPERTY
@given(direction=directions, steps=valid_steps, tolerance=tolerances, inputs=st.lists(commands, max_size=60))
def test_a_run_ends_at_the_target_the_start_or_the_last_good_weight(
    direction: Direction, steps: tuple[int, ...], tolerance: int, inputs: list[Verdict | str]
) -> None:
    state = begin(direction, steps, failures_before_rollback=tolerance)
    last_weight_that_passed = direction.start_weight
    for command in inputs:
        if state.ended:
            break
        if command is Verdict.HEALTHY and not state.paused:
            last_weight_that_passed = state.weight
        state = apply(state, command).state
    final = drive_to_the_end(state)
    if final.ending is Ending.SUCCEEDED:
        assert final.weight == direction.target_weight
    elif final.ending is Ending.ABORTED:
        assert final.weight == direction.start_weight
    else:
        assert final.ending is Ending.ROLLED_BACK
        assert final.weight == last_weight_that_passed
        assert final.weight != direction.target_weight


@PROPERTY
@given(direction=directions, steps=valid_steps, tolerance=tolerances, inputs=st.lists(verdicts, max_size=30))
def test_promote_reaches_the_target_in_one_decision_from_any_unfinished_state(
    direction: Direction, steps: tuple[int, ...], tolerance: int, inputs: list[Verdict]
) -> None:
    state = begin(direction, steps, failures_before_rollback=tolerance)
    for decision in run(state, inputs):
        if decision.state.ended:
            break
        state = decision.state
    promoted = promote(state)
    assert promoted.action is Action.FINISH
    assert promoted.weight == direction.target_weight
    assert promoted.state.ending is Ending.SUCCEEDED


@PROPERTY
@given(
    direction=directions,
    steps=valid_steps,
    tolerance=tolerances,
    before=st.lists(verdicts, max_size=20),
    while_paused=st.lists(verdicts, min_size=1, max_size=20),
)
def test_a_paused_migration_never_moves_the_weight(
    direction: Direction,
    steps: tuple[int, ...],
    tolerance: int,
    before: list[Verdict],
    while_paused: list[Verdict],
) -> None:
    state = begin(direction, steps, failures_before_rollback=tolerance)
    for decision in run(state, before):
        if decision.state.ended:
            break
        state = decision.state
    paused = pause(state)
    for decision in run(paused, while_paused):
        assert decision.action is Action.HOLD
        assert decision.state == paused


@PROPERTY
@given(direction=directions, steps=valid_steps, inputs=st.lists(verdicts, max_size=30))
def test_abort_returns_to_the_start_weight_from_any_unfinished_state(
    direction: Direction, steps: tuple[int, ...], inputs: list[Verdict]
) -> None:
    state = begin(direction, steps)
    for decision in run(state, inputs):
        if decision.state.ended:
            break
        state = decision.state
    aborted = abort(state)
    assert aborted.action is Action.ABORT
    assert aborted.weight == direction.start_weight
    assert aborted.state.ending is Ending.ABORTED


@PROPERTY
@given(directions, valid_steps, st.integers(0, 100), st.lists(verdicts, max_size=40))
def test_a_migration_begun_mid_way_never_swings_back_past_its_start(
    direction: Direction, steps: tuple[int, ...], weight: int, inputs: list[Verdict]
) -> None:
    """After a rollback left traffic split, a new migration moves on from there, never back first."""
    state = begin_from(direction, steps, weight)
    assert state.weight == weight
    distance_from_start = abs(weight - direction.start_weight)
    for decision in run(state, inputs):
        assert 0 <= decision.weight <= 100
        assert abs(decision.weight - direction.start_weight) >= distance_from_start
        if decision.action is Action.ADVANCE:
            assert decision.weight in state.schedule


@PROPERTY
@given(directions, valid_steps, st.integers(0, 100))
def test_a_migration_begun_mid_way_reaches_its_target_on_healthy_verdicts(
    direction: Direction, steps: tuple[int, ...], weight: int
) -> None:
    decisions = run(begin_from(direction, steps, weight), [Verdict.HEALTHY] * (len(steps) + 2))
    assert decisions[-1].action is Action.FINISH
    assert decisions[-1].weight == direction.target_weight


def test_begin_from_a_rolled_back_split_goes_on_from_there() -> None:
    state = begin_from(Direction.TO_HOME, DEFAULT_TO_HOME_STEPS, 50)
    assert (state.step_index, state.weight) == (3, 50)
    assert next_step(state, Verdict.HEALTHY).weight == 25
    between = begin_from(Direction.TO_AWAY, (50, 100), 30)
    assert (between.step_index, between.weight) == (0, 30)
    assert next_step(between, Verdict.HEALTHY).weight == 50
    with pytest.raises(ValueError, match=r"outside 0\.\.100"):
        begin_from(Direction.TO_AWAY, None, 101)


def test_a_severe_verdict_rolls_back_at_once_to_the_last_good_weight() -> None:
    state = dataclasses.replace(
        begin(Direction.TO_AWAY, (50, 100), failures_before_rollback=3), step_index=1, weight=50
    )
    decision = next_step(state, Verdict.SEVERE)
    assert decision.action is Action.ROLL_BACK
    assert decision.weight == 0
    assert decision.state.ending is Ending.ROLLED_BACK
    assert "severely" in decision.reason
