"""The cluster-independent decisions of the commands: flip's patch and conflict check, the end of --wait,
and resolving the kubeconfig, context and namespace."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from vk_provider.offloadcli import commands, connection
from vk_provider.offloadcli.arguments import parse_steps


def offload(placement: str = "home", generation: int = 2, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "chat", "generation": generation, "resourceVersion": "7"},
        "spec": {"placement": placement},
        "status": status,
    }


def flip(to: str, steps: str | None = None, interval: int | None = None) -> argparse.Namespace:
    return argparse.Namespace(
        name="chat", to=to, steps=parse_steps(steps) if steps else None, interval=interval, wait=False
    )


def test_flip_patch_sets_placement_and_only_the_given_strategy_fields() -> None:
    assert commands.flip_patch(offload(), flip("away")) == {"spec": {"placement": "away"}}
    assert commands.flip_patch(offload(), flip("away", "25,50,100", 10)) == {
        "spec": {"placement": "away", "strategy": {"toAwaySteps": [25, 50, 100], "stepIntervalSeconds": 10}}
    }
    assert commands.flip_patch(offload("away"), flip("home", "50,100")) == {
        "spec": {"placement": "home", "strategy": {"toHomeSteps": [50, 100]}}
    }


@pytest.mark.parametrize("phase", ["Preparing", "Shifting", "Paused", "Finalizing"])
def test_flip_toward_the_other_side_of_a_running_migration_exits_2(phase: str) -> None:
    running = offload("away", phase=phase, targetPlacement="away", awayWeight=50)
    with pytest.raises(commands.CommandError) as refused:
        commands.flip_patch(running, flip("home"))
    assert refused.value.code == 2
    assert "already migrating to away" in refused.value.message
    # Toward the same side it only updates the strategy.
    assert commands.flip_patch(running, flip("away", interval=5))["spec"]["strategy"] == {
        "stepIntervalSeconds": 5
    }


@pytest.mark.parametrize("phase", ["Idle", "Succeeded", "RolledBack", "Failed"])
def test_flip_after_a_migration_ended_is_allowed(phase: str) -> None:
    ended = offload("away", phase=phase, targetPlacement="away")
    assert commands.flip_patch(ended, flip("home")) == {"spec": {"placement": "home"}}


def test_wait_ends_only_on_a_terminal_phase_for_the_new_generation() -> None:
    assert commands.finished_code(offload(phase="Succeeded", observedGeneration=1), 2, "away") is None
    assert commands.finished_code(offload(phase="Shifting", observedGeneration=2), 2, "away") is None
    assert commands.finished_code(offload(phase="Succeeded", observedGeneration=2), 2, "away") == 0
    assert commands.finished_code(offload(phase="RolledBack", observedGeneration=3), 2, "away") == 1
    assert commands.finished_code(offload(phase="Failed", observedGeneration=2), 2, "away") == 1
    # Without observedGeneration, the target placement tells whose ending it is.
    assert commands.finished_code(offload(phase="Succeeded", targetPlacement="home"), 2, "away") is None
    assert commands.finished_code(offload(phase="Succeeded", targetPlacement="away"), 2, "away") == 0


def test_abort_and_promote_need_a_running_migration() -> None:
    with pytest.raises(commands.CommandError) as refused:
        commands._require_running(offload(phase="Succeeded"), "chat", "abort")
    assert refused.value.code == 2
    assert "no migration running to abort (phase Succeeded)" in refused.value.message
    assert (
        commands._require_running(offload(phase="Paused", targetPlacement="home"), "chat", "abort") == "home"
    )


KUBECONFIG = """
current-context: lab
contexts:
- name: lab
  context: {cluster: c, user: u, namespace: ml}
- name: bare
  context: {cluster: c, user: u}
"""


def test_namespace_comes_from_the_flag_then_the_context_then_default(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    assert connection.resolve(str(path), None, "explicit").namespace == "explicit"
    assert connection.resolve(str(path), None, None).namespace == "ml"
    assert connection.resolve(str(path), "bare", None).namespace == "default"
    with pytest.raises(connection.ConfigurationError, match="context 'nope' is not in the kubeconfig"):
        connection.resolve(str(path), "nope", None)
    with pytest.raises(connection.ConfigurationError, match="cannot read kubeconfig"):
        connection.resolve(str(tmp_path / "missing"), None, None)


def test_kubeconfig_path_order(tmp_path: Path) -> None:
    assert connection.kubeconfig_path("/flag", {"KUBECONFIG": "/env"}) == Path("/flag")
    assert connection.kubeconfig_path(None, {"KUBECONFIG": f"/first:{tmp_path}"}) == Path("/first")
    assert connection.kubeconfig_path(None, {}) == Path.home() / ".kube" / "config"


def test_run_maps_configuration_errors_to_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    arguments = argparse.Namespace(
        migration_command="list", kubeconfig=str(tmp_path / "missing"), context=None, namespace=None
    )
    assert commands.run(arguments) == 2
    assert "cannot read kubeconfig" in capsys.readouterr().err
