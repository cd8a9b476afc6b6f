"""Rates between two reads: growth, a reset or wrap, no time passed, counters seen only once."""

from __future__ import annotations

import pytest

from vk_provider.interconnect.rates import Observed, increase, rate, rates_between, remember

pytestmark = pytest.mark.unit


def test_growth_over_the_interval_is_the_rate() -> None:
    assert rate(Observed(100, at=10.0), Observed(130, at=20.0)) == pytest.approx(3.0)
    assert rate(Observed(7, at=0.0), Observed(7, at=5.0)) == 0.0


@pytest.mark.parametrize(
    ("previous", "current", "grown"),
    [
        (5, 9, 4),
        # Reset (perfquery -R, a driver reload): counted up from 0 since, so at least `current`.
        (65_000, 12, 12),
        (40, 0, 0),
        # An 8-bit counter a driver wraps: read as a reset too, never as a negative number.
        (250, 3, 3),
    ],
)
def test_a_counter_that_goes_backwards_was_reset_and_never_gives_a_negative_rate(
    previous: int, current: int, grown: int
) -> None:
    assert increase(previous, current) == grown
    assert rate(Observed(previous, at=0.0), Observed(current, at=2.0)) == pytest.approx(grown / 2)


def test_no_time_between_two_reads_gives_no_rate() -> None:
    assert rate(Observed(1, at=5.0), Observed(9, at=5.0)) is None
    assert rate(Observed(1, at=5.0), Observed(9, at=4.0)) is None


def test_only_counters_read_both_times_have_a_rate() -> None:
    previous = {"a": Observed(10, 0.0), "gone": Observed(3, 0.0)}
    current = {"a": Observed(20, 5.0), "new": Observed(50, 5.0)}
    assert rates_between(previous, current) == {"a": pytest.approx(2.0)}


def test_a_counter_missed_once_keeps_its_last_read_so_its_next_rate_spans_the_gap() -> None:
    first = {"a": Observed(10, 0.0), "b": Observed(0, 0.0)}
    missed_b = {"a": Observed(20, 10.0)}
    kept = remember(first, missed_b)
    assert kept == {"a": Observed(20, 10.0), "b": Observed(0, 0.0)}
    assert rates_between(kept, {"a": Observed(20, 20.0), "b": Observed(40, 20.0)}) == {
        "a": 0.0,
        "b": pytest.approx(2.0),  # 40 over the 20 s since b's last read, not over 10 s
    }
