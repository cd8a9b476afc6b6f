"""Process groups: stop reaches children too, and a recycled pid is never signalled."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from vk_devtools.devcluster import processes
from vk_devtools.devcluster.processes import ComponentFailedError
from vk_provider.kit import procfs


def pids_in_group(pgid: int) -> set[int]:
    return set(procfs.live_members_of_group(pgid))


def test_stop_ends_the_process_and_everything_it_spawned(tmp_path: Path) -> None:
    process, record = processes.start(
        "parent", ["sh", "-c", "sleep 300 & sleep 300 & wait"], log_path=tmp_path / "parent.log"
    )
    processes.wait_until(
        "parent",
        lambda: len(pids_in_group(record.pid)) == 3,
        process=process,
        log_path=tmp_path / "parent.log",
        timeout_seconds=10,
    )
    assert processes.stop(record, grace_seconds=5)
    assert not processes.is_running(record)
    assert pids_in_group(record.pid) == set()
    assert process.poll() is not None


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    process, record = processes.start(
        "stubborn",
        ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"],
        log_path=tmp_path / "s.log",
    )
    processes.wait_until(
        "stubborn",
        lambda: "ready" in (tmp_path / "s.log").read_text(),
        process=process,
        log_path=tmp_path / "s.log",
        timeout_seconds=10,
    )
    started = time.monotonic()
    assert processes.stop(record, grace_seconds=1)
    assert not processes.is_running(record)
    assert time.monotonic() - started >= 1


def test_a_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    _, record = processes.start("sleeper", ["sleep", "300"], log_path=tmp_path / "sleeper.log")
    impostor = dataclasses.replace(record, start_ticks=record.start_ticks + 1)
    assert not processes.is_running(impostor)
    assert not processes.stop(impostor)  # nothing is signalled
    assert processes.is_running(record)
    assert processes.stop(record)


def test_a_component_that_exits_while_starting_is_named_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "broken.log"
    process, _ = processes.start(
        "broken", ["sh", "-c", "echo 'bind: address already in use' >&2; exit 3"], log_path=log
    )
    with pytest.raises(ComponentFailedError) as failure:
        processes.wait_until("broken", lambda: False, process=process, log_path=log, timeout_seconds=30)
    assert failure.value.component == "broken"
    assert "exited with code 3" in str(failure.value)
    assert "address already in use" in str(failure.value)


def test_a_component_that_never_becomes_healthy_times_out_by_name(tmp_path: Path) -> None:
    log = tmp_path / "slow.log"
    process, record = processes.start("slow", ["sleep", "300"], log_path=log)
    try:
        with pytest.raises(ComponentFailedError, match="slow did not become healthy within 1 seconds"):
            processes.wait_until("slow", lambda: False, process=process, log_path=log, timeout_seconds=1)
    finally:
        processes.stop(record)


def test_descendants_are_found_down_the_whole_tree(tmp_path: Path) -> None:
    # A shell whose child shell runs a sleep: the grandchild counts too.
    process, record = processes.start(
        "tree", ["sh", "-c", "sh -c 'sleep 300 & wait' & wait"], log_path=tmp_path / "tree.log"
    )
    try:
        processes.wait_until(
            "tree",
            lambda: len(procfs.descendants_of(record.pid)) == 2,
            process=process,
            log_path=tmp_path / "tree.log",
            timeout_seconds=10,
        )
        assert set(procfs.descendants_of(record.pid)) == pids_in_group(record.pid) - {record.pid}
    finally:
        processes.stop(record, grace_seconds=5)
