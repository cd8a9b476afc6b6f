"""How long a training gang waits for its home GPUs while an Offload's away side is on RunPod's stand-in
with a realistic cold start, shortened to 30 s, and what the policy said it waited for.

`watch_gang` follows a training Job from its creation until all its pods are bound (their
`spec.nodeName`), reading on each poll what the policy reports for the gang
(`status.demand.gangs[].waitingFor`), the Offload's phase and its home pods, so a test can hold the
wait against the parts it is made of: the policy's confirmation, the flip's Preparing (a cold start
unless the away side was warm), the traffic shift, the home pods leaving, and the scheduler.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator

import pytest

from tests.integration.runpod_away import token_pod_app
from tests.integration.test_policy import STRATEGY, PolicyRig, job_pods
from tests.integration.waiting import wait_for
from vk_devtools.standins.runpod.profile import REALISTIC
from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.kit.kube import RawObject
from vk_provider.kit.timestamps import parse_timestamp

COLD_START_SECONDS = 30.0
COLD_START = dataclasses.replace(
    REALISTIC.scaled(COLD_START_SECONDS / REALISTIC.cold_start_seconds), name="realistic-30s", rate_limits=()
)
"""RunPod's cold start, shortened. Without its rate limits: the node polls each pod every second or so,
and these tests study the cold start, not the quota (the stand-in's own tests do)."""
SHIFT_SECONDS = STRATEGY["stepIntervalSeconds"] * len(STRATEGY["toAwaySteps"])
"""How long a flip's traffic shift lasts by itself under the policy rig's strategy: each step's interval."""


@pytest.fixture
async def cold_runpod() -> AsyncIterator[FakeRunPod]:
    """The RunPod stand-in with the 30 s cold start, serving tokens. Ask for it before `rig_args`: the
    nodes' teardown deletes their RunPod pods through it, so it must stop after them."""
    async with FakeRunPod(pod_app=token_pod_app, profile=COLD_START) as fake:
        yield fake


@dataclasses.dataclass(frozen=True)
class GangWait:
    """A training gang's wait, from its Job's creation until all its pods were bound."""

    seconds: float
    stages: tuple[str, ...]
    """The `waitingFor` values the policy reported for the gang, in the order they first appeared."""
    home_leaving_seconds: float
    """From the Offload's move reaching Finalizing (traffic all away) until its home pods were gone."""


async def watch_gang(
    rig: PolicyRig, job: str, pods: int, offload: str, *, created: float, timeout_seconds: float
) -> GangWait:
    """Poll until the Job `job` has all its `pods` bound; `created` is its creation's `time.monotonic()`."""
    stages: list[str] = []
    finalizing: float | None = None
    home_gone: float | None = None

    async def bound() -> bool:
        nonlocal finalizing, home_gone
        status = (await rig.policy()).get("status") or {}
        for gang in (status.get("demand") or {}).get("gangs") or ():
            stage = gang.get("waitingFor")
            if gang.get("name") == job and stage and stage not in stages:
                stages.append(stage)
        # The gang's pods are read before the home pods: a gang seen bound while home pods are seen
        # after it is a gang that got GPUs they held. Read the other way round, a home pod that left
        # between the two reads made a gang bound after it look bound before it.
        members = await job_pods(rig, job)
        moved = await rig.offload(offload)
        phase = (moved.get("status") or {}).get("phase")
        if (
            finalizing is None
            and moved["spec"]["placement"] == "away"
            and phase in ("Finalizing", "Succeeded")
        ):
            finalizing = time.monotonic()
        if finalizing is not None and home_gone is None and not await home_pods(rig, offload):
            home_gone = time.monotonic()
        return len(members) == pods and all(pod["spec"].get("nodeName") for pod in members)

    await wait_for(
        bound,
        timeout_seconds=timeout_seconds,
        what=lambda: f"all {pods} pods of {job} bound (stages seen: {stages}):\n{rig.log()}",
    )
    ended = time.monotonic()
    assert finalizing is not None, "the gang got its GPUs without the flip"
    assert home_gone is not None, "the gang got its GPUs while the home pods held them"
    return GangWait(
        seconds=ended - created, stages=tuple(stages), home_leaving_seconds=home_gone - finalizing
    )


async def home_pods(rig: PolicyRig, offload: str) -> list[str]:
    """The names of the pods of the Offload's service (label app=<name>) still on home pool nodes."""
    pool = {node.node_name for node in rig.pool}
    listing = await rig.api.get(
        f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": f"app={offload}"}
    )
    return [
        pod["metadata"]["name"] for pod in listing.get("items") or () if pod["spec"].get("nodeName") in pool
    ]


async def preparing_seconds(rig: PolicyRig, offload: str) -> float:
    """How long the Offload's move stayed in Preparing, by its Events (to the second): from
    MigrationStarted to the first StepApplied, the first weight given to the receiving side."""

    async def first(reason: str) -> float:
        async def posted() -> list[RawObject]:  # (Events are posted in the background, a moment later)
            events = await rig.events(reason, "Offload")
            return [e for e in events if e["involvedObject"]["name"] == offload]

        events = await wait_for(posted, timeout_seconds=30, what=f"{offload}'s {reason} Event")
        assert len(events) == 1, (reason, events)  # one move, of one step
        moment = parse_timestamp(events[0]["firstTimestamp"])
        assert moment is not None, events[0]
        return moment.timestamp()

    return await first("StepApplied") - await first("MigrationStarted")
