"""`dev env`, `dev kubeconfig` and `dev kubectl` work whenever the apiserver answers, whatever else died."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.devtools import COMPONENTS, plane
from vk_devtools.devcluster import cluster, commands

ALL_BUT_THE_CONTROLLER = [name for name in COMPONENTS if name != "controller"]


@pytest.fixture
def apiserver_answers(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the (recorded, `sleep`) apiserver answers: no apiserver in a unit test."""
    answers = [True]
    monkeypatch.setattr(cluster, "apiserver_answers", lambda state: answers[0])
    return answers


def kubeconfig(folder: Path, out: io.StringIO, err: io.StringIO) -> int:
    return commands.kubeconfig(folder, out=out, err=err)


def env(folder: Path, out: io.StringIO, err: io.StringIO) -> int:
    return commands.env(folder, out=out, err=err)


def kubectl_refusal(folder: Path, out: io.StringIO, err: io.StringIO) -> int:
    # Only its refusals return; once it may run, it replaces this process with kubectl.
    return commands.kubectl(folder, ["get", "nodes"], err=err)


Command = Callable[[Path, io.StringIO, io.StringIO], int]


@pytest.mark.parametrize("command", [kubeconfig, env])
def test_a_dead_controller_is_warned_about_and_the_command_works(
    command: Command, tmp_path: Path, apiserver_answers: list[bool]
) -> None:
    folder = tmp_path / "plane"
    with plane(folder, ALL_BUT_THE_CONTROLLER) as state:
        out, err = io.StringIO(), io.StringIO()
        assert command(folder, out, err) == commands.EXIT_OK
        assert str(state.kubeconfig) in out.getvalue()
        assert err.getvalue().startswith(f"warning: not running in {folder}: controller;")
        assert f"vk-provider dev restart controller --dir {folder}" in err.getvalue()


def test_with_everything_running_nothing_is_said_on_stderr(
    tmp_path: Path, apiserver_answers: list[bool]
) -> None:
    folder = tmp_path / "plane"
    with plane(folder, COMPONENTS) as state:
        out, err = io.StringIO(), io.StringIO()
        assert commands.env(folder, out=out, err=err) == commands.EXIT_OK
        assert out.getvalue().splitlines()[0] == f"export KUBECONFIG={state.kubeconfig}"
        assert err.getvalue() == ""


@pytest.mark.parametrize("command", [kubeconfig, env, kubectl_refusal])
def test_a_dead_apiserver_is_refused_with_the_command_that_restarts_it(
    command: Command, tmp_path: Path, apiserver_answers: list[bool]
) -> None:
    folder = tmp_path / "plane"
    with plane(folder, [name for name in COMPONENTS if name != "kube-apiserver"]):
        out, err = io.StringIO(), io.StringIO()
        assert command(folder, out, err) == commands.EXIT_FAILED
        assert out.getvalue() == ""
        assert "the apiserver of the control plane" in err.getvalue()
        assert f"vk-provider dev restart kube-apiserver --dir {folder}" in err.getvalue()


@pytest.mark.parametrize("command", [kubeconfig, env, kubectl_refusal])
def test_an_apiserver_that_runs_but_does_not_answer_is_refused(
    command: Command, tmp_path: Path, apiserver_answers: list[bool]
) -> None:
    apiserver_answers[0] = False
    folder = tmp_path / "plane"
    with plane(folder, COMPONENTS):
        err = io.StringIO()
        assert command(folder, io.StringIO(), err) == commands.EXIT_FAILED
        assert "runs but does not answer" in err.getvalue()


def test_a_plane_stopped_by_down_is_not_running(tmp_path: Path, apiserver_answers: list[bool]) -> None:
    folder = tmp_path / "plane"
    with plane(folder, [], stopped=True):
        err = io.StringIO()
        assert commands.kubeconfig(folder, out=io.StringIO(), err=err) == commands.EXIT_FAILED
        assert err.getvalue() == (
            f"error: no control plane is running in {folder} (`dev down` stopped it); "
            f"start one with `vk-provider dev up --dir {folder}`\n"
        )


def test_a_plane_that_died_by_itself_is_pointed_at_down_then_up(
    tmp_path: Path, apiserver_answers: list[bool]
) -> None:
    folder = tmp_path / "plane"
    with plane(folder, []):
        err = io.StringIO()
        assert commands.env(folder, out=io.StringIO(), err=err) == commands.EXIT_FAILED
        assert f"vk-provider dev down --dir {folder} && vk-provider dev up --dir {folder}" in err.getvalue()
