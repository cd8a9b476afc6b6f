"""`vk-provider dev` commands when no plane is running, and a folder that is not ours is never wiped."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from vk_devtools.devcluster import cluster, commands


def test_down_with_nothing_running_says_so_and_succeeds(tmp_path: Path) -> None:
    out = io.StringIO()
    assert commands.down(tmp_path, out=out) == 0
    assert out.getvalue() == f"no control plane is running in {tmp_path}\n"


def test_status_with_nothing_running_exits_3(tmp_path: Path) -> None:
    out = io.StringIO()
    assert commands.status(tmp_path, out=out) == commands.EXIT_NOT_RUNNING
    assert "no control plane" in out.getvalue()


@pytest.mark.parametrize("command", [commands.kubeconfig, commands.env])
def test_kubeconfig_and_env_without_a_plane_fail_with_advice(command, tmp_path: Path) -> None:
    err = io.StringIO()
    assert command(tmp_path, out=io.StringIO(), err=err) == commands.EXIT_FAILED
    assert "vk-provider dev up" in err.getvalue()


def test_up_refuses_a_folder_that_is_not_a_cluster_folder(tmp_path: Path) -> None:
    precious = tmp_path / "notes.txt"
    precious.write_text("keep me")
    with pytest.raises(FileExistsError, match="not a vk-provider development cluster folder"):
        cluster.up(
            cluster.ClusterSettings(directory=tmp_path),
            bin_dir=tmp_path / "bin",
            kubernetes_version="v1.37.2",
            out=io.StringIO(),
        )
    assert precious.read_text() == "keep me"
