"""Per-second rates between two reads of running totals: pure functions, no clock, no I/O.

A hardware counter only grows, except when it is reset (a driver reload, `perfquery -R`, a GPU reset)
or wraps (a narrow counter a driver fills from a wider one). Either way the new value is smaller than
the old; what happened in between is then at least the new value (counted up from 0 since), which is
what Prometheus' own `rate()` assumes too. A rate is never negative.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


@dataclasses.dataclass(frozen=True, slots=True)
class Observed:
    """A counter's value, and when it was read (seconds on a monotonic clock)."""

    value: int
    at: float


def increase(previous: int, current: int) -> int:
    """How much a counter grew from `previous` to `current`; after a reset or a wrap (it went
    backwards), `current`: what it counted since it restarted from 0."""
    return current - previous if current >= previous else current


def rate(previous: Observed, current: Observed) -> float | None:
    """Events a second between two reads; None when no time passed between them (no rate to give)."""
    seconds = current.at - previous.at
    if seconds <= 0:
        return None
    return increase(previous.value, current.value) / seconds


def rates_between(previous: Mapping[K, Observed], current: Mapping[K, Observed]) -> dict[K, float]:
    """The rate of every counter read both times. A counter read only now (a new port, a GPU that
    just appeared) has no rate until its next read."""
    found: dict[K, float] = {}
    for key, now in current.items():
        before = previous.get(key)
        if before is None:
            continue
        per_second = rate(before, now)
        if per_second is not None:
            found[key] = per_second
    return found


def remember(previous: Mapping[K, Observed], current: Mapping[K, Observed]) -> dict[K, Observed]:
    """The observations to compare the next read with: this read's, and for a counter this read
    missed (a file that could not be read this once), its last one, so its next rate spans the gap
    instead of starting over."""
    return {**previous, **current}
