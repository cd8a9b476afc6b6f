"""Every command the development tools print as advice names the folder they were given."""

from __future__ import annotations

import io
import shlex
from pathlib import Path

import pytest

from tests.unit.devtools import COMPONENTS, stopped_record, write_state
from vk_devtools.devcluster import cluster, commands, hints


@pytest.fixture(autouse=True)
def default_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    default = tmp_path / "default"
    monkeypatch.setenv("VK_PROVIDER_DEV_DIR", str(default))
    return default


def test_a_folder_other_than_the_default_is_named_in_the_command(tmp_path: Path) -> None:
    folder = tmp_path / "my plane"
    assert hints.dev(folder, "down") == f"vk-provider dev down --dir '{folder}'"
    assert shlex.split(hints.env(folder)) == ["eval", f"$(vk-provider dev env --dir '{folder}')"]


def test_the_folder_goes_before_arguments_that_start_with_dashes(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    assert hints.dev(folder, "kubectl", "--", "get", "nodes") == (
        f"vk-provider dev kubectl --dir {folder} -- get nodes"
    )


def test_the_default_folder_needs_no_option(default_folder: Path) -> None:
    assert hints.dev(default_folder, "restart", "controller") == "vk-provider dev restart controller"


def test_a_relative_folder_is_printed_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert hints.dev(Path("plane"), "up") == f"vk-provider dev up --dir {tmp_path / 'plane'}"


def started(directory: Path, names: tuple[str, ...]) -> str:
    state = write_state(directory, [stopped_record(directory, name) for name in names])
    out = io.StringIO()
    commands.print_started(cluster.UpResult(state, already_running=False, seconds=1.0), out=out)
    return out.getvalue()


def vk_provider_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "vk-provider dev" in line]


def test_up_with_the_demo_prints_its_commands_each_with_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    printed = started(folder, COMPONENTS)
    assert "kubectl offload flip tokens --to away --wait" in printed
    assert f"vk-provider dev demo --dir {folder}" in printed
    lines = vk_provider_lines(printed)
    assert len(lines) >= 3  # env, down, demo
    assert all(f"--dir {folder}" in line for line in lines), lines


def test_up_without_the_demo_prints_only_what_it_started(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    printed = started(folder, ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"))
    assert "components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler" in printed
    for demo_line in ("the demo runs", "kubectl offload", "dev demo", "curl", "Host:"):
        assert demo_line not in printed
    assert all(f"--dir {folder}" in line for line in vk_provider_lines(printed))


def test_a_plane_already_running_is_reported_on_out(tmp_path: Path) -> None:
    state = write_state(tmp_path / "p", [stopped_record(tmp_path / "p", "etcd")])
    out = io.StringIO()
    commands.print_started(cluster.UpResult(state, already_running=True, seconds=0.0), out=out)
    assert out.getvalue().startswith(f"a control plane is already running in {tmp_path / 'p'}")
