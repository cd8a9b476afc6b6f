"""Operator-declared training runs (`spec.warmUp.schedule`): when a run's warm-up window is open.

A run is a 5-field cron expression in UTC; its window opens `leadSeconds` before each run and closes
`durationSeconds` after it started. The expressions are read by `cronsim` (a small, maintained cron
parser: a cron grammar with its ranges, steps, names and day-of-month/day-of-week rule is not worth
writing again). Everything here is a pure function of the run and the clock.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from cronsim import CronSim, CronSimError


class InvalidSchedule(ValueError):
    """A cron expression cronsim cannot read; the message says why."""


@dataclasses.dataclass(frozen=True)
class ScheduledRun:
    cron: str
    gpus: int
    lead_seconds: int = 600
    duration_seconds: int = 1800


def check_cron(expression: str) -> None:
    """Raise InvalidSchedule unless `expression` is a 5-field cron expression cronsim reads."""
    if len(expression.split()) != 5:
        raise InvalidSchedule(
            f"{expression!r} is not a 5-field cron expression (minute hour day month weekday)"
        )
    try:
        CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as error:
        raise InvalidSchedule(f"{expression!r}: {error}") from None


def window_open(now: datetime, run: ScheduledRun) -> bool:
    """Whether `now` lies within [a run - leadSeconds, that run + durationSeconds] of some run."""
    second = now.astimezone(UTC).replace(microsecond=0)
    # cronsim yields the runs strictly after (before) its start: one second back (on) keeps a run
    # that falls exactly on `now` in both directions.
    upcoming = next(CronSim(run.cron, second - timedelta(seconds=1)), None)
    if upcoming is not None and upcoming - timedelta(seconds=run.lead_seconds) <= now:
        return True
    previous = next(CronSim(run.cron, second + timedelta(seconds=1), reverse=True), None)
    return previous is not None and now <= previous + timedelta(seconds=run.duration_seconds)


def scheduled_gpus(now: datetime, runs: tuple[ScheduledRun, ...]) -> int:
    """The GPUs the runs whose windows are open will need."""
    return sum(run.gpus for run in runs if window_open(now, run))
