"""The pure step logic of a weighted migration: which away weight comes next, when to hold, when to roll back.

Model
-----
A weight is the percentage of an Offload's requests the router sends AWAY (0 = all home, 100 = all
away). A migration has a direction, toward away or toward home, and a list of steps as written in the
Offload's strategy: each 1..100, strictly increasing, ending at 100 (the CRD enforces the same rule).
Steps count the share of traffic on the side being moved TO, so

* toward away, steps ``(50, 100)`` visit the away weights ``0 -> 50 -> 100``;
* toward home, steps ``(10, 25, 50, 75, 100)`` visit ``100 -> 90 -> 75 -> 50 -> 25 -> 0``.

`weight_schedule` returns that list of weights, start weight first; a `MigrationState` points into it
with its step index (0 = the start weight, still all on the old side, which counts as known good).

The controller is level-based: after each step's interval it asks the router's metrics for a `Verdict`
on the weight currently applied and calls `next_step(state, verdict)`, which returns a `Decision`, an
`Action` and the new state, without side effects:

* ``HEALTHY``: the weight becomes the last good weight and the failure count resets; the decision is
  ADVANCE to the next weight, or FINISH when the target weight has just passed its check.
* ``UNHEALTHY``: one more consecutive failure; HOLD while fewer than `failures_before_rollback`, then
  ROLL_BACK to the last good weight, which ends the migration.
* ``SEVERE``: the receiving side fails so badly (see the severe gate) that waiting for more
  failures only costs requests: ROLL_BACK to the last good weight at once.
* ``NOT_ENOUGH_DATA``: HOLD; the failure count neither grows nor resets.
* a paused state always HOLDs and never moves the weight.

`abort` ends the migration at the start weight (the starting placement), and `promote` ends it at the
target weight in one decision. A migration that has ended (`state.ending` is set) keeps answering with
the action that ended it, so calling any of these again is harmless.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

MIN_WEIGHT = 0
MAX_WEIGHT = 100
DEFAULT_TO_AWAY_STEPS: tuple[int, ...] = (50, 100)
DEFAULT_TO_HOME_STEPS: tuple[int, ...] = (10, 25, 50, 75, 100)
DEFAULT_FAILURES_BEFORE_ROLLBACK = 3


class Direction(enum.Enum):
    """Where a migration is going; the value is the Offload placement it ends in."""

    TO_AWAY = "away"
    TO_HOME = "home"

    @property
    def start_weight(self) -> int:
        return MIN_WEIGHT if self is Direction.TO_AWAY else MAX_WEIGHT

    @property
    def target_weight(self) -> int:
        return MAX_WEIGHT if self is Direction.TO_AWAY else MIN_WEIGHT


class Verdict(enum.Enum):
    """The health gates' result for the weight applied during one step's interval."""

    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"
    SEVERE = "Severe"
    """Failing far beyond the tolerant gates: no further failure is tolerated."""
    NOT_ENOUGH_DATA = "NotEnoughData"


class Action(enum.Enum):
    """What the controller should do with the weight."""

    ADVANCE = "Advance"
    """Apply the next weight of the schedule."""
    HOLD = "Hold"
    """Keep the current weight (paused, not enough data, or a failure below the tolerance)."""
    ROLL_BACK = "RollBack"
    """Go back to the last good weight; the migration is over."""
    ABORT = "Abort"
    """Go back to the start weight; the migration is over."""
    FINISH = "Finish"
    """The target weight is applied and good; the migration is over."""


class Ending(enum.Enum):
    """How a migration ended."""

    SUCCEEDED = "Succeeded"
    ROLLED_BACK = "RolledBack"
    ABORTED = "Aborted"


ACTION_OF_ENDING = {
    Ending.SUCCEEDED: Action.FINISH,
    Ending.ROLLED_BACK: Action.ROLL_BACK,
    Ending.ABORTED: Action.ABORT,
}


def validate_steps(steps: Sequence[int]) -> tuple[int, ...]:
    """Return the steps as a tuple, or raise ValueError saying why they are not 1..100, increasing, to 100."""
    if not steps:
        raise ValueError("steps must not be empty; the last step must be 100")
    for step in steps:
        if isinstance(step, bool) or not isinstance(step, int):
            raise ValueError(f"steps must be whole numbers, got {step!r}")
        if not MIN_WEIGHT < step <= MAX_WEIGHT:
            raise ValueError(f"step {step} is outside 1..100")
    for earlier, later in itertools.pairwise(steps):
        if later <= earlier:
            raise ValueError(f"steps must be strictly increasing, but {earlier} is followed by {later}")
    if steps[-1] != MAX_WEIGHT:
        raise ValueError(f"the last step must be 100, not {steps[-1]}")
    return tuple(steps)


def weight_schedule(direction: Direction, steps: Sequence[int]) -> tuple[int, ...]:
    """The away weights a migration visits, from its start weight to its target weight."""
    valid = validate_steps(steps)
    if direction is Direction.TO_AWAY:
        return (MIN_WEIGHT, *valid)
    return (MAX_WEIGHT, *(MAX_WEIGHT - step for step in valid))


@dataclass(frozen=True)
class MigrationState:
    """Where a migration stands; everything `next_step` needs, and nothing it has to look up."""

    direction: Direction
    steps: tuple[int, ...]
    step_index: int
    """Index into `schedule` of the weight currently applied (0 = the start weight)."""
    weight: int
    """The away weight currently applied (after a rollback: the last good weight)."""
    last_good_weight: int
    consecutive_failures: int = 0
    failures_before_rollback: int = DEFAULT_FAILURES_BEFORE_ROLLBACK
    paused: bool = False
    ending: Ending | None = None

    def __post_init__(self) -> None:
        schedule = weight_schedule(self.direction, self.steps)
        if not 0 <= self.step_index < len(schedule):
            raise ValueError(f"step index {self.step_index} is outside 0..{len(schedule) - 1}")
        for name, value in (("weight", self.weight), ("last good weight", self.last_good_weight)):
            if not MIN_WEIGHT <= value <= MAX_WEIGHT:
                raise ValueError(f"{name} {value} is outside 0..100")
        if self.failures_before_rollback < 1:
            raise ValueError(
                f"failures before rollback must be at least 1, not {self.failures_before_rollback}"
            )
        if self.consecutive_failures < 0:
            raise ValueError(f"consecutive failures cannot be negative ({self.consecutive_failures})")

    @property
    def schedule(self) -> tuple[int, ...]:
        return weight_schedule(self.direction, self.steps)

    @property
    def start_weight(self) -> int:
        return self.direction.start_weight

    @property
    def target_weight(self) -> int:
        return self.direction.target_weight

    @property
    def ended(self) -> bool:
        return self.ending is not None


@dataclass(frozen=True)
class Decision:
    """The outcome of one evaluation: what to do, the state to record, and why (for conditions and Events)."""

    action: Action
    state: MigrationState
    reason: str

    @property
    def weight(self) -> int:
        """The away weight to apply."""
        return self.state.weight

    @property
    def moves_weight(self) -> bool:
        return self.action is not Action.HOLD


def begin(
    direction: Direction,
    steps: Sequence[int] | None = None,
    *,
    failures_before_rollback: int = DEFAULT_FAILURES_BEFORE_ROLLBACK,
    paused: bool = False,
) -> MigrationState:
    """A migration at its start weight; the first HEALTHY verdict (the ready threshold met) advances it."""
    if steps is None:
        steps = DEFAULT_TO_AWAY_STEPS if direction is Direction.TO_AWAY else DEFAULT_TO_HOME_STEPS
    return MigrationState(
        direction=direction,
        steps=validate_steps(steps),
        step_index=0,
        weight=direction.start_weight,
        last_good_weight=direction.start_weight,
        failures_before_rollback=failures_before_rollback,
        paused=paused,
    )


def begin_from(
    direction: Direction,
    steps: Sequence[int] | None,
    weight: int,
    *,
    failures_before_rollback: int = DEFAULT_FAILURES_BEFORE_ROLLBACK,
    paused: bool = False,
) -> MigrationState:
    """A migration that starts where traffic already is, e.g. at away weight 50 after a rollback.

    It starts at the last weight of the schedule that does not go past `weight` toward the target, and
    holds `weight` there: the first advance then moves to the next scheduled weight beyond it, so a new
    migration never first swings traffic back to the far side (a rollback at 50 followed by a flip home
    goes 50 -> 25 -> 0 with the default steps, never through 100).
    """
    state = begin(direction, steps, failures_before_rollback=failures_before_rollback, paused=paused)
    if not MIN_WEIGHT <= weight <= MAX_WEIGHT:
        raise ValueError(f"weight {weight} is outside 0..100")
    schedule = state.schedule
    distance = abs(weight - direction.start_weight)
    index = max(
        i for i, scheduled in enumerate(schedule) if abs(scheduled - direction.start_weight) <= distance
    )
    return dataclasses.replace(state, step_index=index, weight=weight, last_good_weight=weight)


def _already_ended(state: MigrationState, ending: Ending) -> Decision:
    return Decision(ACTION_OF_ENDING[ending], state, f"the migration has already ended ({ending.value})")


def next_step(state: MigrationState, verdict: Verdict) -> Decision:
    """Decide what follows the verdict on the weight currently applied."""
    if state.ending is not None:
        return _already_ended(state, state.ending)
    if state.paused:
        return Decision(Action.HOLD, state, f"paused at away weight {state.weight}")
    if verdict is Verdict.NOT_ENOUGH_DATA:
        return Decision(Action.HOLD, state, f"not enough requests to judge away weight {state.weight}")
    if verdict is Verdict.UNHEALTHY:
        return _after_failed_check(state)
    if verdict is Verdict.SEVERE:
        return _after_severe_failure(state)
    return _after_passed_check(state)


def _after_failed_check(state: MigrationState) -> Decision:
    failures = state.consecutive_failures + 1
    if failures < state.failures_before_rollback:
        held = dataclasses.replace(state, consecutive_failures=failures)
        return Decision(
            Action.HOLD,
            held,
            f"away weight {state.weight} failed its gates "
            f"({failures} of {state.failures_before_rollback} failures tolerated)",
        )
    rolled_back = dataclasses.replace(
        state,
        weight=state.last_good_weight,
        consecutive_failures=failures,
        ending=Ending.ROLLED_BACK,
    )
    return Decision(
        Action.ROLL_BACK,
        rolled_back,
        f"away weight {state.weight} failed its gates {failures} times in a row; "
        f"rolled back to the last good away weight {state.last_good_weight}",
    )


def _after_severe_failure(state: MigrationState) -> Decision:
    failures = state.consecutive_failures + 1
    rolled_back = dataclasses.replace(
        state, weight=state.last_good_weight, consecutive_failures=failures, ending=Ending.ROLLED_BACK
    )
    return Decision(
        Action.ROLL_BACK,
        rolled_back,
        f"away weight {state.weight} failed severely; "
        f"rolled back at once to the last good away weight {state.last_good_weight}",
    )


def _after_passed_check(state: MigrationState) -> Decision:
    schedule = state.schedule
    if state.step_index == len(schedule) - 1:
        finished = dataclasses.replace(
            state, last_good_weight=state.weight, consecutive_failures=0, ending=Ending.SUCCEEDED
        )
        return Decision(Action.FINISH, finished, f"target away weight {state.weight} is healthy")
    next_index = state.step_index + 1
    advanced = dataclasses.replace(
        state,
        step_index=next_index,
        weight=schedule[next_index],
        last_good_weight=state.weight,
        consecutive_failures=0,
    )
    return Decision(
        Action.ADVANCE,
        advanced,
        f"away weight {state.weight} is healthy; step {next_index} of {len(schedule) - 1} "
        f"moves to away weight {schedule[next_index]}",
    )


def abort(state: MigrationState) -> Decision:
    """End the migration at the start weight, back on the starting placement."""
    if state.ending is not None:
        return _already_ended(state, state.ending)
    aborted = dataclasses.replace(
        state,
        step_index=0,
        weight=state.start_weight,
        consecutive_failures=0,
        paused=False,
        ending=Ending.ABORTED,
    )
    return Decision(Action.ABORT, aborted, f"aborted; back to away weight {state.start_weight}")


def promote(state: MigrationState) -> Decision:
    """Skip the remaining steps: end the migration at the target weight."""
    if state.ending is not None:
        return _already_ended(state, state.ending)
    promoted = dataclasses.replace(
        state,
        step_index=len(state.schedule) - 1,
        weight=state.target_weight,
        last_good_weight=state.target_weight,
        consecutive_failures=0,
        paused=False,
        ending=Ending.SUCCEEDED,
    )
    return Decision(Action.FINISH, promoted, f"promoted; straight to away weight {state.target_weight}")


def pause(state: MigrationState) -> MigrationState:
    """The same state, paused: `next_step` holds until `resume`."""
    return dataclasses.replace(state, paused=True)


def resume(state: MigrationState) -> MigrationState:
    return dataclasses.replace(state, paused=False)
