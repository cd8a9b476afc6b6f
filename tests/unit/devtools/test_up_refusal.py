"""`dev up` never deletes the data of a plane with a component alive, and keeps a dead one's aside."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.unit.devtools import COMPONENTS, plane
from vk_devtools.devcluster import cluster, commands


def data_is_intact(directory: Path) -> bool:
    return (directory / "etcd-data" / "db").read_text() == "objects" and (directory / "state.json").exists()


def up_settings(directory: Path) -> cluster.ClusterSettings:
    return cluster.ClusterSettings(directory=directory, use_preferred_ports=False)


def test_up_refuses_a_plane_with_a_dead_controller_names_what_runs_and_how_to_go_on(tmp_path: Path) -> None:
    folder = tmp_path / "plane"
    alive = [name for name in COMPONENTS if name != "controller"]
    with plane(folder, alive):
        err = io.StringIO()
        assert commands.up(up_settings(folder), out=io.StringIO(), err=err) == commands.EXIT_FAILED
        message = err.getvalue()
        assert "partly running" in message
        assert "kube-apiserver" in message
        assert "controller not" in message
        assert f"vk-provider dev restart controller --dir {folder}" in message
        assert f"vk-provider dev down --dir {folder}" in message
        assert data_is_intact(folder)


def test_cluster_up_itself_refuses_while_one_component_is_alive(tmp_path: Path) -> None:
    folder = tmp_path / "plane"
    with plane(folder, ["etcd"]):
        with pytest.raises(cluster.PlaneStillRunningError) as refusal:
            cluster.up(
                up_settings(folder), bin_dir=tmp_path / "bin", kubernetes_version="v1.37.2", out=io.StringIO()
            )
        assert refusal.value.running == ["etcd"]
        assert "controller" in refusal.value.stopped
        assert data_is_intact(folder)
        state = cluster.ClusterState.load(folder)
        assert state is not None
        assert state.running()["etcd"]


def test_up_moves_a_plane_that_died_without_down_aside_before_starting_afresh(tmp_path: Path) -> None:
    folder = tmp_path / "plane"
    with plane(folder, []):
        existing = cluster.ClusterState.load(folder)
        assert existing is not None
        cluster.check_folder_may_be_reused(existing)  # nothing alive: no refusal
        out = io.StringIO()
        with pytest.raises(FileNotFoundError):  # no binaries here: the start itself fails, afterwards
            cluster.up(up_settings(folder), bin_dir=tmp_path / "bin", kubernetes_version="v1.37.2", out=out)
        kept = cluster.previous_folder(folder)
        assert f"its data and logs are in {kept}" in out.getvalue()
        assert data_is_intact(kept)


def test_after_down_the_folder_may_be_reused(tmp_path: Path) -> None:
    folder = tmp_path / "plane"
    with plane(folder, ["etcd", "router"]):
        out = io.StringIO()
        assert commands.down(folder, out=out) == commands.EXIT_OK
        assert "etcd" in out.getvalue()
        assert "router" in out.getvalue()
        assert f"until the next `vk-provider dev up --dir {folder}`" in out.getvalue()
        state = cluster.ClusterState.load(folder)
        assert state is not None
        assert state.stopped
        cluster.check_folder_may_be_reused(state)  # raises nothing


def test_down_of_a_plane_that_died_by_itself_marks_it_stopped_and_deletes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "plane"
    with plane(folder, []):
        before = cluster.ClusterState.load(folder)
        assert before is not None
        assert not before.stopped
        commands.down(folder, out=io.StringIO())
        after = cluster.ClusterState.load(folder)
        assert after is not None
        assert after.stopped
        cluster.check_folder_may_be_reused(after)
        assert data_is_intact(folder)  # `down` deletes nothing itself


def test_a_state_file_written_before_the_stopped_flag_reads_as_not_stopped(tmp_path: Path) -> None:
    folder = tmp_path / "plane"
    with plane(folder, []) as state:
        legacy = state.to_json().replace('"stopped": false', '"legacy": true')
        (folder / "state.json").write_text(legacy)
        loaded = cluster.ClusterState.load(folder)
        assert loaded is not None
        assert not loaded.stopped
