"""Early warm-up on the real control plane: a training gang short of GPUs gets the away side of the
Offload the flip will move warmed at once, so when the flip comes it only shifts traffic, and the gang
does not wait for the away side's cold start.

`test_policy`'s rig with one home GPU node of 2 GPUs, both held by `chat`'s 2 home replicas; chat's
away side (1 replica) on the RunPod stand-in with its realistic cold start shortened to 30 s
(`training_wait.COLD_START`); no pilot light; an open-loop load through the router throughout.
`flipOutAfterSeconds` is 40 s, longer than the cold start: the policy waits that long before it flips
for a gang, and warms the away side meanwhile (a shortfall foreseen, not yet due). The gang's wait is
then the confirmation, the shift, the home pods' leaving and the scheduler's binding, with no cold
start added; the flip's Preparing finds the away replica ready; no request fails.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from tests.integration.conftest import POLICY_GROUP
from tests.integration.test_policy import (
    FAST_TIMING,
    host_of,
    job_pods,
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
from vk_provider.kit.kube import MERGE_PATCH, RawObject
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.offload.names import WARM_UNTIL_ANNOTATION, WARMED_BY_ANNOTATION
from vk_provider.policy.actuate import POLICY_FLIPS_ANNOTATION

pytestmark = [POLICY_GROUP, pytest.mark.usefixtures("policy_crd")]

FLIP_OUT_AFTER_SECONDS = 40
"""Longer than the cold start (30 s), with room for a loaded machine: the warm-up has that long."""
HOLD_SECONDS = 120
SLACK_SECONDS = 10


async def test_a_gang_short_of_gpus_warms_the_away_side_so_the_flip_only_shifts_traffic(
    cold_runpod: FakeRunPod,  # noqa: F811 - the fixture imported above; before rig_args, to stop after the nodes
    rig_args: dict[str, Any],
) -> None:
    async with (
        policy_rig(services={"chat": 2}, pool_gpus=(2,), runpod=cold_runpod, **rig_args) as rig,
        rig.load(host_of("chat")) as generator,
    ):
        await rig.api.patch(
            rig.offload_path("chat"), {"spec": {"away": {"replicas": 1}}}, content_type=MERGE_PATCH
        )
        timing = {**FAST_TIMING, "flipOutAfterSeconds": FLIP_OUT_AFTER_SECONDS, "flipBackAfterSeconds": 60}
        await rig.create_policy(timing=timing, warmUp={"holdSeconds": HOLD_SECONDS})
        created = time.monotonic()
        # 2 GPUs wanted, none free: chat must leave before any of the gang can be placed.
        await rig.api.create(
            f"/apis/batch/v1/namespaces/{rig.namespace}/jobs", training_job(rig, "pretrain", 2, 60)
        )

        async def warmed() -> RawObject:
            offload = await rig.offload("chat")
            return offload if WARM_UNTIL_ANNOTATION in (offload["metadata"].get("annotations") or {}) else {}

        offload = await wait_for(warmed, timeout_seconds=30, what=lambda: f"chat's warm-up:\n{rig.log()}")
        warmed_after = time.monotonic() - created
        annotations = offload["metadata"]["annotations"]
        assert warmed_after < FLIP_OUT_AFTER_SECONDS / 2, warmed_after
        assert offload["spec"]["placement"] == "home"  # not flipped: warmed ahead of it
        assert POLICY_FLIPS_ANNOTATION not in annotations
        assert annotations[WARMED_BY_ANNOTATION] == f"policy/{rig.policy_name}"

        async def reported() -> dict[str, Any]:
            status = (await rig.policy()).get("status") or {}
            gangs = (status.get("demand") or {}).get("gangs") or ()
            gang: dict[str, Any] = next((g for g in gangs if g.get("name") == "pretrain"), {})
            return gang if gang.get("waitingFor") else {}

        gang = await wait_for(
            reported, timeout_seconds=30, what=lambda: f"the gang's wait reported:\n{rig.log()}"
        )
        # Still within flipOutAfterSeconds: the policy waits out noise while the away side warms.
        assert gang["waitingFor"] == "Confirming", gang
        assert gang["unplacedGpus"] == 2, gang
        assert 0 <= gang["waitingSeconds"] < FLIP_OUT_AFTER_SECONDS, gang
        status = (await rig.policy())["status"]
        warm = [d for d in status.get("decisions") or () if d["action"] == "Warm"]
        assert [d["offloads"] for d in warm] == [[f"{rig.namespace}/chat"]], status.get("decisions")
        assert warm[0]["reason"] == "ForeseenDemand"
        decided = parse_timestamp(warm[0]["time"])
        assert decided is not None
        assert parse_timestamp(annotations[WARM_UNTIL_ANNOTATION]) == decided + timedelta(
            seconds=HOLD_SECONDS
        )
        await wait_for(
            lambda: rig.events("WarmUpRequested", "OffloadPolicy"), timeout_seconds=30, what="WarmUpRequested"
        )
        offload_events = await rig.events("WarmUpRequested", "Offload")
        assert [e["involvedObject"]["name"] for e in offload_events] == ["chat"]
        assert not [pod for pod in await job_pods(rig, "pretrain") if pod["spec"].get("nodeName")]

        wait = await watch_gang(
            rig,
            "pretrain",
            2,
            "chat",
            created=created,
            timeout_seconds=FLIP_OUT_AFTER_SECONDS + COLD_START_SECONDS + 120,
        )
        preparing = await preparing_seconds(rig, "chat")
        # The warm-up was ready before the flip, so the flip added no cold start to the wait.
        assert preparing < 5, (preparing, rig.log())
        bound = FLIP_OUT_AFTER_SECONDS + SHIFT_SECONDS + wait.home_leaving_seconds + SLACK_SECONDS
        assert wait.seconds <= bound, (wait, preparing, rig.log())
        assert "Confirming" in wait.stages, wait.stages
        assert {"ShiftingTraffic", "PodsLeaving"} & set(wait.stages), wait.stages
        assert "NoCandidate" not in wait.stages, f"told no Offload would move while one did: {wait.stages}"
        assert len(await cold_runpod.control.pods()) == 1  # the warm-up's replica is the one the flip used
        await generator.stop()
        failed = failures(generator.outcomes)
        assert not failed, [(o.kind, o.status, o.failure) for o in failed[:10]]
        print(
            f"training Job created -> chat's away side asked to warm: {warmed_after:.1f} s; "
            f"-> all pods bound: {wait.seconds:.1f} s (flip after {FLIP_OUT_AFTER_SECONDS} s, Preparing "
            f"{preparing:.0f} s, shift {SHIFT_SECONDS} s, "
            f"home pods leaving {wait.home_leaving_seconds:.1f} s, "
            f"cold start {COLD_START_SECONDS:.0f} s; reported {', '.join(wait.stages)}); "
            f"{len(generator.outcomes)} requests, 0 failed"
        )
