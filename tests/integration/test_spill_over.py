"""Spill-over on the real control plane: an Offload scaled through its `scale` subresource runs home
as far as the home GPUs hold it and the overflow away, with traffic split by ready capacity; a move
away (what the training policy does) takes the whole service and the way back resumes spilling over.
Load runs throughout; every request is accounted for.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.migration_rig import API, NAME, Rig, RigFor
from tests.integration.test_migration import flip, load
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import Outcome, failures, share_by, window
from vk_provider.kit.kube import MERGE_PATCH, KubeApiError
from vk_provider.offload.names import SERVES_LABEL

pytestmark = pytest.mark.usefixtures("traffic_rbac")

STRATEGY = {
    "stepIntervalSeconds": 3,
    "gates": {"minRequestsPerInterval": 20, "maxErrorRatePercent": 0.5},
    "progressDeadlineSeconds": 180,
}
SPILL = {"maxHomeReplicas": 2, "maxAwayReplicas": 3}
RATE = 60
SHARE_TOLERANCE_POINTS = 12


MEASURED_REQUESTS = 300
"""Requests sent at the 2 + 2 split to measure it by."""


async def served_since(outcomes: list[Outcome], start: float, count: int) -> bool:
    return len(window(outcomes, start, time.monotonic())) >= count


HPA = {
    "metadata": {"name": NAME},
    "spec": {
        "scaleTargetRef": {"apiVersion": "offload.vk-provider.dev/v1alpha1", "kind": "Offload", "name": NAME},
        "minReplicas": 2,
        "maxReplicas": 5,
        "metrics": [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
            }
        ],
    },
}


async def autoscaler_condition(rig: Rig, kind: str) -> dict[str, Any] | None:
    hpa = await rig.api.get(
        f"/apis/autoscaling/v2/namespaces/{rig.namespace}/horizontalpodautoscalers/{NAME}"
    )
    conditions = (hpa.get("status") or {}).get("conditions") or []
    return next((condition for condition in conditions if condition.get("type") == kind), None)


async def cordon(rig: Rig, *, unschedulable: bool) -> None:
    await rig.api.patch(
        f"/api/v1/nodes/{rig.home.node_name}",
        {"spec": {"unschedulable": unschedulable}},
        content_type=MERGE_PATCH,
    )


def scale_path(rig: Rig) -> str:
    return f"{API}/namespaces/{rig.namespace}/offloads/{NAME}/scale"


async def scale(rig: Rig, replicas: int) -> None:
    """What `kubectl scale` and a HorizontalPodAutoscaler do: write the scale subresource."""
    await rig.api.patch(scale_path(rig), {"spec": {"replicas": replicas}}, content_type=MERGE_PATCH)


async def settled(
    rig: Rig, *, home: int, away: int, weight: int, timeout_seconds: float = 180
) -> dict[str, Any]:
    """Wait until the status shows these ready replicas and weight, and the router applies the weight."""

    async def reached() -> dict[str, Any] | None:
        if not rig.controller.alive():
            raise AssertionError(f"the controller exited:\n{rig.controller.log_tail()}")
        status: dict[str, Any] = (await rig.offload()).get("status") or {}
        spill = status.get("spillOver") or {}
        seen = (spill.get("homeReadyReplicas"), spill.get("awayReadyReplicas"), status.get("awayWeight"))
        if seen == (home, away, weight) and spill.get("awayReplicas") == away:
            return status if await rig.applied_weight() == weight else None
        return None

    return await wait_for(
        reached,
        timeout_seconds=timeout_seconds,
        what=f"{home} home and {away} away replicas at away weight {weight}; controller log:\n"
        f"{rig.controller.log_tail(30)}",
    )


async def refusal(rig: Rig, path: str, body: dict[str, Any]) -> str:
    """The apiserver's message refusing the patch (a dry run); it fails the test if it was accepted."""
    with pytest.raises(KubeApiError) as refused:
        await rig.api.request("PATCH", path, body=body, content_type=MERGE_PATCH, query={"dryRun": "All"})
    assert refused.value.status == 422, refused.value
    return refused.value.message


async def test_an_offload_spills_over_by_its_scale_and_moves_away_whole_for_training(rig_for: RigFor) -> None:
    async with rig_for(STRATEGY) as rig, load(rig, rate=RATE) as generator:
        offload_path = f"{API}/namespaces/{rig.namespace}/offloads/{NAME}"
        # An autoscaler on an Offload that does not spill over cannot read its scale (there is no
        # spec.replicas to read), and says so.
        autoscaler = await rig.api.create(
            f"/apis/autoscaling/v2/namespaces/{rig.namespace}/horizontalpodautoscalers", HPA
        )
        assert autoscaler["metadata"]["name"] == NAME

        async def unable_to_scale() -> dict[str, Any] | None:
            condition = await autoscaler_condition(rig, "AbleToScale")
            # Until kube-controller-manager's discovery knows the CRD, the message says no more than that.
            return condition if condition and "replicas" in condition.get("message", "") else None

        refused = await wait_for(
            unable_to_scale, timeout_seconds=120, what="the autoscaler to refuse the Offload"
        )
        assert (refused["status"], refused["reason"]) == ("False", "FailedGetScale"), refused
        print(f"the autoscaler on an Offload without spec.spillOver: {refused['message']}")
        await rig.api.delete(
            f"/apis/autoscaling/v2/namespaces/{rig.namespace}/horizontalpodautoscalers/{NAME}"
        )
        await rig.patch_offload({"spec": {"spillOver": SPILL, "replicas": 2}})
        first = await settled(rig, home=2, away=0, weight=0)
        assert first["selector"] == f"{SERVES_LABEL}={NAME}"
        assert first["replicas"] == 2
        scale_view = await rig.api.get(scale_path(rig))
        assert scale_view["status"] == {"replicas": 2, "selector": f"{SERVES_LABEL}={NAME}"}
        labelled = await rig.api.get(
            f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": first["selector"]}
        )
        assert len(labelled["items"]) == 2  # the home pods, labelled by the controller

        # Out: 2 more replicas than home holds run away and take half the traffic.
        await scale(rig, 4)
        half = await settled(rig, home=2, away=2, weight=50)
        assert half["replicas"] == 4
        at_half = time.monotonic()
        await wait_for(
            lambda: served_since(generator.outcomes, at_half, MEASURED_REQUESTS),
            timeout_seconds=60,
            what=f"{MEASURED_REQUESTS} requests at 2 home + 2 away",
        )
        at_half_measured = time.monotonic()
        await scale(rig, 5)
        await settled(rig, home=2, away=3, weight=60)
        labelled = await rig.api.get(
            f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": half["selector"]}
        )
        assert len(labelled["items"]) == 5  # what an autoscaler counts: both sides
        assert "above what the Offload may run" in await refusal(
            rig, scale_path(rig), {"spec": {"replicas": 6}}
        )

        # Down: the away side shrinks first, its weight lowered before a replica goes.
        await scale(rig, 3)
        await settled(rig, home=2, away=1, weight=33)
        assert (await rig.deployment(NAME))["spec"]["replicas"] == 2

        # Training takes the home GPUs: the whole service moves away, then back to spilling over.
        out = await flip(rig, "away")
        assert (out["status"]["phase"], out["status"]["awayWeight"]) == ("Succeeded", 100), out["status"]
        assert (await rig.deployment(NAME))["spec"]["replicas"] == 0
        assert (await rig.deployment(f"{NAME}-away"))["spec"]["replicas"] == 3
        back = await flip(rig, "home")
        assert back["status"]["phase"] == "Succeeded", back["status"]
        await settled(rig, home=2, away=1, weight=33)

        # Peak over: the away side goes first, and the service ends home only.
        await scale(rig, 2)
        await settled(rig, home=2, away=0, weight=0)

        # Home may hold 3, but the scheduler cannot place the third there (the node is cordoned): it
        # runs away until a home one is ready again, and only then does the away one go.
        await rig.patch_offload({"spec": {"spillOver": {"maxHomeReplicas": 3}}})
        await cordon(rig, unschedulable=True)
        await scale(rig, 3)
        short = await settled(rig, home=2, away=1, weight=33)
        assert (await rig.deployment(NAME))["spec"]["replicas"] == 3, short
        await cordon(rig, unschedulable=False)
        await settled(rig, home=3, away=0, weight=0)
        await generator.stop()
        changed = [event["message"] for event in await rig.events("SplitChanged")]
        assert (await rig.deployment(f"{NAME}-away"))["spec"]["replicas"] == 0

        # Bad input is refused by the CRD with a message that says what to set.
        plain = {"spec": {"spillOver": None, "replicas": 3}}
        assert "set spec.spillOver" in await refusal(rig, offload_path, plain)
        negative = {"spec": {"spillOver": {"maxHomeReplicas": 2, "awayWeightFactor": -1}}}
        assert "awayWeightFactor" in await refusal(rig, offload_path, negative)

    outcomes = generator.outcomes
    assert not failures(outcomes), [(o.status, o.failure) for o in failures(outcomes)[:10]]
    served = window(outcomes, at_half, at_half_measured)
    sides = share_by(served, rig.side_of)
    away_share = 100.0 * sides["away"] / max(1, len(served))
    assert abs(away_share - 50) <= SHARE_TOLERANCE_POINTS, (away_share, len(served))
    print(f"{len(outcomes)} requests, 0 failed; {away_share:.0f}% away at 2 + 2; splits: {changed}")
