"""`kubectl offload` against the real plane with the Offload CRD applied, the controller played by the test.

The CLI runs in subprocesses so exit codes, stdout and stderr are the real ones; the test writes status
through the /status subresource the way the controller will.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.migration_rig import NAME, RigFor
from tests.integration.test_migration import flip as flip_placement
from tests.integration.test_migration import following
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings
from vk_devtools.devcluster import cluster
from vk_provider.kit.kube import MERGE_PATCH, KubeApi
from vk_provider.offload.names import FLIP_STRATEGY_ANNOTATION, RETRY_ANNOTATION
from vk_provider.policy.names import HOLD_UNTIL_ANNOTATION, HOLD_UNTIL_NEXT_FLIP

API = "/apis/offload.vk-provider.dev/v1alpha1"
CLI_TIMEOUT_SECONDS = 60


@pytest.fixture
async def api(control_plane: cluster.ClusterState, offload_crd: None) -> AsyncIterator[KubeApi]:
    kube = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    try:
        yield kube
    finally:
        await kube.close()


def offload_path(namespace: str, name: str = "") -> str:
    path = f"{API}/namespaces/{namespace}/offloads"
    return f"{path}/{name}" if name else path


async def create_offload(api: KubeApi, namespace: str, name: str, placement: str = "home") -> dict[str, Any]:
    body = {
        "apiVersion": "offload.vk-provider.dev/v1alpha1",
        "kind": "Offload",
        "metadata": {"name": name},
        "spec": {
            "home": {"deployment": name, "service": name},
            "placement": placement,
            "route": {"hosts": [f"{name}.{namespace}.test"]},
        },
    }
    return await api.create(offload_path(namespace), body)


async def read(api: KubeApi, namespace: str, name: str) -> dict[str, Any]:
    return await api.get(offload_path(namespace, name))


async def patch_status(api: KubeApi, namespace: str, name: str, status: dict[str, Any]) -> None:
    await api.patch(f"{offload_path(namespace, name)}/status", {"status": status}, content_type=MERGE_PATCH)


def cli_command(control_plane: cluster.ClusterState, *arguments: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vk_provider",
        "migrate",
        *arguments,
        "--kubeconfig",
        str(control_plane.kubeconfig),
    ]


def run_cli(
    control_plane: cluster.ClusterState, *arguments: str, timeout: float = CLI_TIMEOUT_SECONDS
) -> subprocess.CompletedProcess[str]:
    """The `kubectl-offload` entry point of this venv, run to completion."""
    command = [str(Path(sys.executable).parent / "kubectl-offload"), *arguments]
    command += ["--kubeconfig", str(control_plane.kubeconfig)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


async def test_list_shows_every_offload_of_the_namespace_with_its_columns(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat")
    await create_offload(api, namespace, "embed", placement="away")
    await patch_status(api, namespace, "embed", {"phase": "Shifting", "awayWeight": 50, "stepIndex": 1})

    listed = await asyncio.to_thread(run_cli, control_plane, "list", "-n", namespace)

    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["NAME", "PLACEMENT", "PHASE", "AWAY", "WEIGHT", "STEP", "AGE"]
    by_name = {row.split()[0]: row.split() for row in rows}
    assert by_name["chat"][1:5] == ["home", "-", "-", "-"]
    assert by_name["embed"][1:5] == ["away", "Shifting", "50%", "1/2"]

    everywhere = await asyncio.to_thread(run_cli, control_plane, "list", "-A")
    assert everywhere.returncode == 0, everywhere.stderr
    assert everywhere.stdout.splitlines()[0].split()[0] == "NAMESPACE"
    assert any(line.split()[:2] == [namespace, "chat"] for line in everywhere.stdout.splitlines())


async def test_status_as_json_round_trips(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat")
    await patch_status(api, namespace, "chat", {"phase": "Idle", "awayWeight": 0})
    stored = await read(api, namespace, "chat")

    shown = await asyncio.to_thread(run_cli, control_plane, "status", "chat", "-n", namespace, "-o", "json")

    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == stored
    text = await asyncio.to_thread(run_cli, control_plane, "status", "chat", "-n", namespace)
    assert text.returncode == 0, text.stderr
    assert "Phase:        Idle" in text.stdout
    assert "[--------------------]   0% away" in text.stdout


async def test_flip_carries_steps_and_interval_for_its_migration_alone_unless_saved(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    """The apiserver keeps what the CLI writes: an annotation for the one migration, or with --save the
    spec (the controller's half is in test_migration)."""
    await create_offload(api, namespace, "chat")
    before = (await read(api, namespace, "chat"))["spec"]

    arguments = ["flip", "chat", "--to", "away", "--steps", "25,50,100", "--interval", "10s", "-n", namespace]
    flipped = await asyncio.to_thread(run_cli, control_plane, *arguments)

    assert flipped.returncode == 0, flipped.stderr
    assert "steps 25,50,100 and 10s per step for this migration only" in flipped.stdout
    offload = await read(api, namespace, "chat")
    assert offload["spec"] == {**before, "placement": "away"}
    one_off = json.loads(offload["metadata"]["annotations"][FLIP_STRATEGY_ANNOTATION])
    assert (one_off["placement"], one_off["steps"], one_off["stepIntervalSeconds"]) == (
        "away",
        [25, 50, 100],
        10,
    )

    saved = await asyncio.to_thread(run_cli, control_plane, *arguments[:-2], "--save", "-n", namespace)

    assert saved.returncode == 0, saved.stderr
    offload = await read(api, namespace, "chat")
    strategy = offload["spec"]["strategy"]
    assert (strategy["toAwaySteps"], strategy["stepIntervalSeconds"]) == ([25, 50, 100], 10)
    assert strategy["toHomeSteps"] == [10, 25, 50, 75, 100]  # the other direction is untouched
    assert FLIP_STRATEGY_ANNOTATION not in offload["metadata"]["annotations"]


async def test_pause_and_resume_toggle_spec_paused(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat")

    paused = await asyncio.to_thread(run_cli, control_plane, "pause", "chat", "-n", namespace)
    assert paused.returncode == 0, paused.stderr
    assert (await read(api, namespace, "chat"))["spec"]["paused"] is True

    resumed = await asyncio.to_thread(run_cli, control_plane, "resume", "chat", "-n", namespace)
    assert resumed.returncode == 0, resumed.stderr
    assert (await read(api, namespace, "chat"))["spec"]["paused"] is False


async def test_flip_while_shifting_toward_the_other_placement_is_refused(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat", placement="away")
    await patch_status(
        api,
        namespace,
        "chat",
        {"phase": "Shifting", "targetPlacement": "away", "awayWeight": 50, "stepIndex": 1},
    )

    refused = await asyncio.to_thread(run_cli, control_plane, "flip", "chat", "--to", "home", "-n", namespace)

    assert refused.returncode == 2
    assert "already migrating to away" in refused.stderr
    assert (await read(api, namespace, "chat"))["spec"]["placement"] == "away"


async def test_abort_sets_the_starting_placement_and_needs_a_running_migration(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat", placement="away")

    nothing = await asyncio.to_thread(run_cli, control_plane, "abort", "chat", "-n", namespace)
    assert nothing.returncode == 2
    assert "no migration running" in nothing.stderr

    await patch_status(api, namespace, "chat", {"phase": "Shifting", "targetPlacement": "away"})
    aborted = await asyncio.to_thread(run_cli, control_plane, "abort", "chat", "-n", namespace)
    assert aborted.returncode == 0, aborted.stderr
    after_abort = await read(api, namespace, "chat")
    assert after_abort["spec"]["placement"] == "home"
    # A person set the placement: the OffloadPolicies leave it there until the next flip by a person.
    assert after_abort["metadata"]["annotations"][HOLD_UNTIL_ANNOTATION] == HOLD_UNTIL_NEXT_FLIP

    await patch_status(api, namespace, "chat", {"phase": "Shifting", "targetPlacement": "home"})
    promoted = await asyncio.to_thread(run_cli, control_plane, "promote", "chat", "-n", namespace)
    assert promoted.returncode == 0, promoted.stderr
    annotations = (await read(api, namespace, "chat"))["metadata"]["annotations"]
    assert annotations["offload.vk-provider.dev/promote"].endswith("Z")


async def flip_and_wait(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState, ending: str
) -> subprocess.CompletedProcess[str]:
    """Start `migrate flip --wait`, play the controller once the spec changed, and return the finished CLI."""
    process = await asyncio.create_subprocess_exec(
        *cli_command(control_plane, "flip", "chat", "--to", "away", "--wait", "-n", namespace),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def flipped() -> dict[str, Any] | None:
            offload = await read(api, namespace, "chat")
            return offload if offload["spec"]["placement"] == "away" else None

        offload = await wait_for(flipped, timeout_seconds=30, what="the CLI to set placement away")
        generation = offload["metadata"]["generation"]
        shifting = {"phase": "Shifting", "targetPlacement": "away", "awayWeight": 50, "stepIndex": 1}
        await patch_status(api, namespace, "chat", {**shifting, "observedGeneration": generation})
        assert process.returncode is None  # still waiting while the migration runs
        await patch_status(
            api, namespace, "chat", {"phase": ending, "awayWeight": 100 if ending == "Succeeded" else 0}
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=CLI_TIMEOUT_SECONDS)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return subprocess.CompletedProcess([], process.returncode, stdout.decode(), stderr.decode())


async def test_flip_wait_exits_0_when_the_migration_succeeds(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat")
    await patch_status(
        api, namespace, "chat", {"phase": "Succeeded", "targetPlacement": "home", "observedGeneration": 1}
    )

    finished = await flip_and_wait(api, namespace, control_plane, "Succeeded")

    assert finished.returncode == 0, finished.stderr
    assert "Shifting, away weight 50%, step 1/2" in finished.stdout
    assert "succeeded" in finished.stdout


async def test_flip_wait_exits_1_when_the_migration_rolls_back(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat")

    finished = await flip_and_wait(api, namespace, control_plane, "RolledBack")

    assert finished.returncode == 1
    assert "did not succeed" in finished.stderr


@pytest.mark.parametrize(
    "command", [["status", "ghost"], ["flip", "ghost", "--to", "away"], ["pause", "ghost"]]
)
async def test_an_unknown_offload_exits_1(
    command: list[str], api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    missing = await asyncio.to_thread(run_cli, control_plane, *command, "-n", namespace)

    assert missing.returncode == 1
    assert f'offload "ghost" not found in namespace "{namespace}"' in missing.stderr


async def test_status_watch_re_renders_past_the_end_of_the_migration_until_interrupted(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat", placement="away")
    await patch_status(
        api, namespace, "chat", {"phase": "Preparing", "targetPlacement": "away", "awayWeight": 0}
    )
    process = await start_cli(control_plane, "status", "chat", "--watch", "-n", namespace)
    try:
        assert process.stdout is not None
        first = await asyncio.wait_for(process.stdout.readuntil(b"Conditions:"), timeout=CLI_TIMEOUT_SECONDS)
        assert b"Phase:        Preparing" in first
        await patch_status(api, namespace, "chat", {"phase": "Shifting", "awayWeight": 50, "stepIndex": 1})
        await patch_status(api, namespace, "chat", {"phase": "Succeeded", "awayWeight": 100, "stepIndex": 2})
        seen = await asyncio.wait_for(
            process.stdout.readuntil(b"Phase:        Succeeded"), timeout=CLI_TIMEOUT_SECONDS
        )
        # Still watching with no migration running: a later change shows too.
        await patch_status(api, namespace, "chat", {"phase": "Preparing", "targetPlacement": "home"})
        seen += await asyncio.wait_for(
            process.stdout.readuntil(b"Phase:        Preparing"), timeout=CLI_TIMEOUT_SECONDS
        )
        assert process.returncode is None
        process.send_signal(signal.SIGINT)
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=CLI_TIMEOUT_SECONDS)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 130, stderr.decode()
    assert "Phase:        Shifting" in seen.decode()
    assert "[####################] 100% away" in seen.decode()


def _interruptible() -> None:
    """Run in the CLI's process before it starts: SIGINT as at a terminal. A test run started as a
    background job of a non-interactive shell (`make test &`, some CI runners) ignores SIGINT, a child
    inherits that, and Python keeps an inherited SIGINT ignored: the CLI would never see the Ctrl-C
    the test sends (the cause of this module's `--watch` tests timing out in such runs)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def start_cli(control_plane: cluster.ClusterState, *arguments: str) -> asyncio.subprocess.Process:
    """The CLI started, its output piped, interruptible by SIGINT whatever this run ignores."""
    return await asyncio.create_subprocess_exec(
        *cli_command(control_plane, *arguments),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_interruptible,
    )


async def finish(process: asyncio.subprocess.Process) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=CLI_TIMEOUT_SECONDS)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return subprocess.CompletedProcess([], process.returncode, stdout.decode(), stderr.decode())


async def test_flip_after_a_rollback_retries_and_waits_on_the_new_attempt(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat", placement="away")
    rolled_back = {
        "phase": "RolledBack",
        "targetPlacement": "away",
        "awayWeight": 0,
        "observedGeneration": 1,
        "outcome": "RolledBack",
        "outcomeReason": "GatesFailed",
        "message": "GatesFailed: serving home",
    }
    await patch_status(api, namespace, "chat", rolled_back)
    shown = await asyncio.to_thread(run_cli, control_plane, "status", "chat", "-n", namespace)
    assert f"to try it again: `kubectl offload flip chat --to away -n {namespace}`" in shown.stdout

    process = await start_cli(control_plane, "flip", "chat", "--to", "away", "--wait", "-n", namespace)

    async def retry_asked() -> str:
        annotations = (await read(api, namespace, "chat"))["metadata"].get("annotations") or {}
        return str(annotations.get("offload.vk-provider.dev/retry") or "")

    try:
        stamp = await wait_for(retry_asked, timeout_seconds=30, what="the CLI to ask for a retry")
        assert process.returncode is None  # the old RolledBack is not this attempt's ending
        # Playing the controller: it takes the retry up, then the new attempt succeeds.
        await patch_status(api, namespace, "chat", {"phase": "Preparing", "handledRetry": stamp})
        await patch_status(api, namespace, "chat", {"phase": "Succeeded", "awayWeight": 100})
    finally:
        finished = await finish(process)
    assert finished.returncode == 0, finished.stderr
    assert "the last migration to away did not succeed; trying it again" in finished.stdout
    assert "the migration to away succeeded" in finished.stdout


async def test_flip_wait_fails_fast_when_the_offload_is_not_ready(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat")
    process = await start_cli(control_plane, "flip", "chat", "--to", "away", "--wait", "-n", namespace)
    try:

        async def flipped() -> int:
            offload = await read(api, namespace, "chat")
            return int(offload["metadata"]["generation"]) if offload["spec"]["placement"] == "away" else 0

        generation = await wait_for(flipped, timeout_seconds=30, what="the CLI to set placement away")
        # Playing the controller: the home Deployment does not exist.
        missing = {
            "type": "Ready",
            "status": "False",
            "reason": "HomeDeploymentNotFound",
            "message": f'Deployment "chat" not found in {namespace}; nothing is moved until it exists',
            "lastTransitionTime": "2026-12-03T12:00:00Z",
        }
        await patch_status(
            api,
            namespace,
            "chat",
            {"phase": "Idle", "observedGeneration": generation, "conditions": [missing]},
        )
    finally:
        finished = await finish(process)
    assert finished.returncode == 1
    assert "offload chat is not Ready (HomeDeploymentNotFound: Deployment" in finished.stderr


async def test_status_shows_the_gates_and_the_recent_events_of_the_offload(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    created = await create_offload(api, namespace, "chat", placement="away")
    await patch_status(
        api,
        namespace,
        "chat",
        {
            "phase": "Shifting",
            "targetPlacement": "away",
            "awayWeight": 50,
            "stepIndex": 1,
            "steps": [50, 100],
        },
    )
    for index, (reason, uid) in enumerate(
        [("MigrationStarted", created["metadata"]["uid"]), ("FromAnOlderOffload", "another-uid")]
    ):
        await api.create(
            f"/api/v1/namespaces/{namespace}/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"chat.test{index}", "namespace": namespace},
                "involvedObject": {
                    "apiVersion": "offload.vk-provider.dev/v1alpha1",
                    "kind": "Offload",
                    "name": "chat",
                    "namespace": namespace,
                    "uid": uid,
                },
                "type": "Normal",
                "reason": reason,
                "message": "moving away: away weight 0 -> 50 -> 100",
                "count": 1,
                "firstTimestamp": created["metadata"]["creationTimestamp"],
                "lastTimestamp": created["metadata"]["creationTimestamp"],
                "source": {"component": "test"},
            },
        )

    shown = await asyncio.to_thread(run_cli, control_plane, "status", "chat", "-n", namespace)

    assert shown.returncode == 0, shown.stderr
    assert "Step:         1/2 (toward away: 50,100; 30s per step)" in shown.stdout
    assert "  Limits:      error rate <= 1%, p99 <= 2000 ms" in shown.stdout
    events = shown.stdout.split("Recent events:\n", 1)[1]
    assert "MigrationStarted" in events
    assert "FromAnOlderOffload" not in events


@pytest.mark.usefixtures("traffic_rbac")
async def test_a_retry_after_a_rollback_runs_again_with_the_real_controller(
    control_plane: cluster.ClusterState, namespace: str, rig_for: RigFor
) -> None:
    """The controller's half of the retry: the annotation the CLI writes really starts a new attempt."""
    strategy = {
        "stepIntervalSeconds": 3,
        "toAwaySteps": [100],
        "failuresBeforeRollback": 1,
        "gates": {"minRequestsPerInterval": 20, "maxErrorRatePercent": 5},
    }
    flip = ["flip", NAME, "--to", "away", "--wait", "-n", namespace]
    async with rig_for(strategy) as rig:
        away_fails = rig.fail_dir / f"{rig.away.node_name}.fail"
        generator = LoadGenerator(LoadSettings(url=rig.router_url, host_header=rig.host, rate=40))
        try:
            await generator.start()
            away_fails.touch()
            first = await asyncio.to_thread(run_cli, control_plane, *flip, timeout=240)
            assert first.returncode == 1, (first.stdout, first.stderr, rig.controller.log_tail())
            assert f"to try it again: `kubectl offload flip {NAME} --to away -n {namespace}`" in first.stderr
            assert (await rig.offload())["status"]["phase"] == "RolledBack"

            away_fails.unlink()
            second = await asyncio.to_thread(run_cli, control_plane, *flip, timeout=240)
            assert second.returncode == 0, (second.stdout, second.stderr, rig.controller.log_tail())
            assert "the last migration to away did not succeed; trying it again" in second.stdout
            offload = await rig.offload()
            assert offload["status"]["phase"] == "Succeeded"
            assert offload["status"]["awayWeight"] == 100
            assert offload["status"]["handledRetry"] == offload["metadata"]["annotations"][RETRY_ANNOTATION]
        finally:
            await generator.stop()


@pytest.mark.usefixtures("traffic_rbac")
async def test_a_flips_own_steps_and_interval_run_its_migration_and_no_later_one(
    control_plane: cluster.ClusterState, namespace: str, rig_for: RigFor
) -> None:
    """The controller's half: the migration a flip starts runs by its steps and interval (and records
    them in status); a flip that starts none drops them; later flips that write only the placement, as
    an OffloadPolicy's do, run by the spec."""
    strategy = {
        "stepIntervalSeconds": 3,
        "toAwaySteps": [100],
        "toHomeSteps": [100],
        "gates": {"minRequestsPerInterval": 0},
    }
    one_off = ["flip", NAME, "--to", "away", "--steps", "50,100", "--interval", "1s", "-n", namespace]
    async with rig_for(strategy) as rig, following(rig) as log:
        flipped = await asyncio.to_thread(run_cli, control_plane, *one_off, "--wait", timeout=240)
        assert flipped.returncode == 0, (flipped.stdout, flipped.stderr, rig.controller.log_tail())
        offload = await rig.offload()
        status, annotation = offload["status"], offload["metadata"]["annotations"][FLIP_STRATEGY_ANNOTATION]
        assert (status["steps"], status["stepIntervalSeconds"]) == ([50, 100], 1)
        assert status["handledFlipStrategy"] == annotation
        kept = offload["spec"]["strategy"]
        assert (kept["toAwaySteps"], kept["stepIntervalSeconds"]) == ([100], 3)  # the spec is unchanged

        # Already away: this flip starts nothing, so its steps apply to nothing and are dropped.
        again = await asyncio.to_thread(run_cli, control_plane, *one_off[:5], "25,100", "-n", namespace)
        assert again.returncode == 0, again.stderr
        dropped = (await rig.offload())["metadata"]["annotations"][FLIP_STRATEGY_ANNOTATION]
        assert dropped != annotation

        async def handled() -> bool:
            return bool((await rig.offload())["status"].get("handledFlipStrategy") == dropped)

        await wait_for(
            handled, timeout_seconds=30, what=f"the flip to be dropped; {rig.controller.log_tail()}"
        )
        home = (await flip_placement(rig, "home"))["status"]
        away = (await flip_placement(rig, "away"))["status"]
    assert (home["phase"], home["steps"], home["stepIntervalSeconds"]) == ("Succeeded", [100], 3)
    assert (away["phase"], away["steps"], away["stepIntervalSeconds"]) == ("Succeeded", [100], 3)
    assert [weight for _, weight in log.changes] == [0, 50, 100, 0, 100]
