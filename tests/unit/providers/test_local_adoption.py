"""A new daemon on the same state folder adopts the local provider's pods instead of starting them again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from vk_provider.kit import procfs
from vk_provider.provider import ContainerStateKind, ExecAction, PodRef, Probe
from vk_providers.local.runs import MonitoredRun

from .local_support import (
    PYTHON,
    TEST_ADDRESS_RANGE,
    container_named,
    in_phase,
    is_ready,
    is_running,
    kill_processes_under,
    local_provider,
    logs_contain,
    make_provider,
    pod,
    read_logs,
    shell,
    wait_for_pod,
    wait_until,
)


def container_pid(state_dir: Path, uid: str, name: str, run: int = 0) -> int:
    status = json.loads((state_dir / "pods" / uid / name / f"{run}.status.json").read_text())
    return int(status["container_pid"])


def run_has_ended(state_dir: Path, uid: str, name: str, run: int = 0) -> bool:
    path = state_dir / "pods" / uid / name / f"{run}.status.json"
    return path.exists() and "exit_code" in json.loads(path.read_text())


async def test_a_new_provider_adopts_running_containers_without_starting_them_again(tmp_path: Path) -> None:
    request = pod("z1", shell("i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.02; done"))
    async with local_provider(tmp_path) as provider:  # also cleans up after the second instance
        await provider.create_pod(request)
        first = await wait_for_pod(provider, request.ref, is_running())
        await logs_contain(provider, request.ref, b"tick 2\n")
        pid = container_pid(tmp_path, "z1", "main")
        await provider.aclose()  # the daemon goes away; its containers do not

        successor = make_provider(tmp_path)
        try:
            adopted = await wait_for_pod(successor, request.ref, is_ready())
            assert adopted.pod_ip == first.pod_ip
            assert await successor.pod_address(request.ref) == first.pod_ip
            await successor.create_pod(request)  # the node, replaying its pods after a restart
            main = container_named(adopted, "main")
            assert main.state is ContainerStateKind.RUNNING
            assert main.restart_count == 0
            assert main.started_at == container_named(first, "main").started_at
            assert procfs.start_ticks_of(pid) is not None
            assert not (tmp_path / "pods" / "z1" / "main" / "1.status.json").exists()
            # Output written after the hand-over is in the same log.
            before = await read_logs(successor, request.ref)
            await wait_until(
                lambda: len(before) < len((tmp_path / "pods" / "z1" / "main" / "0.log").read_bytes())
            )
            assert [item.ref for item in await successor.list_pods()] == [request.ref]
        finally:
            await successor.aclose()


async def test_an_exit_while_no_daemon_ran_is_reported_from_the_status_file(tmp_path: Path) -> None:
    release = tmp_path / "release"
    waits = f"while [ ! -f {release} ]; do sleep 0.02; done"
    request = pod(
        "z2",
        shell(f"{waits}; echo leaving; exit 7", name="quitter"),
        shell(f"{waits}; exec sleep 600", name="stayer"),
        restart_policy="Never",
    )
    state_dir = tmp_path / "state"
    async with local_provider(state_dir) as provider:
        await provider.create_pod(request)
        await wait_for_pod(
            provider, request.ref, lambda state: is_running("quitter")(state) and is_running("stayer")(state)
        )
        await provider.aclose()
        release.touch()
        await wait_until(lambda: run_has_ended(state_dir, "z2", "quitter"))

        successor = make_provider(state_dir)
        try:
            state = await wait_for_pod(
                successor,
                request.ref,
                lambda state: container_named(state, "quitter").termination is not None,
            )
            quitter = container_named(state, "quitter")
            assert quitter.state is ContainerStateKind.TERMINATED
            assert quitter.termination is not None
            assert quitter.termination.exit_code == 7
            assert quitter.restart_count == 0
            assert container_named(state, "stayer").state is ContainerStateKind.RUNNING
            assert state.phase == "Running"
            assert await read_logs(successor, request.ref, "quitter") == b"leaving\n"
            await successor.delete_pod(request.ref, grace_period_seconds=5)
            state = await wait_for_pod(successor, request.ref, lambda state: state.terminated)
            assert state.phase == "Failed"
        finally:
            await successor.aclose()


async def test_a_deletion_in_progress_is_finished_by_the_next_provider(tmp_path: Path) -> None:
    request = pod("z3", shell("trap '' TERM; echo ready; while :; do sleep 0.02; done"))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await logs_contain(provider, request.ref, b"ready\n")
        await provider.delete_pod(request.ref, grace_period_seconds=0.3)
        await provider.aclose()

        successor = make_provider(tmp_path)
        try:
            state = await wait_for_pod(successor, request.ref, lambda state: state.terminated)
            termination = container_named(state, "main").termination
            assert termination is not None
            assert termination.exit_code == 128 + 9
            await successor.delete_pod(request.ref, grace_period_seconds=0)
            assert await successor.list_pods() == []
        finally:
            await successor.aclose()


async def test_a_finished_pod_is_reported_as_it_ended(tmp_path: Path) -> None:
    request = pod("z4", shell("exit 0"), restart_policy="Never")
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, in_phase("Succeeded"))
        await provider.aclose()
        successor = make_provider(tmp_path)
        try:
            state = await wait_for_pod(successor, request.ref, in_phase("Succeeded"))
            assert container_named(state, "main").restart_count == 0
            assert not (tmp_path / "pods" / "z4" / "main" / "1.log").exists()
        finally:
            await successor.aclose()


DAEMON_SCRIPT = """
import asyncio, sys
from pathlib import Path
from vk_provider.provider import ContainerSpec, PodRef, PodRequest, ProviderContext
from vk_providers.local import create_provider

async def main() -> None:
    context = ProviderContext("local-test", {"address_range": sys.argv[2]}, "127.0.0.1", Path(sys.argv[1]))
    provider = create_provider(context)
    ref = PodRef("default", "survivor", "k9")
    main = ContainerSpec(name="main", image="local", command=("sh", "-c", "echo alive; exec sleep 600"))
    await provider.create_pod(PodRequest(ref=ref, node_name="local-test", containers=(main,)))
    while (state := await provider.get_pod_state(ref)) is None or state.phase != "Running":
        await asyncio.sleep(0.02)  # a poll in a child process with no event source (noqa: sleep-ok)
    print("running", flush=True)
    await asyncio.sleep(600)  # the daemon idles until the test kills it (noqa: sleep-ok)

asyncio.run(main())
"""


async def test_containers_survive_a_daemon_killed_with_sigkill(tmp_path: Path) -> None:
    daemon = await asyncio.create_subprocess_exec(
        PYTHON,
        "-c",
        DAEMON_SCRIPT,
        str(tmp_path),
        TEST_ADDRESS_RANGE,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert daemon.stdout is not None
        assert await asyncio.wait_for(daemon.stdout.readline(), timeout=20) == b"running\n"
    except BaseException:
        await kill_processes_under(tmp_path)
        raise
    finally:
        daemon.kill()
        await daemon.wait()
    async with local_provider(tmp_path) as successor:
        ref = PodRef("default", "survivor", "k9")
        state = await wait_for_pod(successor, ref, is_ready())
        assert container_named(state, "main").restart_count == 0
        assert await read_logs(successor, ref) == b"alive\n"
        await successor.delete_pod(ref, grace_period_seconds=5)
        state = await wait_for_pod(successor, ref, lambda state: state.terminated)
        termination = container_named(state, "main").termination
        assert termination is not None
        assert termination.exit_code == 128 + 15


async def test_an_adopted_ready_container_stays_ready_until_its_probe_fails(tmp_path: Path) -> None:
    """A daemon restart must not show a ready container not ready for a moment (kubernetes#100277):
    the router would drop it from the traffic."""
    flag = tmp_path / "healthy"
    flag.touch()
    probe = Probe(
        action=ExecAction(("test", "-f", str(flag))),
        initial_delay_seconds=0.0,
        period_seconds=0.05,
        timeout_seconds=1.0,
        success_threshold=1,
        failure_threshold=20,
    )
    request = pod("z5", shell("while :; do sleep 0.05; done", readiness=probe))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, is_ready())
        await provider.aclose()
        flag.unlink()  # from now on the probe fails: only the recorded readiness can say ready

        successor = make_provider(tmp_path)
        try:
            first = await successor.get_pod_state(request.ref)
            assert first is not None
            assert container_named(first, "main").ready
            await wait_for_pod(successor, request.ref, lambda state: not container_named(state, "main").ready)
        finally:
            await successor.aclose()


def as_if_killed_while_starting(state_dir: Path, uid: str, run: int = 0) -> None:
    """Rewrite a pod's record to what a daemon SIGKILLed inside `MonitoredRun.spawn` leaves: the run
    announced as launching, its monitor not yet recorded."""
    record_path = state_dir / "pods" / uid / "pod.json"
    record = json.loads(record_path.read_text())
    (main,) = record["containers"]
    main.update(run=None, launching=run, restart_count=0, started=False, ready=False)
    record_path.write_text(json.dumps(record))


async def test_the_record_names_a_run_before_its_monitor_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    spawn = MonitoredRun.spawn

    def recording_spawn(directory: Path, number: int, spec_path: Path) -> tuple[MonitoredRun, int]:
        record = json.loads((tmp_path / "pods" / "z7" / "pod.json").read_text())
        seen.append(record["containers"][0]["launching"])
        return spawn(directory, number, spec_path)

    monkeypatch.setattr(MonitoredRun, "spawn", staticmethod(recording_spawn))
    request = pod("z7", shell("exec sleep 600"))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, is_running())
        assert seen == [0]
        record = json.loads((tmp_path / "pods" / "z7" / "pod.json").read_text())
        assert record["containers"][0]["launching"] is None  # recorded as the run now


async def test_a_monitor_started_but_not_recorded_is_adopted_and_stopped_with_its_pod(tmp_path: Path) -> None:
    request = pod("z8", shell("echo up; exec sleep 600"))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, is_running())
        await logs_contain(provider, request.ref, b"up\n")
        pid = container_pid(tmp_path, "z8", "main")
        await provider.aclose()
        as_if_killed_while_starting(tmp_path, "z8")

        successor = make_provider(tmp_path)
        try:
            state = await wait_for_pod(successor, request.ref, is_running())
            main = container_named(state, "main")
            assert main.restart_count == 0
            assert container_pid(tmp_path, "z8", "main") == pid  # the same process, not a second one
            assert not (tmp_path / "pods" / "z8" / "main" / "1.status.json").exists()
            await successor.delete_pod(request.ref, grace_period_seconds=5)
            state = await wait_for_pod(successor, request.ref, lambda state: state.terminated)
            termination = container_named(state, "main").termination
            assert termination is not None
            assert termination.exit_code == 128 + 15
            assert procfs.start_ticks_of(pid) is None  # not left running for nobody to stop
        finally:
            await successor.aclose()


async def test_a_run_started_but_not_recorded_that_ended_meanwhile_is_not_run_again(tmp_path: Path) -> None:
    request = pod("z9", shell("echo once; exit 3"), restart_policy="Never")
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, lambda state: state.phase == "Failed")
        await provider.aclose()
        as_if_killed_while_starting(tmp_path, "z9")
        record_path = tmp_path / "pods" / "z9" / "pod.json"
        record = json.loads(record_path.read_text())
        record["containers"][0].update(finished=False, termination=None)
        record.update(terminated_at=None)
        record_path.write_text(json.dumps(record))

        successor = make_provider(tmp_path)
        try:
            state = await wait_for_pod(successor, request.ref, lambda state: state.phase == "Failed")
            termination = container_named(state, "main").termination
            assert termination is not None
            assert termination.exit_code == 3
            assert container_named(state, "main").restart_count == 0
            assert await read_logs(successor, request.ref) == b"once\n"  # it ran once
        finally:
            await successor.aclose()


async def test_a_run_whose_monitor_never_started_starts_now(tmp_path: Path) -> None:
    request = pod("za", shell("echo started; exec sleep 600"))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, is_running())
        await provider.aclose()
        await kill_processes_under(tmp_path)  # as if the monitor had never been started
        for leftover in (tmp_path / "pods" / "za" / "main").glob("0.*"):
            leftover.unlink()
        as_if_killed_while_starting(tmp_path, "za")

        successor = make_provider(tmp_path)
        try:
            state = await wait_for_pod(successor, request.ref, is_running())
            assert container_named(state, "main").restart_count == 0
            await logs_contain(successor, request.ref, b"started\n")
        finally:
            await successor.aclose()
