"""The HTTPRoute rule an Offload owns: which one, the weights written into it, and what applies them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from vk_provider.controller.gatewayapi import probe_target
from vk_provider.controller.httproutes import (
    WEIGHT_HEADER,
    WEIGHTS_ANNOTATION,
    RouteProblem,
    Written,
    owned_rule,
    parent_verdicts,
    weights_of,
    with_weight,
    written,
)
from vk_provider.offload.spec import GatewayRoute

pytestmark = pytest.mark.unit

TARGET = GatewayRoute(http_route="chat", rule="", away_service="vk-router", away_port=8080)


def route(*rules: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ml", "name": "chat", "generation": generation, "resourceVersion": "7"},
        "spec": {
            "parentRefs": [{"name": "public"}],
            "hostnames": ["chat.example"],
            "rules": list(rules),
        },
    }


def home_rule(**extra: Any) -> dict[str, Any]:
    return {
        "matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
        "backendRefs": [{"name": "chat", "port": 8000}],
        **extra,
    }


def test_the_owned_rule_is_the_one_sending_home_or_the_one_named() -> None:
    other = {"backendRefs": [{"name": "docs", "port": 80}]}
    assert owned_rule(route(other, home_rule()), TARGET, "chat") == 1
    named = GatewayRoute("chat", "completions", "vk-router", 8080)
    assert owned_rule(route(home_rule(), home_rule(name="completions")), named, "chat") == 1


@pytest.mark.parametrize(
    ("rules", "target", "message"),
    [
        ((), TARGET, 'has no rule sending to the home Service "chat"'),
        ((home_rule(), home_rule()), TARGET, "has 2 rules sending to the home Service"),
        ((home_rule(),), GatewayRoute("chat", "missing", "vk-router", 8080), 'has no rule named "missing"'),
        (
            ({"backendRefs": [{"name": "chat", "port": 8000}, {"name": "legacy", "port": 80, "weight": 5}]},),
            TARGET,
            "also sends to legacy",
        ),
    ],
)
def test_a_rule_that_cannot_be_owned_is_a_problem_named_for_the_user(
    rules: tuple[dict[str, Any], ...], target: GatewayRoute, message: str
) -> None:
    with pytest.raises(RouteProblem, match=message) as raised:
        owned_rule(route(*rules), target, "chat")
    assert raised.value.reason in ("HTTPRouteRuleNotFound", "HTTPRouteRuleNotOwned")


def test_a_weight_is_written_as_two_backends_numbered_and_announced_in_a_response_header() -> None:
    original = route(home_rule(filters=[{"type": "RequestHeaderModifier", "requestHeaderModifier": {}}]))
    kept = copy.deepcopy(original)
    updated = with_weight(original, 0, target=TARGET, home_service="chat", weight=30, number=4)
    assert original == kept  # a copy: the read object is left as it was
    rule = updated["spec"]["rules"][0]
    assert rule["backendRefs"] == [
        {"name": "chat", "port": 8000, "weight": 70},
        {"name": "vk-router", "port": 8080, "weight": 30},
    ]
    assert rule["filters"][0]["type"] == "RequestHeaderModifier"
    assert rule["filters"][1] == {
        "type": "ResponseHeaderModifier",
        "responseHeaderModifier": {"set": [{"name": WEIGHT_HEADER, "value": "4"}]},
    }
    assert updated["metadata"]["annotations"][WEIGHTS_ANNOTATION] == "4:30"
    assert updated["metadata"]["resourceVersion"] == "7"  # the write is refused if the route changed
    assert written(updated) == Written(4, 30)
    assert weights_of(rule, TARGET, "chat", "ml") == 30
    # Written again: still two backends, and the header replaced, not repeated.
    again = with_weight(updated, 0, target=TARGET, home_service="chat", weight=100, number=5)
    rule = again["spec"]["rules"][0]
    assert [ref["weight"] for ref in rule["backendRefs"]] == [0, 100]
    assert rule["filters"][1]["responseHeaderModifier"]["set"] == [{"name": WEIGHT_HEADER, "value": "5"}]


def test_our_header_joins_a_response_header_modifier_the_rule_has_already() -> None:
    users = {
        "type": "ResponseHeaderModifier",
        "responseHeaderModifier": {"set": [{"name": "X-A", "value": "1"}]},
    }
    updated = with_weight(
        route(home_rule(filters=[users])), 0, target=TARGET, home_service="chat", weight=0, number=1
    )
    assert updated["spec"]["rules"][0]["filters"] == [
        {
            "type": "ResponseHeaderModifier",
            "responseHeaderModifier": {
                "set": [{"name": "X-A", "value": "1"}, {"name": WEIGHT_HEADER, "value": "1"}]
            },
        }
    ]


def test_an_away_service_in_another_namespace_is_referred_to_with_it() -> None:
    target = GatewayRoute("chat", "", "vk-router", 8080, away_namespace="vk-provider-system")
    updated = with_weight(route(home_rule()), 0, target=target, home_service="chat", weight=50, number=1)
    away = updated["spec"]["rules"][0]["backendRefs"][1]
    assert away == {"name": "vk-router", "port": 8080, "namespace": "vk-provider-system", "weight": 50}
    assert weights_of(updated["spec"]["rules"][0], target, "chat", "ml") == 50
    assert weights_of(updated["spec"]["rules"][0], TARGET, "chat", "ml") is None  # not the same Service


def test_weights_that_are_not_ours_read_as_none() -> None:
    assert weights_of(home_rule(), TARGET, "chat", "ml") is None  # no away backend yet
    odd = {"backendRefs": [{"name": "chat", "weight": 3}, {"name": "vk-router", "weight": 1}]}
    assert weights_of(odd, TARGET, "chat", "ml") is None  # not percentages
    assert written({"metadata": {"annotations": {WEIGHTS_ANNOTATION: "x:101"}}}) is None


def accepted(generation: int, status: str = "True", **ref: Any) -> dict[str, Any]:
    return {
        "parentRef": {"name": "public", **ref},
        "controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
        "conditions": [
            {
                "type": "Accepted",
                "status": status,
                "observedGeneration": generation,
                "reason": "R",
                "message": "m",
            }
        ],
    }


def test_every_parent_must_accept_the_current_generation() -> None:
    current = route(home_rule(), generation=3)
    assert parent_verdicts(current) == [("Gateway ml/public", "it has not reported on the route")]
    current["status"] = {"parents": [accepted(2)]}
    assert parent_verdicts(current) == [("Gateway ml/public", "it accepted generation 2, not 3 yet")]
    current["status"] = {"parents": [accepted(3, "False")]}
    assert parent_verdicts(current) == [("Gateway ml/public", "it does not accept the route: R: m")]
    current["status"] = {"parents": [accepted(3, namespace="ml")]}  # the same parent, written out
    assert parent_verdicts(current) == [("Gateway ml/public", "")]
    current["spec"]["parentRefs"].append({"name": "internal", "sectionName": "http"})
    assert parent_verdicts(current)[1] == ("Gateway ml/internal/http", "it has not reported on the route")
    current["status"]["parents"].append(accepted(3, name="internal"))  # no sectionName: another parent
    assert parent_verdicts(current)[1][1] == "it has not reported on the route"
    current["spec"]["parentRefs"] = []
    assert parent_verdicts(current) == [("the HTTPRoute", "it has no parentRefs: no gateway serves it")]


def test_a_probe_asks_for_what_the_owned_rule_routes() -> None:
    assert probe_target(route(home_rule()), 0) == ("chat.example", "/v1")
    wildcard = route({"backendRefs": []})
    wildcard["spec"]["hostnames"] = ["*.example"]
    assert probe_target(wildcard, 0) == ("probe.example", "/")
