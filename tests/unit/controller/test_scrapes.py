"""The judged side and its baseline, counted over the same interval."""

from __future__ import annotations

import pytest

from vk_provider.controller.gates import SideSample
from vk_provider.controller.scrapes import Scrape, counted_since, serves_both_sides

pytestmark = pytest.mark.unit


def sample(responses: float, errors: float) -> SideSample:
    return SideSample(responses=responses, by_class=(("2xx", responses - errors), ("5xx", errors)))


def test_only_a_weight_strictly_between_0_and_100_has_a_baseline() -> None:
    assert [serves_both_sides(weight) for weight in (0, 1, 50, 99, 100)] == [False, True, True, True, False]


def test_both_sides_are_counted_between_the_same_two_scrapes() -> None:
    then = Scrape({"r1": sample(10, 1), "r2": sample(5, 0)}, {"r1": sample(20, 2), "r2": sample(0, 0)})
    now = Scrape({"r1": sample(30, 11), "r2": sample(15, 0)}, {"r1": sample(40, 12), "r2": sample(10, 0)})
    judged, baseline = counted_since(now, then)
    assert judged is not None
    assert baseline is not None
    assert (judged.requests, judged.server_errors) == (30, 10)
    assert (baseline.requests, baseline.server_errors) == (30, 10)


def test_no_baseline_unless_both_scrapes_have_one_and_no_count_across_changed_routers() -> None:
    one_sided = Scrape({"r1": sample(10, 0)})
    two_sided = Scrape({"r1": sample(20, 0)}, {"r1": sample(20, 0)})
    assert counted_since(two_sided, one_sided)[1] is None  # the weight changed in between
    assert counted_since(Scrape({"r2": sample(20, 0)}), one_sided) == (None, None)
