"""The Offload CRD on the real plane: accepted, defaulted, validated, printed, with a status subresource."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.integration.conftest import Kubectl
from tests.integration.waiting import wait_for

GROUP = "offload.vk-provider.dev"
VERSION = "v1alpha1"
PLURAL = "offloads"
MERGE_PATCH = "application/merge-patch+json"

MINIMAL_SPEC: dict[str, Any] = {
    "home": {"deployment": "chat", "service": "chat"},
    "placement": "home",
    "route": {"hosts": ["chat.example.test"]},
}

SEVERE_DEFAULTS = {
    "enabled": True,
    "errorRatePercent": 50,
    "errorRateIncreasePercent": 50,
    "minRequests": 20,
    "windowSeconds": 5,
}


def offload(spec: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Offload",
        "metadata": {"name": name or f"ofl-{uuid.uuid4().hex[:8]}"},
        "spec": spec,
    }


def with_changes(**changes: Any) -> dict[str, Any]:
    """The minimal spec with top-level fields replaced (a value of None removes the field)."""
    spec = copy.deepcopy(MINIMAL_SPEC)
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


async def create(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    created: dict[str, Any] = await objects.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )
    return created


async def read(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    found: dict[str, Any] = await objects.get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return found


async def patch_status(api: client.ApiClient, namespace: str, name: str, status: dict[str, Any]) -> None:
    objects = client.CustomObjectsApi(api)
    await objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}, _content_type=MERGE_PATCH
    )


@pytest.mark.usefixtures("offload_crd")
async def test_a_minimal_offload_is_accepted_and_gets_the_strategy_and_away_defaults(
    kube_api: client.ApiClient, namespace: str
) -> None:
    created = await create(kube_api, namespace, offload(MINIMAL_SPEC, name="minimal"))
    stored = await read(kube_api, namespace, created["metadata"]["name"])
    spec = stored["spec"]
    assert spec["home"] == {"deployment": "chat", "service": "chat"}
    assert spec["paused"] is False
    assert spec["strategy"] == {
        "toAwaySteps": [50, 100],
        "toHomeSteps": [10, 25, 50, 75, 100],
        "stepIntervalSeconds": 30,
        "readyThresholdPercent": 100,
        "gates": {
            "maxErrorRatePercent": 1,
            "maxErrorRateIncreasePercent": 1,
            "compareWithOtherSide": True,
            "errorStatuses": ["5xx"],
            "maxP99LatencyMilliseconds": 2000,
            "minRequestsPerInterval": 10,
            "severe": SEVERE_DEFAULTS,
        },
        "failuresBeforeRollback": 3,
        "progressDeadlineSeconds": 600,
        "emergency": {"enabled": True, "graceSeconds": 30, "minServingPercent": 0},
    }
    assert spec["away"] == {
        "nodeSelector": {"node-restriction.kubernetes.io/vk-provider": "true"},
        "tolerations": [
            {"key": "vk-provider.dev/virtual-node", "operator": "Exists", "effect": "NoSchedule"}
        ],
    }
    assert "replicas" not in spec["away"]


@pytest.mark.usefixtures("offload_crd")
async def test_explicit_steps_and_a_path_prefix_route_are_kept_as_given(
    kube_api: client.ApiClient, namespace: str
) -> None:
    spec = with_changes(
        placement="away",
        route={"pathPrefix": "/v1/chat"},
        away={"replicas": 0, "annotations": {"provider.example/region": "eu"}},
        strategy={
            "toAwaySteps": [100],
            "toHomeSteps": [1, 2, 99, 100],
            "gates": {"maxErrorRatePercent": 0.5},
        },
    )
    created = await create(kube_api, namespace, offload(spec))
    stored = (await read(kube_api, namespace, created["metadata"]["name"]))["spec"]
    assert stored["strategy"]["toAwaySteps"] == [100]
    assert stored["strategy"]["toHomeSteps"] == [1, 2, 99, 100]
    assert stored["strategy"]["gates"] == {
        "maxErrorRatePercent": 0.5,
        "maxErrorRateIncreasePercent": 1,
        "compareWithOtherSide": True,
        "errorStatuses": ["5xx"],
        "maxP99LatencyMilliseconds": 2000,
        "minRequestsPerInterval": 10,
        "severe": SEVERE_DEFAULTS,
    }
    assert stored["away"]["replicas"] == 0
    assert stored["away"]["annotations"] == {"provider.example/region": "eu"}
    assert stored["route"] == {"pathPrefix": "/v1/chat"}


INVALID = [
    pytest.param(
        with_changes(strategy={"toHomeSteps": [10, 50, 25, 100]}),
        "steps must be strictly increasing",
        id="steps-not-increasing",
    ),
    pytest.param(
        with_changes(strategy={"toAwaySteps": [50, 50, 100]}),
        "steps must be strictly increasing",
        id="steps-repeated",
    ),
    pytest.param(
        with_changes(strategy={"toAwaySteps": [0, 100]}),
        "should be greater than or equal to 1",
        id="step-zero",
    ),
    pytest.param(
        with_changes(strategy={"toHomeSteps": [50, 101]}),
        "should be less than or equal to 100",
        id="step-101",
    ),
    pytest.param(
        with_changes(strategy={"toAwaySteps": [25, 50]}),
        "the last step must be 100",
        id="last-step-not-100",
    ),
    pytest.param(
        with_changes(strategy={"toAwaySteps": []}),
        "should have at least 1 items",
        id="no-steps",
    ),
    pytest.param(
        with_changes(placement="sideways"), 'Unsupported value: "sideways"', id="placement-sideways"
    ),
    pytest.param(with_changes(placement=None), "spec.placement: Required value", id="no-placement"),
    pytest.param(with_changes(route={}), "route needs at least one of hosts or pathPrefix", id="empty-route"),
    pytest.param(
        with_changes(route={"hosts": [], "pathPrefix": ""}),
        "route needs at least one of hosts or pathPrefix",
        id="blank-route",
    ),
    pytest.param(with_changes(route=None), "spec.route: Required value", id="no-route"),
    pytest.param(
        with_changes(home={"deployment": "chat"}), "spec.home.service: Required value", id="no-service"
    ),
    pytest.param(
        with_changes(strategy={"stepIntervalSeconds": 0}),
        "should be greater than or equal to 1",
        id="interval-zero",
    ),
    pytest.param(
        with_changes(away={"replicas": -1}),
        "should be greater than or equal to 0",
        id="negative-replicas",
    ),
    pytest.param(
        with_changes(away={"warmReplicas": 1}, spillOver={"maxHomeReplicas": 2}),
        "spec.away.warmReplicas does not apply to a spill-over Offload",
        id="pilot-light-spilling-over",
    ),
]


@pytest.mark.usefixtures("offload_crd")
@pytest.mark.parametrize(("spec", "message"), INVALID)
async def test_an_invalid_offload_is_rejected_with_a_message_saying_why(
    kube_api: client.ApiClient, namespace: str, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(client.ApiException) as rejected:
        await create(kube_api, namespace, offload(spec))
    assert rejected.value.status == 422
    assert message in json.loads(rejected.value.body or "{}")["message"]


@pytest.mark.usefixtures("offload_crd")
async def test_kubectl_lists_offloads_by_plural_and_short_name_with_the_printer_columns(
    kube_api: client.ApiClient, namespace: str, kubectl: Kubectl
) -> None:
    await create(kube_api, namespace, offload(with_changes(placement="away"), name="chat"))
    ready = {
        "type": "Ready",
        "status": "False",
        "reason": "RouteConflict",
        "message": "another Offload routes the same host",
        "lastTransitionTime": "2026-12-07T00:00:00Z",
    }
    await patch_status(
        kube_api,
        namespace,
        "chat",
        {"phase": "Shifting", "awayWeight": 50, "stepIndex": 0, "conditions": [ready]},
    )
    for resource in ("offloads", "ofl", "offload.offload.vk-provider.dev"):
        header, *rows = kubectl("get", resource, "-n", namespace).stdout.splitlines()
        assert header.split() == [
            "NAME",
            "PLACEMENT",
            "AWAY",
            "WEIGHT",
            "PHASE",
            "READY",
            "REASON",
            "DATA",
            "PLANE",
            "AGE",
        ]
        assert len(rows) == 1
        assert rows[0].split()[:7] == ["chat", "away", "50", "Shifting", "False", "RouteConflict", "builtin"]


@pytest.mark.usefixtures("offload_crd")
async def test_status_is_a_subresource_that_spec_updates_cannot_change(
    kube_api: client.ApiClient, namespace: str
) -> None:
    objects = client.CustomObjectsApi(kube_api)
    body = offload(MINIMAL_SPEC, name="subresource")
    body["status"] = {"phase": "Succeeded", "awayWeight": 100}
    await create(kube_api, namespace, body)
    assert "status" not in await read(kube_api, namespace, "subresource")

    condition = {
        "type": "Progressing",
        "status": "True",
        "reason": "StepHealthy",
        "message": "step 1 of 2 passed its gates",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 1,
    }
    status = {
        "phase": "Shifting",
        "awayWeight": 50,
        "stepIndex": 0,
        "lastGoodWeight": 0,
        "targetPlacement": "away",
        "observedGeneration": 1,
        "message": "shifting to away",
        "conditions": [condition],
    }
    await patch_status(kube_api, namespace, "subresource", status)
    after_status_patch = await read(kube_api, namespace, "subresource")
    assert after_status_patch["status"] == status
    assert after_status_patch["metadata"]["generation"] == 1

    await objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "subresource",
        {"spec": {"placement": "away", "paused": True}, "status": {"phase": "Failed", "awayWeight": 0}},
        _content_type=MERGE_PATCH,
    )
    after_spec_patch = await read(kube_api, namespace, "subresource")
    assert after_spec_patch["spec"]["placement"] == "away"
    assert after_spec_patch["spec"]["paused"] is True
    assert after_spec_patch["status"] == status
    assert after_spec_patch["metadata"]["generation"] == 2

    await patch_status(kube_api, namespace, "subresource", {"spec": {"placement": "home"}, "phase": "Paused"})
    after_second_status_patch = await read(kube_api, namespace, "subresource")
    assert after_second_status_patch["spec"]["placement"] == "away"
    assert after_second_status_patch["status"]["phase"] == "Paused"


@pytest.mark.usefixtures("offload_crd")
async def test_a_status_outside_its_schema_is_refused(kube_api: client.ApiClient, namespace: str) -> None:
    await create(kube_api, namespace, offload(MINIMAL_SPEC, name="bad-status"))
    for status in ({"awayWeight": 101}, {"phase": "Sideways"}):
        with pytest.raises(client.ApiException) as rejected:
            await patch_status(kube_api, namespace, "bad-status", status)
        assert rejected.value.status == 422


@pytest.mark.usefixtures("offload_crd")
async def test_kubectl_explain_describes_the_fields(kubectl: Kubectl) -> None:
    """The schema's descriptions reach users through the apiserver's OpenAPI, as `kubectl explain`
    shows them (every field has one: tests/unit/docs/test_crd_reference.py)."""

    async def explained() -> str:
        # A CRD just established is published in the OpenAPI a moment later: "not yet" until then.
        return " ".join(kubectl("explain", "offloads.spec.strategy.gates").stdout.split())

    text = await wait_for(explained, timeout_seconds=60, what="kubectl explain offloads.spec.strategy.gates")
    assert "The health gates: what the receiving side's traffic" in text, text
    assert "maxErrorRatePercent" in text, text
