"""Migrations end to end on the real control plane: router, controller, CLI, and traffic that must not fail.

The away side is a second `local` node (the external providers of the providers issue slot in there).
A load generator sends an open-loop stream of short and streaming completions through the router
during each migration; every request is accounted for.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.integration.daemons import ManagedProcess
from tests.integration.migration_rig import NAME, Rig, RigFor, lone_controller, wait_for_not_ready
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings, Outcome, failures, share_by, window
from vk_devtools.devcluster import cluster
from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.kube import KubeApi

pytestmark = pytest.mark.usefixtures("traffic_rbac")

PROPAGATION_MARGIN_SECONDS = 1.5
"""Left out of each step's window after its weight was written: routers pick it up within this."""
SIGHTING_LAG_MARGIN_SECONDS = 1.0
"""Left out of each step's window before the next weight was first seen. The test sees a change late
when its event loop is busy (the load generator shares it), and stamps a request's start before it
is sent: on a loaded machine a request stamped before the test saw the next weight can reach a data
plane that applied it already."""
LAG_SAMPLE_SECONDS = 0.05
LAG_LOOKBACK_SECONDS = 5.0
"""How far before a sighting the test's own event-loop stalls widen the margin (see `WeightLog.steps`)."""
SHARE_TOLERANCE_POINTS = 5.0
MIN_REQUESTS_PER_STEP = 500


class WeightLog:
    """Every away weight the Offload's status showed, with the monotonic time it was first seen, and
    when the data plane first applied it on every replica (the status is written first; on a busy
    machine the router or the Envoys may apply it seconds later, and traffic follows them)."""

    def __init__(
        self, api: KubeApi, namespace: str, applied_weight: Callable[[], Awaitable[int | None]] | None = None
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._applied_weight = applied_weight
        self.changes: list[tuple[float, int]] = []
        self.applied: list[tuple[float, int]] = []
        """(monotonic time, weight) each time the data plane's applied weight changed."""
        self.phases: list[str] = []
        self.stalls: list[tuple[float, float]] = []
        """(monotonic time, seconds) each time the test's event loop ran late by more than a sample."""

    async def measure_stalls(self) -> None:
        """Sample the event loop's lateness: while it stalls, the test sees weights late and sends the
        requests it stamped before (a deliberate sampling loop)."""
        while True:
            asked = time.monotonic()
            await asyncio.sleep(LAG_SAMPLE_SECONDS)  # sampling the loop's lateness (noqa: sleep-ok)
            late = time.monotonic() - asked - LAG_SAMPLE_SECONDS
            if late > LAG_SAMPLE_SECONDS:
                self.stalls.append((time.monotonic(), late))

    def _stall_before(self, moment: float) -> float:
        """The longest stall of the loop in the seconds before `moment`."""
        return max(
            (late for at, late in self.stalls if moment - LAG_LOOKBACK_SECONDS <= at <= moment), default=0.0
        )

    async def follow_data_plane(self) -> None:
        """Poll the weight the data plane applies (a deliberate sampling loop)."""
        if self._applied_weight is None:
            return
        while True:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                weight = await self._applied_weight()
                if weight is not None and (not self.applied or self.applied[-1][1] != weight):
                    self.applied.append((time.monotonic(), weight))
            await asyncio.sleep(0.05)  # sampling the applied weight (noqa: sleep-ok)

    def _applied_since(self, weight: int, seen: float) -> float:
        """When the router applied `weight`, at or after the status showed it (else the status time)."""
        for at, applied in self.applied:
            if applied == weight and at >= seen - 1.0:
                return max(at, seen)
        return seen

    async def follow(self) -> None:
        path = f"/apis/offload.vk-provider.dev/v1alpha1/namespaces/{self._namespace}/offloads"
        failures = 0
        while True:
            try:
                async for event in self._api.watch(
                    path, query={"fieldSelector": f"metadata.name={NAME}"}, timeout_seconds=60
                ):
                    self.record(event.object)
                    failures = 0
            except Exception:  # the watch broke: watch again after a backoff, never spinning
                failures += 1
                await asyncio.sleep(jittered_backoff_seconds(failures, initial_seconds=0.2, max_seconds=2))

    def record(self, offload: dict[str, Any]) -> None:
        status = offload.get("status") or {}
        weight = status.get("awayWeight")
        if isinstance(weight, int) and (not self.changes or self.changes[-1][1] != weight):
            self.changes.append((time.monotonic(), weight))
        phase = status.get("phase")
        if phase and (not self.phases or self.phases[-1] != phase):
            self.phases.append(phase)

    def _first_sighting(self, weight: int, seen: float, previous: float) -> float:
        """When `weight` was first seen: by the status at `seen`, or by the data plane earlier (after
        the previous weight's status was seen at `previous`)."""
        earlier = [at for at, applied in self.applied if applied == weight and previous < at < seen]
        return min([seen, *earlier])

    def steps(self, until: float) -> list[tuple[int, float, float]]:
        """(weight, start, end) for each weight seen: from when the router applied it (or the status
        showed it) plus the propagation margin, to the first sighting of the next one less the
        sighting-lag margin and the longest stall of the test's loop just before that sighting."""
        sightings = [
            self._first_sighting(weight, seen, previous)
            for (previous, _), (seen, weight) in itertools.pairwise(self.changes)
        ]
        ends = [at - SIGHTING_LAG_MARGIN_SECONDS - self._stall_before(at) for at in sightings]
        return [
            (weight, self._applied_since(weight, start) + PROPAGATION_MARGIN_SECONDS, end)
            for (start, weight), end in zip(self.changes, [*ends, until], strict=True)
        ]


@contextlib.asynccontextmanager
async def following(rig: Rig) -> AsyncIterator[WeightLog]:
    log = WeightLog(rig.api, rig.namespace, rig.applied_weight)
    log.record(await rig.offload())
    tasks = [
        asyncio.create_task(log.follow()),
        asyncio.create_task(log.follow_data_plane()),
        asyncio.create_task(log.measure_stalls()),
    ]
    try:
        yield log
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def load(rig: Rig, rate: float) -> LoadGenerator:
    return LoadGenerator(
        LoadSettings(url=rig.traffic_url, host_header=rig.host, rate=rate, stream_share=0.3, stream_tokens=4)
    )


def describe(outcomes: list[Outcome]) -> str:
    shown = outcomes[:10]
    return "\n".join(f"{o.kind} status={o.status} by={o.served_by} failure={o.failure}" for o in shown)


async def flip(rig: Rig, placement: str, *, timeout_seconds: float = 300) -> dict[str, Any]:
    await rig.patch_offload({"spec": {"placement": placement}})
    generation = (await rig.offload())["metadata"]["generation"]

    async def ended() -> dict[str, Any] | None:
        if not rig.controller.alive():
            raise AssertionError(f"the controller exited:\n{rig.controller.log_tail()}")
        offload = await rig.offload()
        status = offload.get("status") or {}
        done = status.get("observedGeneration", 0) >= generation and status.get("phase") in (
            "Succeeded",
            "RolledBack",
            "Failed",
        )
        return offload if done else None

    return await wait_for(
        ended,
        timeout_seconds=timeout_seconds,
        what=f"the migration to {placement} to end; controller log:\n{rig.controller.log_tail(40)}",
    )


def assert_shares_follow_weights(
    rig: Rig, log: WeightLog, outcomes: list[Outcome], until: float
) -> list[str]:
    """Each weight's window: at least MIN_REQUESTS_PER_STEP requests, the away share within tolerance."""
    report = []
    for weight, start, end in log.steps(until):
        served = window(outcomes, start, end)
        if weight in (0, 100) and len(served) < MIN_REQUESTS_PER_STEP:
            continue  # the resting weights before and after: nothing to measure against
        sides = share_by(served, rig.side_of)
        away_share = 100.0 * sides["away"] / max(1, len(served))
        stall = max(
            (late for at, late in log.stalls if start - LAG_LOOKBACK_SECONDS <= at <= end), default=0.0
        )
        report.append(
            f"weight {weight}: {len(served)} requests, {away_share:.1f}% away"
            f" (the test's loop stalled up to {stall:.2f} s)"
        )
        assert len(served) >= MIN_REQUESTS_PER_STEP, report
        assert sides["unknown"] == 0, report
        assert abs(away_share - weight) <= SHARE_TOLERANCE_POINTS, report
    return report


async def test_a_flip_out_and_back_loses_no_request_and_follows_every_weight(rig_for: RigFor) -> None:
    strategy = {
        "stepIntervalSeconds": 8,
        "gates": {"minRequestsPerInterval": 50, "maxErrorRatePercent": 0.5},
        "progressDeadlineSeconds": 180,
    }
    async with (
        rig_for(strategy) as rig,
        following(rig) as log,
        load(rig, rate=130) as generator,
    ):
        out = await flip(rig, "away")
        assert out["status"]["phase"] == "Succeeded", out["status"]
        assert out["status"]["awayWeight"] == 100
        assert (await rig.deployment(NAME))["spec"]["replicas"] == 0  # the home GPUs are free
        assert out["status"]["homeReplicas"] == 2
        back = await flip(rig, "home")
        assert back["status"]["phase"] == "Succeeded", back["status"]
        assert back["status"]["awayWeight"] == 0
        finished = time.monotonic()
        await generator.stop()
        away = await rig.deployment(f"{NAME}-away")
        assert away["spec"]["replicas"] == 0  # nothing left running at the provider
        assert len(await rig.events("StepApplied")) == 7  # 50, 100 out; 90, 75, 50, 25, 0 back
    outcomes = generator.outcomes
    assert not failures(outcomes), describe(failures(outcomes))
    assert len(outcomes) >= 130 * 60, len(outcomes)  # about a minute or more of steady load at least
    streams = [outcome for outcome in outcomes if outcome.kind == "stream"]
    assert len(streams) >= 0.25 * len(outcomes)
    assert [weight for _, weight in log.changes] == [0, 50, 100, 90, 75, 50, 25, 0]
    report = assert_shares_follow_weights(rig, log, outcomes, finished)
    # Shown with `pytest -rP`: the measured shares, for the record.
    print(f"{len(outcomes)} requests, {len(streams)} streaming, 0 failed; " + "; ".join(report))
    checked = [line for line in report if not line.startswith(("weight 0:", "weight 100:"))]
    assert len(checked) == 5, report  # 50 on the way out; 90, 75, 50, 25 on the way back


async def test_a_failing_gate_rolls_back_and_the_cli_exits_1(
    rig_for: RigFor, control_plane: cluster.ClusterState
) -> None:
    strategy = {
        "stepIntervalSeconds": 3,
        "toAwaySteps": [100],
        "toHomeSteps": [50, 100],
        "failuresBeforeRollback": 2,
        # The tolerant path is what is tested here: the severe one would roll back in one window.
        "gates": {"minRequestsPerInterval": 20, "maxErrorRatePercent": 5, "severe": {"enabled": False}},
    }
    async with (
        rig_for(strategy) as rig,
        load(rig, rate=60) as generator,
    ):
        assert (await flip(rig, "away"))["status"]["phase"] == "Succeeded"
        rig.fail_home()  # the home side will answer 500s once it is back
        cli = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "vk_provider",
            "migrate",
            "flip",
            NAME,
            "--to",
            "home",
            "--wait",
            "-n",
            rig.namespace,
            "--kubeconfig",
            str(control_plane.kubeconfig),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(cli.communicate(), timeout=240)
        await generator.stop()
        assert cli.returncode == 1, (stdout.decode(), stderr.decode(), rig.controller.log_tail())
        assert "did not succeed" in stderr.decode()
        status = (await rig.offload())["status"]
        assert status["phase"] == "RolledBack"
        assert status["awayWeight"] == 100  # the last good weight: everything away again
        progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
        assert (progressing["status"], progressing["reason"]) == ("False", "GatesFailed")
        assert "failed its gates 2 times" in progressing["message"]
        assert status["lastCheck"]["verdict"] == "Unhealthy"
        assert len(await rig.events("GateFailed")) == 1
        assert len(await rig.events("GatesFailed")) == 1
        assert (await rig.deployment(NAME))["spec"]["replicas"] == 0  # home's GPUs are free again
    home_failures = [o for o in failures(generator.outcomes) if rig.side_of(o.served_by) == "home"]
    assert home_failures, "the home side was meant to fail"
    assert all(rig.side_of(o.served_by) == "home" for o in failures(generator.outcomes))


async def test_a_controller_killed_mid_migration_resumes_from_its_status(
    rig_for: RigFor, tmp_path: Path
) -> None:
    """Two replicas: the standby waits on the Lease, then takes over from the status alone."""
    strategy = {
        "stepIntervalSeconds": 3,
        "toAwaySteps": [20, 40, 60, 80, 100],
        "gates": {"minRequestsPerInterval": 20},
    }
    async with (
        rig_for(strategy) as rig,
        following(rig) as log,
        load(rig, rate=60) as generator,
    ):
        standby = ManagedProcess(folder=tmp_path / "standby", arguments=rig.controller.arguments)
        standby.start()
        try:
            await rig.patch_offload({"spec": {"placement": "away"}})

            async def mid_way() -> bool:
                status = (await rig.offload()).get("status") or {}
                return status.get("phase") == "Shifting" and status.get("awayWeight", 0) >= 40

            await wait_for(mid_way, timeout_seconds=180, what="the migration to reach away weight 40")
            assert " leads " not in standby.log_path.read_text()  # one leader at a time
            rig.controller.kill()
            killed_at = (await rig.offload())["status"]["awayWeight"]
            done = await rig.wait_for_phase("Succeeded", timeout_seconds=180)
            await generator.stop()
            assert " leads " in standby.log_path.read_text()
        finally:
            standby.close()
    assert done["status"]["awayWeight"] == 100
    weights = [weight for _, weight in log.changes]
    assert weights == [0, 20, 40, 60, 80, 100], weights  # no step repeated, skipped or undone
    assert killed_at in weights
    assert not failures(generator.outcomes), describe(failures(generator.outcomes))


async def test_pause_resume_promote_and_abort_steer_a_running_migration(rig_for: RigFor) -> None:
    strategy = {
        "stepIntervalSeconds": 3,
        "toAwaySteps": [25, 50, 75, 100],
        "toHomeSteps": [10, 50, 100],
        "gates": {"minRequestsPerInterval": 10},
    }
    async with (
        rig_for(strategy) as rig,
        following(rig) as log,
        load(rig, rate=40) as generator,
    ):

        async def status_where(what: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
            async def probe() -> dict[str, Any] | None:
                status: dict[str, Any] = (await rig.offload()).get("status") or {}
                return status if check(status) else None

            return await wait_for(probe, timeout_seconds=120, what=f"{what}; {rig.controller.log_tail(20)}")

        await rig.patch_offload({"spec": {"placement": "away"}})
        await status_where("away weight 25", lambda s: s.get("awayWeight") == 25)
        await rig.patch_offload({"spec": {"paused": True}})
        paused = await status_where("Paused", lambda s: s.get("phase") == "Paused")
        held_since = time.monotonic()
        # Two intervals later the weight has not moved (the controller re-reads the Offload meanwhile).
        await status_where(
            "two intervals to pass",
            lambda s: time.monotonic() - held_since > 2 * strategy["stepIntervalSeconds"],
        )
        assert (await rig.offload())["status"]["awayWeight"] == paused["awayWeight"] == 25
        await rig.patch_offload({"spec": {"paused": False}})
        await status_where("Shifting again", lambda s: s.get("phase") == "Shifting")
        await rig.patch_offload(
            {"metadata": {"annotations": {"offload.vk-provider.dev/promote": "2026-12-02T00:00:00Z"}}}
        )
        promoted = await status_where("Succeeded", lambda s: s.get("phase") == "Succeeded")
        assert promoted["awayWeight"] == 100
        assert promoted["stepIndex"] == 4
        # Now home, and abort on the first step: back to away, home scaled to 0 again.
        await rig.patch_offload({"spec": {"placement": "home"}})
        await status_where("away weight 90", lambda s: s.get("awayWeight") == 90)
        await rig.patch_offload({"spec": {"placement": "away"}})  # what `kubectl offload abort` writes
        aborted = await status_where("RolledBack", lambda s: s.get("phase") == "RolledBack")
        assert aborted["awayWeight"] == 100
        assert aborted["outcomeReason"] == "Aborted"
        assert (await rig.deployment(NAME))["spec"]["replicas"] == 0
        for reason in ("Paused", "Resumed", "Aborted"):
            assert await rig.events(reason), reason
        await generator.stop()
    weights = [weight for _, weight in log.changes]
    assert weights == [0, 25, 100, 90, 100], weights  # promote jumped 25 -> 100; abort went 90 -> 100
    assert not failures(generator.outcomes), describe(failures(generator.outcomes))


async def test_an_offload_naming_a_missing_deployment_gets_a_condition_and_no_action(
    control_plane: cluster.ClusterState, namespace: str, tmp_path: Path
) -> None:
    api = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    controller = lone_controller(control_plane, namespace, tmp_path / "controller")
    path = f"/apis/offload.vk-provider.dev/v1alpha1/namespaces/{namespace}/offloads"
    try:
        await api.create(
            path,
            {
                "apiVersion": "offload.vk-provider.dev/v1alpha1",
                "kind": "Offload",
                "metadata": {"name": "ghost"},
                "spec": {
                    "home": {"deployment": "ghost", "service": "ghost"},
                    "placement": "away",
                    "route": {"hosts": ["ghost.test"]},
                },
            },
        )
        controller.start()
        status = await wait_for_not_ready(api, f"{path}/ghost", "HomeDeploymentNotFound", controller)
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert 'Deployment "ghost" not found' in ready["message"]
        assert status["phase"] == "Idle"  # not Preparing: nothing was started
        deployments = await api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments")
        assert deployments["items"] == []
    finally:
        controller.close()
        await api.close()
