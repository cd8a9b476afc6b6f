"""A pilot light makes a flip away only shift traffic; a warm-up nobody uses is scaled back down.

On the real plane, the away side on the RunPod stand-in with its realistic cold start shortened to
30 s (`Profile.scaled`): a pod is PROVISIONING, then STARTING, then RUNNING while its model loads and
the proxy answers 502, and the node calls it ready only once its readiness probe answers through the
proxy. One home replica serves an open-loop load throughout.

1. Pilot light: `spec.away.warmReplicas: 1` brings one away replica up and ready while home keeps all
   the traffic (weight 0: every request is served at home). A flip away then takes no longer than
   the strategy's own shift plus 10 s, far below the cold start it would otherwise wait for, creates
   no new RunPod pod, and fails no request. The move home ends with the pilot light still running.
2. Warm-up: with `spec.away.replicas: 2`, a warm-until a little ahead scales the away side to 2
   (weight still 0); once it passes without a flip, the away side is scaled back to the pilot light,
   and a WarmUpExpired Event says so.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.integration.migration_rig import NAME, Rig, RigFor, router_route
from tests.integration.runpod_away import token_pod_app
from tests.integration.test_migration import describe, flip, load
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import failures
from vk_devtools.standins.runpod.profile import REALISTIC
from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.kit.timestamps import format_timestamp
from vk_provider.offload.names import WARM_UNTIL_ANNOTATION, WARMED_BY_ANNOTATION

pytestmark = pytest.mark.usefixtures("traffic_rbac")

COLD_START_SECONDS = 30.0
COLD_START = dataclasses.replace(
    REALISTIC.scaled(COLD_START_SECONDS / REALISTIC.cold_start_seconds), name="realistic-30s", rate_limits=()
)
"""RunPod's cold start, shortened. Without its rate limits: the node polls each pod every second or so,
and this test studies the cold start, not the quota (the stand-in's own tests do)."""
RATE = 20
"""Requests started per second: enough for the gates, light on a shared machine."""
STRATEGY: dict[str, Any] = {
    "stepIntervalSeconds": 5,
    "toAwaySteps": [50, 100],
    "toHomeSteps": [50, 100],
    "gates": {"minRequestsPerInterval": 20, "maxErrorRatePercent": 0.5},
    "progressDeadlineSeconds": 120,
}
SHIFT_SECONDS = STRATEGY["stepIntervalSeconds"] * len(STRATEGY["toAwaySteps"])
"""How long the flip's traffic shift lasts by itself: each step's interval."""
WARM_UP_SECONDS = 25
"""The warm-up's length: a little less than the cold start, so it ends before anyone flips."""


@pytest.fixture
async def runpod() -> AsyncIterator[FakeRunPod]:
    async with FakeRunPod(pod_app=token_pod_app, profile=COLD_START) as fake:
        yield fake


@pytest.fixture
async def rig(runpod: FakeRunPod, rig_for: RigFor) -> AsyncIterator[Rig]:
    # The fake first: the runpod node's teardown deletes its pods through it.
    async with rig_for(STRATEGY, home_replicas=1, runpod=runpod) as rig:
        yield rig


async def warm(rig: Rig) -> dict[str, Any]:
    """`status.warm` as the controller last wrote it ({} while absent)."""
    return dict((await rig.offload()).get("status", {}).get("warm") or {})


async def away_replicas(rig: Rig) -> int:
    return int((await rig.deployment(f"{NAME}-away"))["spec"]["replicas"])


async def test_a_pilot_light_spares_the_flip_its_cold_start_and_an_unused_warm_up_is_scaled_back(
    rig: Rig, runpod: FakeRunPod
) -> None:
    await rig.patch_offload({"spec": {"away": {"warmReplicas": 1}}})
    lit = time.monotonic()
    async with load(rig, rate=RATE) as generator:

        async def pilot_light_ready() -> bool:
            route = await router_route(rig)
            return (
                (await warm(rig)).get("ready") == 1
                and route is not None
                and route["endpoints"]["away"]["usable"] >= 1
            )

        await wait_for(
            pilot_light_ready,
            timeout_seconds=COLD_START_SECONDS + 60,
            what=lambda: f"the pilot light to be ready; controller log:\n{rig.controller.log_tail(30)}",
        )
        warmed_in = time.monotonic() - lit
        offload = await rig.offload()
        assert offload["status"]["awayWeight"] == 0
        assert await rig.events("AwayWarm"), "no AwayWarm Event"
        before_flip = list(generator.outcomes)
        assert before_flip, "the load served nothing before the flip"
        away_before = [o for o in before_flip if rig.side_of(o.served_by) != "home"]
        assert not away_before, describe(away_before)  # the warm replica got no traffic
        pods_before = {pod["id"] for pod in await runpod.control.pods()}
        assert len(pods_before) == 1

        flipped = time.monotonic()
        out = await flip(rig, "away", timeout_seconds=COLD_START_SECONDS + 60)
        took = time.monotonic() - flipped
        assert out["status"]["phase"] == "Succeeded", out["status"]
        # Far below the cold start: Preparing found its replica ready, the migration only shifted.
        assert took <= SHIFT_SECONDS + 10, (took, rig.controller.log_tail(40))
        assert {pod["id"] for pod in await runpod.control.pods()} == pods_before
        # Home again (under load: the gates judge the way back by its requests).
        back = await flip(rig, "home", timeout_seconds=90)
        assert back["status"]["phase"] == "Succeeded", back["status"]
        await generator.stop()
    assert not failures(generator.outcomes), describe(failures(generator.outcomes))
    # Shown with `pytest -rP`: the measured times, for the record.
    print(
        f"pilot light ready {warmed_in:.0f} s after it was asked for "
        f"(cold start {COLD_START_SECONDS:.0f} s); "
        f"flip away to Succeeded in {took:.1f} s (shift {SHIFT_SECONDS} s); "
        f"{len(generator.outcomes)} requests, 0 failed"
    )
    assert await away_replicas(rig) == 1  # the pilot light stays after the move home

    # A warm-up of a move's full count, which nobody uses.
    until = format_timestamp(datetime.now(UTC) + timedelta(seconds=WARM_UP_SECONDS))
    annotations = {WARM_UNTIL_ANNOTATION: until, WARMED_BY_ANNOTATION: "test/warm-away"}
    await rig.patch_offload({"metadata": {"annotations": annotations}, "spec": {"away": {"replicas": 2}}})

    async def warming_up() -> bool:
        status = await warm(rig)
        return (
            status.get("reason") == "WarmUp" and status.get("replicas") == 2 and await away_replicas(rig) == 2
        )

    await wait_for(warming_up, timeout_seconds=30, what=lambda: f"the warm-up; {rig.controller.log_tail(30)}")
    assert (await rig.offload())["status"]["awayWeight"] == 0
    assert await rig.events("WarmUpStarted"), "no WarmUpStarted Event"

    async def scaled_back() -> bool:
        status = await warm(rig)
        return status.get("reason") == "PilotLight" and await away_replicas(rig) == 1

    await wait_for(
        scaled_back,
        timeout_seconds=WARM_UP_SECONDS + 30,
        what=lambda: f"the warm-up to expire; {rig.controller.log_tail(30)}",
    )
    expired = await rig.events("WarmUpExpired")
    assert len(expired) == 1, expired
    assert "passed without a flip" in expired[0]["message"]
    assert (await rig.offload())["status"]["awayWeight"] == 0
