"""Home GPUs that turn unhealthy: never served from by a move home, replaced make before break at home,
and left for a provider when no healthy home GPU can take their place.

On the real plane, under load through the real router, with the policy and the migration controller
in one process (the policy rig of `test_policy`): a home pool of two `local` nodes of 4 GPUs, the
service `chat` of 2 replicas of 1 GPU, whose pods become Ready 4 s after they start (a readiness
probe's initial delay, as a server loading its model). A node is made unhealthy the way NVSentinel or
an operator would mark it, with a taint of its own (`example.com/gpu-error`) that the policy reads as
`ExternalTaint` and answers with its unhealthy taint; the moment that taint is seen is when the clock
starts. Each response names the node and pod that served it (`X-Served-By`), so the test counts what
the unhealthy node served after it was tainted.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.conftest import POLICY_GROUP
from tests.integration.test_policy import (
    PolicyRig,
    host_of,
    policy_rig,
    wait_for_placement,
)
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, Outcome, failures
from vk_provider.kit.kube import MERGE_PATCH, RawObject

pytestmark = [POLICY_GROUP, pytest.mark.usefixtures("policy_crd")]

EXTERNAL = "example.com/gpu-error"
UNHEALTHY = "gpu.vk-provider.dev/unhealthy"
READY_AFTER_SECONDS = 4
STEPS_HOME = {"toHomeSteps": [25, 100], "toAwaySteps": [100], "stepIntervalSeconds": 8}
"""Home by away weight 75 then 0, each weight held 8 s: long enough to turn a node hot at 75."""
QUICK_STEPS = {**STEPS_HOME, "stepIntervalSeconds": 2}
"""The same steps held 2 s: for the moves in which no node turns unhealthy mid-step (each move
waits out its steps, and the test makes six)."""
BOUND_SECONDS = 30.0
"""The longest an unhealthy node may serve after its unhealthy taint appears (generous: measured
figures are printed and in the note)."""


async def chat_pods(rig: PolicyRig) -> list[RawObject]:
    listing = await rig.api.get(
        f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": "app=chat"}
    )
    return [pod for pod in listing["items"] if not pod["metadata"].get("deletionTimestamp")]


async def set_external_taint(rig: PolicyRig, node: str, present: bool) -> None:
    taints = [t for t in (await rig.node(node))["spec"].get("taints") or () if t["key"] != EXTERNAL]
    if present:
        taints.append({"key": EXTERNAL, "value": "xid-79", "effect": "NoSchedule"})
    await rig.api.patch(f"/api/v1/nodes/{node}", {"spec": {"taints": taints}}, content_type=MERGE_PATCH)


async def policy_tainted(rig: PolicyRig, node: str) -> bool:
    return any(t["key"] == UNHEALTHY for t in (await rig.node(node))["spec"].get("taints") or ())


async def turn_unhealthy(rig: PolicyRig, node: str) -> float:
    """Mark the node failed; return when (monotonic) the policy's unhealthy taint was seen on it."""
    await set_external_taint(rig, node, True)
    await wait_for(
        lambda: policy_tainted(rig, node),
        timeout_seconds=60,
        what=lambda: f"the unhealthy taint on {node}:\n{rig.log()}",
    )
    return time.monotonic()


async def turn_healthy(rig: PolicyRig, node: str) -> None:
    await set_external_taint(rig, node, False)

    async def lifted() -> bool:
        return not await policy_tainted(rig, node)

    await wait_for(
        lifted, timeout_seconds=60, what=lambda: f"the unhealthy taint lifted from {node}:\n{rig.log()}"
    )


async def set_strategy(rig: PolicyRig, strategy: dict[str, Any]) -> None:
    """The strategy of chat's next migration (one under way keeps the one it started with)."""
    await rig.api.patch(rig.offload_path("chat"), {"spec": {"strategy": strategy}}, content_type=MERGE_PATCH)


async def flip(rig: PolicyRig, placement: str) -> None:
    await rig.api.patch(
        rig.offload_path("chat"), {"spec": {"placement": placement}}, content_type=MERGE_PATCH
    )


async def wait_for_phase(rig: PolicyRig, predicate: Any, what: str) -> RawObject:
    async def matching() -> RawObject | None:
        offload = await rig.offload("chat")
        return offload if predicate(offload.get("status") or {}) else None

    return await wait_for(matching, timeout_seconds=120, what=lambda: f"{what}:\n{rig.log()}")


async def wait_for_home_on(rig: PolicyRig, nodes: set[str]) -> None:
    """Both replicas Ready, on these nodes only, and nothing else of chat left anywhere."""

    async def settled() -> bool:
        pods = await chat_pods(rig)
        everything = (
            await rig.api.get(f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": "app=chat"})
        )["items"]
        ready = [
            pod
            for pod in pods
            if any(
                c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or ()
            )
        ]
        return len(everything) == 2 and len(ready) == 2 and {p["spec"]["nodeName"] for p in pods} <= nodes

    await wait_for(
        settled, timeout_seconds=120, what=lambda: f"chat's 2 home pods Ready on {nodes}:\n{rig.log()}"
    )


def served_from(outcomes: list[Outcome], node: str, after: float) -> list[Outcome]:
    """Requests the node's pods answered that were sent after `after` (monotonic)."""
    return [
        outcome
        for outcome in outcomes
        if outcome.ok and outcome.start >= after and (outcome.served_by or "").startswith(f"{node}/")
    ]


def last_served_after(generator: LoadGenerator, node: str, tainted_at: float) -> float:
    """Seconds from the taint to the start of the last request the node answered (0: none after it)."""
    late = served_from(generator.outcomes, node, tainted_at)
    return max((outcome.start - tainted_at for outcome in late), default=0.0)


async def test_unhealthy_home_gpus_never_serve_a_move_home_and_are_replaced_or_left_for_a_provider(
    rig_args: dict[str, Any],
) -> None:
    async with (
        policy_rig(services={"chat": 2}, ready_after_seconds=READY_AFTER_SECONDS, **rig_args) as rig,
        rig.load(host_of("chat"), rate=30) as generator,
    ):
        await set_strategy(rig, QUICK_STEPS)
        await rig.create_policy(health={"externalTaintPrefixes": ["example.com/"], "healthyForSeconds": 2})
        pool = {node.node_name for node in rig.pool}
        measured: dict[str, float] = {}

        # 1. Serving at home: a node under a replica turns unhealthy; it is replaced on the other
        #    node first, and only then removed.
        hot = sorted(pod["spec"]["nodeName"] for pod in await chat_pods(rig))[0]
        tainted_at = await turn_unhealthy(rig, hot)
        await wait_for_home_on(rig, pool - {hot})

        async def replaced() -> bool:
            # The pass that sees the last stranded pod gone writes the condition: a moment after the
            # pods have settled, not with them.
            offload = await rig.offload("chat")
            healthy = next(c for c in offload["status"]["conditions"] if c["type"] == "HomeHealthy")
            return (healthy["status"], healthy["reason"]) == ("True", "Replaced")

        await wait_for(replaced, timeout_seconds=30, what=lambda: f"HomeHealthy True, Replaced:\n{rig.log()}")
        for reason in ("ReplacingUnhealthyHome", "UnhealthyHomeReplaced"):
            await wait_for(
                lambda r=reason: rig.events(r, "Offload"), timeout_seconds=30, what=f"a {reason} Event"
            )
        measured["home"] = last_served_after(generator, hot, tainted_at)
        await turn_healthy(rig, hot)

        # 2. Moving home, still Preparing (the home pods bound, not yet Ready): the node of one of them
        #    turns unhealthy. Away weight stays 100 until that pod is replaced.
        await flip(rig, "away")
        await wait_for_placement(rig, "chat", "away")
        await flip(rig, "home")

        async def bound_while_preparing() -> list[RawObject] | None:
            status = (await rig.offload("chat")).get("status") or {}
            pods = [pod for pod in await chat_pods(rig) if pod["spec"].get("nodeName") in pool]
            return pods if status.get("phase") == "Preparing" and pods else None

        pods = await wait_for(
            bound_while_preparing, timeout_seconds=60, what="a home pod bound while Preparing"
        )
        hot = sorted(pod["spec"]["nodeName"] for pod in pods)[0]
        tainted_at = await turn_unhealthy(rig, hot)
        await wait_for_placement(rig, "chat", "home")
        await wait_for_home_on(rig, pool - {hot})
        measured["preparing"] = last_served_after(generator, hot, tainted_at)
        await turn_healthy(rig, hot)

        # 3. Moving home at away weight 75: the home side serves a quarter of the requests when one of
        #    its nodes turns unhealthy. The weight goes back to 100 at once, the pod is replaced, and
        #    the move home resumes.
        await flip(rig, "away")
        await wait_for_placement(rig, "chat", "away")
        await set_strategy(rig, STEPS_HOME)
        await flip(rig, "home")
        await wait_for_phase(
            rig, lambda s: s.get("phase") == "Shifting" and s.get("awayWeight") == 75, "away weight 75"
        )
        hot = sorted(pod["spec"]["nodeName"] for pod in await chat_pods(rig))[0]
        weight_75_at = time.monotonic()

        async def serving_from_hot() -> list[Outcome]:
            return served_from(generator.outcomes, hot, weight_75_at)

        # So that what it serves after its taint is measured on a node that really served before it.
        await wait_for(serving_from_hot, timeout_seconds=30, what=f"{hot} serving at away weight 75")
        marked_at = time.monotonic()
        tainted_at = await turn_unhealthy(rig, hot)
        await wait_for_placement(rig, "chat", "home")
        await wait_for_home_on(rig, pool - {hot})
        await wait_for(
            lambda: rig.events("UnhealthyHome", "Offload"), timeout_seconds=30, what="UnhealthyHome"
        )
        measured["weight 75"] = last_served_after(generator, hot, tainted_at)
        # From the external signal rather than the policy's taint: the policy's pass comes first.
        measured["weight 75, from the node's marking"] = last_served_after(generator, hot, marked_at)

        # 4. Both home nodes unhealthy: no healthy GPU can replace the replicas, so the policy moves the
        #    service away; once the nodes are healthy again it comes home.
        await set_strategy(rig, QUICK_STEPS)
        other = sorted(pool - {hot})[0]
        await set_external_taint(rig, other, True)
        await wait_for(
            lambda: policy_tainted(rig, other), timeout_seconds=60, what=f"the unhealthy taint on {other}"
        )
        both_at = time.monotonic()
        await wait_for_placement(rig, "chat", "away")

        async def evacuated() -> list[RawObject]:
            # On the policy: the Offload's own Events may be past client-go's per-object budget (25)
            # after the moves of this test.
            started = await rig.events("FlipOutStarted", "OffloadPolicy")
            return [event for event in started if event["message"].startswith("UnhealthyHome:")]

        # Events go out in the background, a moment after the flip they report.
        await wait_for(evacuated, timeout_seconds=30, what="a FlipOutStarted Event for UnhealthyHome")
        measured["evacuated"] = max(last_served_after(generator, node, both_at) for node in pool)
        await turn_healthy(rig, hot)
        await turn_healthy(rig, other)
        await wait_for_placement(rig, "chat", "home")

        await generator.stop()
        lost = failures(generator.outcomes)
        print(
            f"{len(generator.outcomes)} requests, {len(lost)} failed; the unhealthy node served its last "
            "request this long after its unhealthy taint: "
            + ", ".join(f"{where} {seconds:.1f} s" for where, seconds in measured.items())
        )
        assert not lost, lost[:5]
        # While Preparing, traffic stays away: the unhealthy node served nothing at all.
        assert measured["preparing"] == 0.0
        assert all(seconds <= BOUND_SECONDS for seconds in measured.values()), measured
