"""A pilot light spares a training gang the away side's cold start; a warm-up nobody uses is scaled back.

On the real plane, `test_policy`'s rig with one home GPU node of 2 GPUs, both held by `chat`'s 2 home
replicas, and chat's away side on the RunPod stand-in with its realistic cold start shortened to 30 s
(`training_wait.COLD_START`): a pod is PROVISIONING, then STARTING, then RUNNING while its model loads
and the proxy answers 502, and the node calls it ready only once its readiness probe answers through
the proxy. An open-loop load goes through the router throughout. The policy's early warm-up is off:
the pilot light alone is under test.

1. Warm-up unused: with `spec.away.replicas: 2` and `warmReplicas: 1`, a warm-until set a little ahead
   (as a person may) scales the away side to 2 at weight 0; it passes without a flip, so the away side
   is scaled back to the pilot light's 1, and a WarmUpExpired Event says so. (It runs during the pilot
   light's own cold start, so it costs the story no time of its own.)
2. Pilot light: with the away count then 1, the pilot light's replica is the whole away side, ready
   while home keeps every request. A training Job needing both home GPUs makes the policy flip chat
   away: Preparing finds its replica ready, the flip only shifts traffic, and the gang has all its pods
   bound within the policy's confirmation + the shift + the home pods' leaving + 10 s, far below the
   cold start; no new RunPod pod, no failed request, and the policy said what the gang waited for.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.integration.conftest import POLICY_GROUP
from tests.integration.test_policy import (
    FAST_TIMING,
    PolicyRig,
    host_of,
    policy_rig,
    training_job,
)
from tests.integration.training_wait import (
    COLD_START_SECONDS,
    SHIFT_SECONDS,
    cold_runpod,  # noqa: F401 - a fixture
    preparing_seconds,
    watch_gang,
)
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import failures
from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.kit.kube import MERGE_PATCH
from vk_provider.kit.timestamps import format_timestamp
from vk_provider.offload.names import WARM_UNTIL_ANNOTATION, WARMED_BY_ANNOTATION
from vk_provider.policy.names import FLIPPED_BY_ANNOTATION

pytestmark = [POLICY_GROUP, pytest.mark.usefixtures("policy_crd")]

WARM_UP_SECONDS = 20
"""The unused warm-up's length: less than the cold start, so it ends while the pilot light warms."""
SLACK_SECONDS = 10


async def warm(rig: PolicyRig) -> dict[str, Any]:
    """chat's `status.warm` as the controller last wrote it ({} while absent)."""
    return dict(((await rig.offload("chat")).get("status") or {}).get("warm") or {})


async def away_replicas(rig: PolicyRig) -> int:
    away = await rig.api.get(f"/apis/apps/v1/namespaces/{rig.namespace}/deployments/chat-away")
    return int(away["spec"]["replicas"])


async def patch_chat(rig: PolicyRig, body: dict[str, Any]) -> None:
    await rig.api.patch(rig.offload_path("chat"), body, content_type=MERGE_PATCH)


async def test_a_pilot_light_spares_the_training_gang_the_cold_start_and_an_unused_warm_up_is_scaled_back(
    cold_runpod: FakeRunPod,  # noqa: F811 - the fixture imported above; before rig_args, to stop after the nodes
    rig_args: dict[str, Any],
) -> None:
    async with (
        policy_rig(services={"chat": 2}, pool_gpus=(2,), runpod=cold_runpod, **rig_args) as rig,
        rig.load(host_of("chat")) as generator,
    ):
        await rig.create_policy(warmUp={"enabled": False})
        until = format_timestamp(datetime.now(UTC) + timedelta(seconds=WARM_UP_SECONDS))
        lit = time.monotonic()
        await patch_chat(
            rig,
            {
                "metadata": {
                    "annotations": {WARM_UNTIL_ANNOTATION: until, WARMED_BY_ANNOTATION: "test/warm-away"}
                },
                "spec": {"away": {"replicas": 2, "warmReplicas": 1}},
            },
        )

        async def warming_up() -> bool:
            status = await warm(rig)
            return (
                status.get("reason") == "WarmUp"
                and status.get("replicas") == 2
                and await away_replicas(rig) == 2
            )

        await wait_for(warming_up, timeout_seconds=30, what=lambda: f"the warm-up:\n{rig.log()}")
        assert await rig.events("WarmUpStarted", "Offload"), "no WarmUpStarted Event"

        async def scaled_back() -> bool:
            status = await warm(rig)
            return status.get("reason") == "PilotLight" and await away_replicas(rig) == 1

        await wait_for(
            scaled_back,
            timeout_seconds=WARM_UP_SECONDS + 30,
            what=lambda: f"the warm-up to expire:\n{rig.log()}",
        )
        expired = await wait_for(
            lambda: rig.events("WarmUpExpired", "Offload"), timeout_seconds=30, what="WarmUpExpired"
        )
        assert len(expired) == 1, expired
        assert "passed without a flip" in expired[0]["message"]
        # The away count now the pilot light's: a flip away wants exactly the replica kept warm.
        await patch_chat(rig, {"spec": {"away": {"replicas": 1}}})

        async def pilot_light_ready() -> list[str] | None:
            pods = [pod["id"] for pod in await cold_runpod.control.pods()]
            status = await warm(rig)
            return pods if status.get("ready") == 1 and len(pods) == 1 else None

        runpod_pods = await wait_for(
            pilot_light_ready,
            timeout_seconds=COLD_START_SECONDS + 60,
            what=lambda: f"the pilot light ready, alone on RunPod:\n{rig.log()}",
        )
        warmed_in = time.monotonic() - lit
        assert (await rig.offload("chat"))["status"]["awayWeight"] == 0
        assert rig.away is not None
        away_node = f"{rig.away.node_name}/"
        served_away = [o for o in generator.outcomes if (o.served_by or "").startswith(away_node)]
        assert not served_away, served_away[:5]  # warm at weight 0: the pilot light got no request
        assert generator.outcomes, "the load served nothing before the Job"

        created = time.monotonic()
        await rig.api.create(
            f"/apis/batch/v1/namespaces/{rig.namespace}/jobs", training_job(rig, "pretrain", 2, 60)
        )
        gang = await watch_gang(
            rig, "pretrain", 2, "chat", created=created, timeout_seconds=COLD_START_SECONDS + 120
        )
        offload = await rig.offload("chat")
        assert offload["spec"]["placement"] == "away"
        assert offload["metadata"]["annotations"][FLIPPED_BY_ANNOTATION] == f"policy/{rig.policy_name}"
        preparing = await preparing_seconds(rig, "chat")
        # No cold start in it: the policy confirms, traffic shifts, home pods leave, the scheduler binds.
        bound = FAST_TIMING["flipOutAfterSeconds"] + SHIFT_SECONDS + gang.home_leaving_seconds + SLACK_SECONDS
        assert gang.seconds <= bound, (gang, preparing, rig.log())
        assert gang.seconds < COLD_START_SECONDS, gang
        assert preparing < 5, preparing
        assert gang.stages, "the policy never reported what the gang waited for"
        assert {"ShiftingTraffic", "PodsLeaving"} & set(gang.stages), gang.stages
        assert "NoCandidate" not in gang.stages, f"told no Offload would move while one did: {gang.stages}"
        assert [pod["id"] for pod in await cold_runpod.control.pods()] == runpod_pods  # the flip made none
        await generator.stop()
        failed = failures(generator.outcomes)
        assert not failed, [(o.kind, o.status, o.failure) for o in failed[:10]]
        # Shown with `pytest -rP`: the measured times, for the record.
        print(
            f"pilot light ready {warmed_in:.0f} s after it was asked for "
            f"(cold start {COLD_START_SECONDS:.0f} s); "
            f"training Job created -> all pods bound: {gang.seconds:.1f} s (Preparing {preparing:.0f} s, "
            f"shift {SHIFT_SECONDS} s, home pods leaving {gang.home_leaving_seconds:.1f} s; "
            f"reported {', '.join(gang.stages)}); {len(generator.outcomes)} requests, 0 failed"
        )
