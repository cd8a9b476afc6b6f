"""What the node writes on a placed pod (the `chosen` annotation, the event), and the cost it adds up."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vk_provider.kit.placement import CostMeter, chosen_annotation, parse_chosen_annotation, placement_message
from vk_provider.provider import Placement

PROPERTY = settings(database=None, deadline=None, max_examples=200)
RUNPOD = Placement(
    provider="runpod",
    price_per_hour=0.34,
    gpu_type="NVIDIA GeForce RTX 4090",
    gpu_count=1,
    tier="COMMUNITY",
    locations=("EU-RO-1", "US-KS-2"),
)


def test_the_annotation_is_compact_json_with_only_what_is_known() -> None:
    assert chosen_annotation(RUNPOD) == (
        '{"gpuCount":1,"gpuType":"NVIDIA GeForce RTX 4090","locations":["EU-RO-1","US-KS-2"],'
        '"pricePerHour":0.34,"provider":"runpod","tier":"COMMUNITY"}'
    )
    assert chosen_annotation(Placement("burst")) == '{"provider":"burst"}'


placements = st.builds(
    Placement,
    provider=st.text(min_size=1, max_size=20),
    price_per_hour=st.one_of(st.none(), st.floats(min_value=0, max_value=1e6, allow_nan=False)),
    gpu_type=st.one_of(st.none(), st.text(max_size=30)),
    gpu_count=st.integers(0, 64),
    tier=st.one_of(st.none(), st.text(max_size=10)),
    locations=st.lists(st.text(max_size=10), max_size=3).map(tuple),
)


@PROPERTY
@given(placements)
def test_the_annotation_reads_back_as_the_same_placement(placement: Placement) -> None:
    assert parse_chosen_annotation(chosen_annotation(placement)) == placement


@pytest.mark.parametrize(
    "text",
    [
        "runpod",
        "[]",
        "{}",
        '{"provider":""}',
        '{"provider":"a","pricePerHour":-1}',
        '{"provider":"a","pricePerHour":"0.3"}',
        '{"provider":"a","pricePerHour":true}',
        '{"provider":"a","gpuCount":1.5}',
        '{"provider":"a","gpuCount":-1}',
        '{"provider":"a","locations":"EU"}',
        '{"provider":"a","locations":[1]}',
        '{"provider":"a","tier":7}',
    ],
)
def test_an_annotation_that_is_not_a_placement_reads_as_none(text: str) -> None:
    assert parse_chosen_annotation(text) is None


def test_unknown_keys_are_ignored_for_later_additions() -> None:
    text = json.dumps({"provider": "a", "pricePerHour": 1, "since": "2026-12-01"})
    assert parse_chosen_annotation(text) == Placement("a", 1.0)


def test_the_event_says_where_and_at_what_price() -> None:
    assert placement_message(RUNPOD) == (
        "placed on runpod: 1 x NVIDIA GeForce RTX 4090 (COMMUNITY) in EU-RO-1 or US-KS-2 "
        "at $0.34/h (list price)"
    )
    assert placement_message(Placement("burst")) == (
        "placed on burst (the provider's defaults); no price is known"
    )
    assert placement_message(Placement("burst", gpu_count=2)) == "placed on burst (2 GPUs); no price is known"


class ManualClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def test_cost_adds_up_while_running_at_the_price_then_seen() -> None:
    clock = ManualClock()
    meter = CostMeter(clock)
    assert meter.observe("a", price_per_hour=2.0, running=False) == 0.0
    clock.now += 600  # pending: not charged
    assert meter.observe("a", price_per_hour=2.0, running=True) == 0.0
    clock.now += 1800
    assert meter.observe("a", price_per_hour=4.0, running=True) == pytest.approx(1.0)  # half an hour at $2
    clock.now += 900
    assert meter.observe("a", price_per_hour=4.0, running=False) == pytest.approx(1.0)  # a quarter at $4
    clock.now += 3600
    assert meter.observe("a", price_per_hour=4.0, running=True) == 0.0  # it was stopped meanwhile
    clock.now += 360
    assert meter.forget("a") == pytest.approx(0.4)
    clock.now += 3600
    assert meter.forget("a") == 0.0
    assert meter.observe("a", price_per_hour=4.0, running=True) == 0.0  # a new start


def test_a_pod_without_a_price_costs_nothing_known() -> None:
    clock = ManualClock()
    meter = CostMeter(clock)
    meter.observe("a", price_per_hour=None, running=True)
    clock.now += 3600
    assert meter.observe("a", price_per_hour=None, running=True) == 0.0


def test_pods_are_metered_apart() -> None:
    clock = ManualClock()
    meter = CostMeter(clock)
    meter.observe("a", price_per_hour=1.0, running=True)
    clock.now += 3600
    meter.observe("b", price_per_hour=3.0, running=True)
    clock.now += 3600
    assert meter.observe("a", price_per_hour=1.0, running=True) == pytest.approx(2.0)
    assert meter.observe("b", price_per_hour=3.0, running=True) == pytest.approx(3.0)
