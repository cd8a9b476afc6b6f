"""`dev restart COMPONENT`: the names it takes, and a restart as `up` started the component."""

from __future__ import annotations

import argparse
import io
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.unit.devtools import COMPONENTS, plane, stopped_record, write_state
from vk_devtools import commandline
from vk_devtools.devcluster import cluster, commands, localnode, processes, restart


def parse(*words: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vk-provider")
    commandline.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["dev", *words])


def test_the_command_line_takes_a_component_a_folder_and_a_timeout(tmp_path: Path) -> None:
    parsed = parse("restart", "controller", "--dir", str(tmp_path), "--start-timeout", "30")
    assert (parsed.dev_command, parsed.component, parsed.dir, parsed.start_timeout) == (
        "restart",
        "controller",
        tmp_path,
        30,
    )
    assert parse("restart", "node/local-gpu").start_timeout == 180


def test_the_command_line_requires_a_component(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse("restart")
    assert exit_.value.code == 2
    assert "COMPONENT" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("controller", "controller"),  # not kube-controller-manager
        ("controller-manager", "kube-controller-manager"),
        ("kube-controller-manager", "kube-controller-manager"),
        ("apiserver", "kube-apiserver"),
        ("scheduler", "kube-scheduler"),
        ("etcd", "etcd"),
        ("node/local-gpu", "node/local-gpu"),
        ("local-gpu", "node/local-gpu"),
        ("burst-gpu", "node/burst-gpu"),
        ("router", "router"),
    ],
)
def test_names_are_those_status_shows_or_without_their_prefix(tmp_path: Path, given: str, meant: str) -> None:
    state = write_state(tmp_path, [stopped_record(tmp_path, name) for name in COMPONENTS])
    assert restart.resolve(state, given) == meant


@pytest.mark.parametrize("given", ["gpu", "kube-", "node", "Controller", "runpod-standin", ""])
def test_an_unknown_name_is_refused_with_the_known_ones(tmp_path: Path, given: str) -> None:
    state = write_state(tmp_path, [stopped_record(tmp_path, name) for name in COMPONENTS])
    with pytest.raises(restart.UnknownComponentError) as error:
        restart.resolve(state, given)
    assert error.value.known == list(COMPONENTS)


def test_the_command_exits_2_and_lists_the_names(tmp_path: Path) -> None:
    write_state(tmp_path, [stopped_record(tmp_path, name) for name in COMPONENTS])
    err = io.StringIO()
    assert commands.restart(tmp_path, "contoller", timeout_seconds=5, err=err) == commands.EXIT_USAGE
    assert err.getvalue() == (
        "error: no component named 'contoller'; the components are: "
        "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, node/local-gpu, node/burst-gpu, "
        "router, controller\n"
    )


def test_without_a_plane_it_says_how_to_start_one(tmp_path: Path) -> None:
    err = io.StringIO()
    assert commands.restart(tmp_path, "controller", timeout_seconds=5, err=err) == commands.EXIT_FAILED
    assert f"vk-provider dev up --dir {tmp_path}" in err.getvalue()


def test_a_record_without_a_command_line_cannot_be_restarted(tmp_path: Path) -> None:
    legacy = processes.ProcessRecord(name="controller", pid=1, start_ticks=-1, log=str(tmp_path / "c.log"))
    write_state(tmp_path, [legacy])
    err = io.StringIO()
    assert commands.restart(tmp_path, "controller", timeout_seconds=5, err=err) == commands.EXIT_FAILED
    assert "does not say how controller was started" in err.getvalue()
    assert f"vk-provider dev down --dir {tmp_path} && vk-provider dev up --dir {tmp_path}" in err.getvalue()


def recorded(folder: Path, name: str) -> processes.ProcessRecord:
    state = cluster.ClusterState.load(folder)
    assert state is not None
    record = state.record(name)
    assert record is not None
    return record


def test_a_dead_component_is_started_with_its_command_environment_and_log(tmp_path: Path) -> None:
    folder = tmp_path / "plane"
    with plane(folder, [name for name in COMPONENTS if name != "controller"]) as state:
        script = 'echo "marked $VK_TEST_MARK"; exec sleep 300'
        dead = state.record("controller")
        assert dead is not None
        dead = processes.ProcessRecord(
            name="controller",
            pid=dead.pid,
            start_ticks=-1,
            log=dead.log,
            argv=("sh", "-c", script),
            env={"VK_TEST_MARK": "kept"},
        )
        state.with_record(dead).save()
        Path(dead.log).parent.mkdir(parents=True, exist_ok=True)
        Path(dead.log).write_text("the first life\n")
        out = io.StringIO()
        assert commands.restart(folder, "controller", timeout_seconds=5, out=out) == commands.EXIT_OK
        assert out.getvalue().startswith("started again controller: running (it has no health check)")
        new = recorded(folder, "controller")
        assert processes.is_running(new)
        assert (new.argv, dict(new.env), new.log) == (dead.argv, {"VK_TEST_MARK": "kept"}, dead.log)
        deadline = time.monotonic() + 10
        while "marked kept" not in Path(new.log).read_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # polling the log with a deadline (noqa: sleep-ok)
        log = Path(new.log).read_text()
        assert log.startswith("the first life\n")
        assert "restarted by `vk-provider dev restart`" in log
        assert "marked kept" in log
        # Every other component is recorded as it was.
        after = cluster.ClusterState.load(folder)
        assert after is not None
        assert [r for r in after.processes if r.name != "controller"] == [
            r for r in state.processes if r.name != "controller"
        ]


def test_a_running_component_is_stopped_then_started_again(tmp_path: Path) -> None:
    folder = tmp_path / "plane"
    with plane(folder, COMPONENTS) as state:
        before = state.record("controller")
        assert before is not None
        result = restart.restart(state, "controller", timeout_seconds=5)
        assert result.was_running
        assert not result.health_checked
        assert not processes.is_running(before)
        assert processes.is_running(result.record)
        assert result.record.pid != before.pid
        assert recorded(folder, "controller") == result.record
        assert all(processes.is_running(record) for record in state.processes if record.name != "controller")


def test_a_component_that_exits_at_once_fails_the_restart_with_its_log(tmp_path: Path) -> None:
    folder = tmp_path / "plane"
    with plane(folder, []) as state:
        broken = processes.ProcessRecord(
            name="router",
            pid=1,
            start_ticks=-1,
            log=str(folder / "logs" / "router.log"),
            argv=("sh", "-c", "echo 'address already in use' >&2; exit 3"),
        )
        state.with_record(broken).save()
        err = io.StringIO()
        assert commands.restart(folder, "router", timeout_seconds=5, err=err) == commands.EXIT_FAILED
        assert "router exited with code 3 while starting" in err.getvalue()
        assert "address already in use" in err.getvalue()
        assert "also not running (it may need them): etcd" in err.getvalue()


NOW = datetime(2026, 12, 3, 13, 0, 0, 500000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("lease", "renewed"),
    [
        (None, False),
        ("", False),
        ('{"spec": {}}', False),
        ('{"spec": {"renewTime": "not a time"}}', False),
        ('{"spec": {"renewTime": "2026-12-03T13:00:00.499999Z"}}', False),  # the old process's beat
        ('{"spec": {"renewTime": "2026-12-03T13:00:00.500000Z"}}', True),
        ('{"spec": {"renewTime": "2026-12-03T13:00:07.000001Z"}}', True),
    ],
)
def test_a_restarted_node_counts_only_once_it_renewed_its_lease(lease: str | None, renewed: bool) -> None:
    assert localnode.renewed_since(lease, NOW) is renewed
