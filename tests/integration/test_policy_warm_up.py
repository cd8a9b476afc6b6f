"""Early warm-up on the real control plane: a training gang short of GPUs gets the away side of the
Offload the flip will move warmed at once, long before the flip is due, and the policy reports what
the gang waits for.

Built on `test_policy`'s rig (home pool 2 x 4 GPUs, `chat` holding 4 of them). `flipOutAfterSeconds`
is 40 s, so everything asserted here happens while the flip is still far off. What the migration
controller does with the warm-up (scaling the away side at weight 0) is its own tests' business: this
test checks only what the policy writes and reports.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from tests.integration.conftest import POLICY_GROUP
from tests.integration.test_policy import FAST_TIMING, job_pods, policy_rig, training_job
from tests.integration.waiting import wait_for
from vk_provider.kit.kube import RawObject
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.offload.names import WARM_UNTIL_ANNOTATION, WARMED_BY_ANNOTATION
from vk_provider.policy.actuate import POLICY_FLIPS_ANNOTATION

pytestmark = [POLICY_GROUP, pytest.mark.usefixtures("policy_crd")]

FLIP_OUT_AFTER_SECONDS = 40
HOLD_SECONDS = 120


async def test_a_gang_short_of_gpus_warms_the_away_side_long_before_the_flip(
    rig_args: dict[str, Any],
) -> None:
    async with policy_rig(services={"chat": 4}, **rig_args) as rig:
        timing = {**FAST_TIMING, "flipOutAfterSeconds": FLIP_OUT_AFTER_SECONDS, "flipBackAfterSeconds": 60}
        await rig.create_policy(timing=timing, warmUp={"holdSeconds": HOLD_SECONDS})
        created = time.monotonic()
        # 6 GPUs wanted, 4 free: 2 pods cannot be placed until chat leaves.
        await rig.api.create(
            f"/apis/batch/v1/namespaces/{rig.namespace}/jobs", training_job(rig, "pretrain", 6, 60)
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
        pods = await job_pods(rig, "pretrain")
        assert sum(1 for pod in pods if pod["spec"].get("nodeName")) == 4  # the flip has not freed any yet
        print(f"training Job created -> chat's away side asked to warm: {warmed_after:.1f} s")
