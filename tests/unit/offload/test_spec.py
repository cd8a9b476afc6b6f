"""Reading an Offload: defaults, and a clear error for what cannot be acted on."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from vk_provider.offload.oneoff import OneOffStrategy, one_off_value
from vk_provider.offload.plan import Direction
from vk_provider.offload.spec import (
    DEFAULT_AWAY_NODE_SELECTOR,
    DEFAULT_AWAY_TOLERATIONS,
    MAX_AWAY_REPLICAS,
    GatewayRoute,
    InvalidSpec,
    PoolRef,
    RouteSpec,
    parse_offload,
)
from vk_provider.offload.status import Phase

MINIMAL: dict[str, Any] = {
    "metadata": {"namespace": "ml", "name": "chat", "generation": 2},
    "spec": {"home": {"deployment": "chat", "service": "chat-svc"}, "placement": "home", "route": {}},
}


def test_defaults_match_the_crd() -> None:
    spec = parse_offload(MINIMAL)
    assert spec.placement is Direction.TO_HOME
    assert spec.strategy.to_away_steps == (50, 100)
    assert spec.strategy.to_home_steps == (10, 25, 50, 75, 100)
    assert spec.strategy.step_interval_seconds == 30
    assert spec.strategy.ready_threshold_percent == 100
    assert spec.strategy.gates.min_requests_per_interval == 10
    assert spec.away.node_selector == {"node-restriction.kubernetes.io/vk-provider": "true"}
    assert spec.away.tolerations == (
        {"key": "vk-provider.dev/virtual-node", "operator": "Exists", "effect": "NoSchedule"},
    )
    assert spec.away.replicas is None
    assert (spec.paused, spec.promotion, spec.key) == (False, "", "ml/chat")
    assert spec.data_plane == "builtin"


OURS = {"node-restriction.kubernetes.io/vk-provider": "true"}
OUR_TOLERATION = {"key": "vk-provider.dev/virtual-node", "operator": "Exists", "effect": "NoSchedule"}
OLD_TOLERATION = {"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}
OWN_TOLERATION = {"key": "gpu", "operator": "Exists"}


ROOT = Path(__file__).parents[3]


@pytest.mark.parametrize("crd", ["manifests/crds/offload.yaml", "charts/vk-provider/crds/offload.yaml"])
def test_the_crd_defaults_the_away_placement_to_our_nodes(crd: str) -> None:
    (version,) = yaml.safe_load((ROOT / crd).read_text())["spec"]["versions"]
    away = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["away"]["properties"]
    assert away["nodeSelector"]["default"] == dict(DEFAULT_AWAY_NODE_SELECTOR)
    assert away["tolerations"]["default"] == [dict(item) for item in DEFAULT_AWAY_TOLERATIONS]


@pytest.mark.parametrize(
    ("away", "selector", "tolerations"),
    [
        # What the old CRD default stored: reads as today's default, so nothing lands on AKS's nodes.
        (
            {"nodeSelector": {"type": "virtual-kubelet"}, "tolerations": [OLD_TOLERATION]},
            OURS,
            (OUR_TOLERATION,),
        ),
        # A selector of the user's own is theirs; their toleration of the old taint gains ours beside it.
        (
            {
                "nodeSelector": {"type": "virtual-kubelet", "pool": "a"},
                "tolerations": [OWN_TOLERATION, OLD_TOLERATION],
            },
            {"type": "virtual-kubelet", "pool": "a"},
            (OWN_TOLERATION, OLD_TOLERATION, OUR_TOLERATION),
        ),
        ({"nodeSelector": {"pool": "a"}, "tolerations": [OWN_TOLERATION]}, {"pool": "a"}, (OWN_TOLERATION,)),
        ({"tolerations": []}, OURS, ()),
    ],
)
def test_the_old_default_placement_reads_as_ours(
    away: dict[str, Any], selector: dict[str, str], tolerations: tuple[dict[str, str], ...]
) -> None:
    offload = copy.deepcopy(MINIMAL)
    offload["spec"]["away"] = away
    spec = parse_offload(offload)
    assert spec.away.node_selector == selector
    assert spec.away.tolerations == tolerations


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("spec", "placement"), "sideways", "spec.placement must be home or away"),
        (("spec", "home", "deployment"), "", "spec.home.deployment must name an object"),
        (("spec", "strategy"), {"toAwaySteps": [50, 40, 100]}, "strictly increasing"),
        (("spec", "strategy"), {"toHomeSteps": [10, 50]}, "the last step must be 100"),
        (("spec", "strategy"), {"stepIntervalSeconds": 0}, "stepIntervalSeconds 0 is outside 1"),
        (("spec", "strategy"), {"gates": {"maxErrorRatePercent": "lots"}}, "must be a number"),
        (("spec", "away"), {"nodeSelector": {"a": 1}}, "nodeSelector values must be strings"),
        (("spec", "away"), {"replicas": 100000}, r"spec.away.replicas 100000 is outside 0..100"),
        (("metadata", "name"), "n" * 64, "64 characters, more than 63: it must fit in the .* label"),
        (("metadata", "name"), "n" * 253, "253 characters, more than 63"),
        (
            ("spec", "traffic"),
            {"dataPlane": "istio"},
            "dataPlane must be one of builtin, envoy, gatewayapi, inferencepool, not 'istio'",
        ),
        (("spec", "traffic"), {"dataPlane": "gatewayapi"}, "needs spec.traffic.httpRoute .*awayService"),
        (
            ("spec", "traffic"),
            {"dataPlane": "gatewayapi", "httpRoute": {"name": "chat"}, "awayService": {"port": 80}},
            "spec.traffic.awayService.name must name an object",
        ),
        (
            ("spec", "traffic"),
            {
                "dataPlane": "gatewayapi",
                "httpRoute": {"name": "chat", "rule": 3},
                "awayService": {"name": "r"},
            },
            "spec.traffic.httpRoute.rule must be a rule's name",
        ),
        (("spec", "traffic"), {"dataPlane": "inferencepool"}, "needs spec.traffic.inferencePool"),
        (
            ("spec", "traffic"),
            {"dataPlane": "inferencepool", "inferencePool": {"namespace": "team"}},
            "spec.traffic.inferencePool.name must name an object",
        ),
        (("spec", "traffic"), "envoy", "spec.traffic must be an object"),
        (("spec", "route"), {"allowedNamespaces": "team"}, "allowedNamespaces must be a list"),
        (("spec", "route"), {"hosts": ["a.test", ""]}, "spec.route.hosts must be a list of non-empty"),
        (("spec", "route"), {"pathPrefix": "v1"}, "pathPrefix must be a path starting with /"),
    ],
)
def test_bad_fields_are_named(path: tuple[str, ...], value: Any, message: str) -> None:
    offload = copy.deepcopy(MINIMAL)
    target = offload
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(InvalidSpec, match=message):
        parse_offload(offload)


def test_a_gatewayapi_offload_names_its_route_rule_and_away_service() -> None:
    offload = copy.deepcopy(MINIMAL)
    offload["spec"]["traffic"] = {
        "dataPlane": "gatewayapi",
        "httpRoute": {"name": "chat-route", "rule": "completions"},
        "awayService": {"name": "vk-provider-router", "namespace": "vk-provider-system", "port": 8080},
    }
    route = parse_offload(offload).gateway_route
    assert route == GatewayRoute(
        "chat-route", "completions", "vk-provider-router", 8080, "vk-provider-system"
    )
    assert parse_offload(MINIMAL).gateway_route is None


def test_an_inferencepool_offload_names_its_pool_in_its_own_namespace_by_default() -> None:
    offload = copy.deepcopy(MINIMAL)
    offload["spec"]["traffic"] = {"dataPlane": "inferencepool", "inferencePool": {"name": "chat-pool"}}
    assert parse_offload(offload).inference_pool == PoolRef("chat-pool", offload["metadata"]["namespace"])
    offload["spec"]["traffic"]["inferencePool"]["namespace"] = "other"
    assert parse_offload(offload).inference_pool == PoolRef("chat-pool", "other")
    assert parse_offload(MINIMAL).inference_pool is None


def test_the_severe_gate_and_the_emergency_default_to_the_crd() -> None:
    strategy = parse_offload(MINIMAL).strategy
    severe = strategy.gates.severe
    assert (severe.enabled, severe.error_rate_percent, severe.min_requests, severe.window_seconds) == (
        True,
        50.0,
        20,
        5,
    )
    emergency = strategy.emergency
    assert (emergency.enabled, emergency.grace_seconds, emergency.min_serving_percent) == (True, 30, 0)


def test_the_severe_gate_and_the_emergency_are_read_and_checked() -> None:
    offload = copy.deepcopy(MINIMAL)
    offload["spec"]["strategy"] = {
        "gates": {"severe": {"errorRatePercent": 30, "minRequests": 50, "windowSeconds": 2}},
        "emergency": {"enabled": False, "graceSeconds": 10, "minServingPercent": 50},
    }
    strategy = parse_offload(offload).strategy
    assert strategy.gates.severe.error_rate_percent == 30.0
    assert (strategy.gates.severe.min_requests, strategy.gates.severe.window_seconds) == (50, 2)
    assert strategy.emergency.enabled is False
    assert (strategy.emergency.grace_seconds, strategy.emergency.min_serving_percent) == (10, 50)
    offload["spec"]["strategy"] = {"emergency": {"minServingPercent": 101}}
    with pytest.raises(InvalidSpec, match=r"minServingPercent 101 is outside 0\.\.100"):
        parse_offload(offload)
    offload["spec"]["strategy"] = {"gates": {"severe": {"errorRatePercent": 150}}}
    with pytest.raises(InvalidSpec, match="errorRatePercent 150 is outside"):
        parse_offload(offload)


def test_an_offload_written_before_the_comparison_judges_against_the_other_side_counting_5xx() -> None:
    gates = parse_offload(MINIMAL).strategy.gates
    assert (gates.compare_with_other_side, gates.max_error_rate_increase_percent) == (True, 1.0)
    assert gates.error_statuses == ("5xx",)
    assert gates.severe.error_rate_increase_percent == 50.0


def test_the_comparison_and_the_error_statuses_are_read_and_checked() -> None:
    offload = copy.deepcopy(MINIMAL)
    offload["spec"]["strategy"] = {
        "gates": {
            "maxErrorRateIncreasePercent": 2.5,
            "compareWithOtherSide": False,
            "errorStatuses": ["5xx", "4xx"],
            "severe": {"errorRateIncreasePercent": 30},
        }
    }
    gates = parse_offload(offload).strategy.gates
    assert (gates.max_error_rate_increase_percent, gates.compare_with_other_side) == (2.5, False)
    assert (gates.error_statuses, gates.severe.error_rate_increase_percent) == (("4xx", "5xx"), 30.0)
    offload["spec"]["strategy"] = {"gates": {"errorStatuses": ["503"]}}
    with pytest.raises(InvalidSpec, match="errorStatuses must be a list of 4xx and 5xx"):
        parse_offload(offload)
    offload["spec"]["strategy"] = {"gates": {"maxErrorRateIncreasePercent": -1}}
    with pytest.raises(InvalidSpec, match="maxErrorRateIncreasePercent -1 is outside"):
        parse_offload(offload)


def test_deletion_and_finalizers_are_read() -> None:
    offload = copy.deepcopy(MINIMAL)
    assert (parse_offload(offload).deleting, parse_offload(offload).finalizers) == (False, ())
    offload["metadata"].update(
        deletionTimestamp="2026-12-03T13:00:00Z", finalizers=["a/b"], resourceVersion="42"
    )
    spec = parse_offload(offload)
    assert (spec.deleting, spec.finalizers, spec.resource_version) == (True, ("a/b",), "42")


def test_the_bounds_themselves_are_accepted() -> None:
    offload = copy.deepcopy(MINIMAL)
    offload["metadata"]["name"] = "n" * 63
    offload["spec"]["away"] = {"replicas": 100}
    spec = parse_offload(offload)
    assert spec.away.replicas == 100
    assert len(spec.name) == 63


def test_a_new_retry_value_asks_again_only_after_a_bad_ending() -> None:
    offload = copy.deepcopy(MINIMAL)
    offload["metadata"]["annotations"] = {"offload.vk-provider.dev/retry": "2026-01-01T10:00:00Z"}
    spec = parse_offload(offload)
    assert spec.retry == "2026-01-01T10:00:00Z"
    assert spec.retry_requested(Phase.ROLLED_BACK, None)
    assert spec.retry_requested(Phase.FAILED, "an older value")
    assert not spec.retry_requested(Phase.FAILED, "2026-01-01T10:00:00Z")  # already started for it
    assert not spec.retry_requested(Phase.SUCCEEDED, None)
    assert not spec.retry_requested(Phase.SHIFTING, None)
    assert not parse_offload(MINIMAL).retry_requested(Phase.ROLLED_BACK, None)


def test_the_data_plane_is_read() -> None:
    offload = copy.deepcopy(MINIMAL)
    offload["spec"]["traffic"] = {"dataPlane": "envoy"}
    assert parse_offload(offload).data_plane == "envoy"


def with_flip(value: str) -> dict[str, Any]:
    offload = copy.deepcopy(MINIMAL)
    offload["metadata"]["annotations"] = {"offload.vk-provider.dev/flip-strategy": value}
    offload["spec"]["strategy"] = {"toAwaySteps": [50, 100], "stepIntervalSeconds": 30}
    return offload


def test_a_flips_own_steps_and_interval_pace_only_the_migration_toward_its_placement_once() -> None:
    value = one_off_value("away", (25, 50, 100), 5, "2026-12-06T10:00:00.000000Z")
    spec = parse_offload(with_flip(value))
    assert spec.flip_strategy == OneOffStrategy(value, Direction.TO_AWAY, (25, 50, 100), 5)
    assert spec.migration_pace(Direction.TO_AWAY, None) == ((25, 50, 100), 5)
    assert spec.migration_pace(Direction.TO_AWAY, "an earlier flip's") == ((25, 50, 100), 5)
    # Handled once (run, or dropped): every later migration, a policy's too, runs by the spec.
    assert spec.migration_pace(Direction.TO_AWAY, value) == ((50, 100), 30)
    assert spec.migration_pace(Direction.TO_HOME, None) == ((10, 25, 50, 75, 100), 30)
    # Either alone: the other comes from the spec.
    steps_only = parse_offload(with_flip(one_off_value("away", (100,), None, "t")))
    assert steps_only.migration_pace(Direction.TO_AWAY, None) == ((100,), 30)
    interval_only = parse_offload(with_flip(one_off_value("away", None, 2, "t")))
    assert interval_only.migration_pace(Direction.TO_AWAY, None) == ((50, 100), 2)
    assert parse_offload(MINIMAL).migration_pace(Direction.TO_AWAY, None) == ((50, 100), 30)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("25,100", "must be a JSON object"),
        ('["away"]', "must be a JSON object"),
        ('{"placement": "sideways"}', "placement must be home or away, not 'sideways'"),
        ('{"placement": "away", "steps": [50, 40, 100]}', "strictly increasing"),
        ('{"placement": "away", "steps": "50,100"}', "steps must be a list"),
        ('{"placement": "home", "stepIntervalSeconds": 0}', "stepIntervalSeconds must be a whole number"),
        ('{"placement": "home", "stepIntervalSeconds": true}', "stepIntervalSeconds must be a whole number"),
    ],
)
def test_a_bad_flip_strategy_annotation_is_named_with_what_to_do(value: str, words: str) -> None:
    with pytest.raises(InvalidSpec) as error:
        parse_offload(with_flip(value))
    message = str(error.value)
    assert message.startswith("metadata.annotations[offload.vk-provider.dev/flip-strategy]: ")
    assert words in message
    assert message.endswith("remove it, or flip again")


def test_the_route_and_who_it_lets_in_are_read() -> None:
    offload = copy.deepcopy(MINIMAL)
    offload["metadata"]["creationTimestamp"] = "2026-01-01T10:00:00Z"
    offload["spec"]["route"] = {"hosts": ["tokens.demo"], "pathPrefix": "/v1", "allowedNamespaces": ["team"]}
    spec = parse_offload(offload)
    assert spec.route == RouteSpec(("tokens.demo",), "/v1", ("team",))
    assert spec.created == "2026-01-01T10:00:00Z"
    assert parse_offload(MINIMAL).route == RouteSpec()


def test_the_pilot_light_and_the_warm_up_annotations_are_read_and_default_to_nothing() -> None:
    assert parse_offload(MINIMAL).away.warm_replicas == 0
    offload = copy.deepcopy(MINIMAL)
    offload["spec"]["away"] = {"warmReplicas": 2}
    offload["metadata"]["annotations"] = {
        "offload.vk-provider.dev/warm-until": "2026-12-07T03:00:00Z",
        "offload.vk-provider.dev/warmed-by": "policy/train",
    }
    spec = parse_offload(offload)
    assert (spec.away.warm_replicas, spec.warm_until, spec.warmed_by) == (
        2,
        "2026-12-07T03:00:00Z",
        "policy/train",
    )


@pytest.mark.parametrize(
    ("away", "spill_over", "message"),
    [
        ({"warmReplicas": 1}, {"maxHomeReplicas": 2}, "warmReplicas does not apply to a spill-over Offload"),
        ({"warmReplicas": 101}, None, "spec.away.warmReplicas 101 is outside 0..100"),
        ({"warmReplicas": "one"}, None, "spec.away.warmReplicas must be a whole number"),
    ],
)
def test_a_pilot_light_that_cannot_be_kept_is_refused(
    away: dict[str, Any], spill_over: dict[str, Any] | None, message: str
) -> None:
    offload = copy.deepcopy(MINIMAL)
    offload["spec"]["away"] = away
    if spill_over is not None:
        offload["spec"]["spillOver"] = spill_over
    with pytest.raises(InvalidSpec, match=message):
        parse_offload(offload)


def _evaluate_cel(rule: str, value: dict[str, Any]) -> bool:
    """The CRD rules of the small CEL subset they use (`has`, field paths, `!`, `||`, `&&`, `==`),
    evaluated in Python against `value` as `self`: enough to check a rule's meaning here, where no
    apiserver runs (tests/integration/test_offload_crd.py checks it on a real one)."""

    def present(path: str) -> bool:
        node: Any = value
        for key in path.split("."):
            if not isinstance(node, dict) or key not in node:
                return False
            node = node[key]
        return True

    def field(path: str) -> Any:
        node: Any = value
        for key in path.split("."):
            node = node[key]
        return node

    expression = re.sub(r"has\(self\.([\w.]+)\)", r'present("\1")', rule)
    expression = re.sub(r"(?<![\w\"])self\.([\w.]+)", r'field("\1")', expression)
    expression = expression.replace("||", " or ").replace("&&", " and ").replace("!", " not ")
    expression = expression.replace(" not =", "!=")
    return bool(eval(expression, {"present": present, "field": field}))  # noqa: S307 (our own CRD's text)


@pytest.mark.parametrize("crd", ["manifests/crds/offload.yaml", "charts/vk-provider/crds/offload.yaml"])
def test_the_crd_refuses_a_pilot_light_on_a_spill_over_offload(crd: str) -> None:
    (version,) = yaml.safe_load((ROOT / crd).read_text())["spec"]["versions"]
    spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    (rule,) = [item for item in spec_schema["x-kubernetes-validations"] if "warmReplicas" in item["rule"]]
    assert "spillOver.minAwayReplicas" in " ".join(rule["message"].split())
    spill = {"maxHomeReplicas": 2}
    assert not _evaluate_cel(rule["rule"], {"away": {"warmReplicas": 1}, "spillOver": spill})
    assert _evaluate_cel(rule["rule"], {"away": {"warmReplicas": 0}, "spillOver": spill})
    assert _evaluate_cel(rule["rule"], {"away": {}, "spillOver": spill})
    assert _evaluate_cel(rule["rule"], {"away": {"warmReplicas": 3}})
    assert _evaluate_cel(rule["rule"], {"spillOver": spill})
    warm = spec_schema["properties"]["away"]["properties"]["warmReplicas"]
    assert (warm["minimum"], warm["maximum"]) == (0, MAX_AWAY_REPLICAS)
