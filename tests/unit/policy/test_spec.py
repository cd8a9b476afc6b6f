"""Reading an OffloadPolicy's spec: defaults, and a clear error naming the field for bad input."""

from __future__ import annotations

from typing import Any

import pytest

from vk_provider.policy.selectors import LabelSelector, Requirement, parse_selector
from vk_provider.policy.spec import InvalidPolicy, parse_policy

pytestmark = pytest.mark.unit


def raw(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "offloads": {"selector": {"matchLabels": {"tier": "inference"}}},
        "homePool": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}},
    }
    return {"metadata": {"name": "p", "uid": "u", "generation": 3}, "spec": {**base, **spec}}


def test_defaults_are_the_crd_s() -> None:
    policy = parse_policy(raw())
    assert policy.resource == "nvidia.com/gpu"
    assert policy.timing.flip_out_after_seconds == 30
    assert policy.timing.flip_back_after_seconds == 600
    assert policy.timing.max_flips_per_hour == 4
    assert policy.reservation.key == "gpu.vk-provider.dev/reserved"
    assert policy.reservation.value == "training"
    assert policy.health.taint_key == "gpu.vk-provider.dev/unhealthy"
    assert policy.health.ignored_xids == frozenset({13, 31, 43, 45, 63, 68, 109})
    assert policy.demand.group_by == "job"
    assert policy.demand.min_priority == 100000
    assert policy.generation == 3


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"timing": {"flipOutAfterSeconds": 60, "flipBackAfterSeconds": 10}}, "must not be shorter"),
        ({"timing": {"minAwaySeconds": -1}}, "spec.timing.minAwaySeconds must be at least 0"),
        ({"timing": {"maxFlipsPerHour": 0}}, "spec.timing.maxFlipsPerHour must be at least 1"),
        ({"timing": {"minHomeSeconds": "5m"}}, "spec.timing.minHomeSeconds must be an integer"),
        ({"homePool": {"nodeSelector": {}}}, "must not be empty"),
        (
            {"homePool": {"nodeSelector": {"matchLabels": {"a": "b"}}, "resource": "not a resource"}},
            "resource",
        ),
        ({"offloads": {}}, "spec.offloads.selector is required"),
        ({"demand": {"pods": {"groupBy": "label"}}}, "needs spec.demand.pods.groupLabel"),
        ({"demand": {"pods": {"groupBy": "queue"}}}, "groupBy must be one of"),
        ({"reservation": {"taint": {"effect": "NoExecute"}}}, "NoSchedule or PreferNoSchedule"),
        (
            {"health": {"dcgmExporter": {"port": 9400}}},
            "dcgmExporter.namespace must name the exporter pods. namespace",
        ),
        ({"health": {"maxTemperatureCelsius": -3}}, "maxTemperatureCelsius must be a number >= 0"),
        (
            {"offloads": {"selector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}},
            "operator In needs values",
        ),
    ],
)
def test_bad_input_names_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidPolicy, match=message.replace("(", r"\(")):
        parse_policy(raw(**spec))


def test_a_missing_spec_is_an_error_not_a_crash() -> None:
    with pytest.raises(InvalidPolicy, match="spec is missing"):
        parse_policy({"metadata": {"name": "p"}})


def test_selectors_match_and_query_alike() -> None:
    selector = parse_selector(
        {
            "matchLabels": {"tier": "inference"},
            "matchExpressions": [
                {"key": "team", "operator": "In", "values": ["a", "b"]},
                {"key": "frozen", "operator": "DoesNotExist"},
            ],
        },
        "s",
    )
    assert selector.query() == "tier=inference,team in (a,b),!frozen"
    assert selector.matches({"tier": "inference", "team": "a"})
    assert not selector.matches({"tier": "inference", "team": "c"})
    assert not selector.matches({"tier": "inference", "team": "a", "frozen": "yes"})
    assert LabelSelector().matches(None)
    assert Requirement("k", "NotIn", ("x",)).matches({})
