"""The cluster-independent decisions of the commands: flip's patch and conflict check, the end of --wait,
and resolving the kubeconfig, context and namespace."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from tests.unit.offloadcli.test_status_watch import FakeApi
from vk_provider.kit import kubeconfigs
from vk_provider.kit.kube import KubeApi
from vk_provider.offload.oneoff import OneOffStrategy, parse_one_off
from vk_provider.offload.plan import Direction
from vk_provider.offloadcli import commands, connection, running
from vk_provider.offloadcli.arguments import parse_steps


def offload(placement: str = "home", generation: int = 2, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "chat", "generation": generation, "resourceVersion": "7"},
        "spec": {"placement": placement},
        "status": status,
    }


def flip(
    to: str,
    steps: str | None = None,
    interval: int | None = None,
    hold: int | None = None,
    *,
    save: bool = False,
) -> argparse.Namespace:
    return argparse.Namespace(
        name="chat",
        to=to,
        steps=parse_steps(steps) if steps else None,
        interval=interval,
        save=save,
        wait=False,
        hold=hold,
    )


NOW = datetime(2026, 12, 3, 16, 0, 0, tzinfo=UTC)
FLIP_STRATEGY = "offload.vk-provider.dev/flip-strategy"
HELD = {
    "offload.vk-provider.dev/hold-until": "next-flip",
    "offload.vk-provider.dev/flipped-by": "person",
    FLIP_STRATEGY: None,
}
"""What every flip by a person writes beside the placement, without --hold, --steps or --interval."""


def flip_patch(current: dict[str, Any], arguments: argparse.Namespace, **keywords: Any) -> dict[str, Any]:
    return commands.flip_patch(current, arguments, now=NOW, **keywords)


def test_a_flips_steps_and_interval_go_in_an_annotation_for_its_migration_never_in_the_spec() -> None:
    assert flip_patch(offload(), flip("away")) == {
        "metadata": {"annotations": HELD},
        "spec": {"placement": "away"},
    }
    one_off = flip_patch(offload(), flip("away", "25,50,100", 10))
    assert one_off["spec"] == {"placement": "away"}
    value = one_off["metadata"]["annotations"][FLIP_STRATEGY]
    assert json.loads(value) == {
        "placement": "away",
        "steps": [25, 50, 100],
        "stepIntervalSeconds": 10,
        "at": "2026-12-03T16:00:00.000000Z",
    }
    assert parse_one_off(value) == OneOffStrategy(value, Direction.TO_AWAY, (25, 50, 100), 10)
    home = flip_patch(offload("away"), flip("home", "50,100"))["metadata"]["annotations"][FLIP_STRATEGY]
    assert parse_one_off(home) == OneOffStrategy(home, Direction.TO_HOME, (50, 100), None)
    # The same steps a moment later are another flip's: the controller tells them apart.
    later = commands.flip_patch(offload(), flip("away", "25,50,100", 10), now=NOW + timedelta(seconds=1))
    assert later["metadata"]["annotations"][FLIP_STRATEGY] != value


def test_with_save_a_flips_steps_and_interval_go_in_the_spec_and_no_annotation() -> None:
    assert flip_patch(offload(), flip("away", "25,50,100", 10, save=True)) == {
        "metadata": {"annotations": HELD},
        "spec": {"placement": "away", "strategy": {"toAwaySteps": [25, 50, 100], "stepIntervalSeconds": 10}},
    }
    assert flip_patch(offload("away"), flip("home", "50,100", save=True)) == {
        "metadata": {"annotations": HELD},
        "spec": {"placement": "home", "strategy": {"toHomeSteps": [50, 100]}},
    }


async def test_save_without_steps_or_interval_exits_2_before_any_request() -> None:
    with pytest.raises(commands.CommandError) as refused:
        await commands.run_flip(cast(KubeApi, object()), flip("away", save=True), "ml")
    assert refused.value.code == 2
    assert "--save saves --steps and --interval" in refused.value.message


def test_the_flip_says_what_its_steps_and_interval_apply_to() -> None:
    assert commands.pace_text(flip("away")) is None
    assert commands.pace_text(flip("away", "25,100", 5)) == (
        "steps 25,100 and 5s per step for this migration only (--save keeps them in spec.strategy)"
    )
    assert commands.pace_text(flip("home", interval=60, save=True)) == (
        "60s per step saved in spec.strategy, for every later migration too"
    )


@pytest.mark.parametrize("phase", ["Preparing", "Shifting", "Paused", "Finalizing"])
def test_flip_toward_the_other_side_of_a_running_migration_exits_2(phase: str) -> None:
    running = offload("away", phase=phase, targetPlacement="away", awayWeight=50)
    with pytest.raises(commands.CommandError) as refused:
        flip_patch(running, flip("home"))
    assert refused.value.code == 2
    assert "already migrating to away" in refused.value.message
    # Toward the same side it is allowed (its steps and interval apply to no migration: none starts).
    assert flip_patch(running, flip("away", interval=5))["spec"] == {"placement": "away"}


@pytest.mark.parametrize("phase", ["Idle", "Succeeded", "RolledBack", "Failed"])
def test_flip_after_a_migration_ended_is_allowed(phase: str) -> None:
    ended = offload("away", phase=phase, targetPlacement="away")
    assert flip_patch(ended, flip("home"))["spec"] == {"placement": "home"}


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
    assert kubeconfigs.kubeconfig_path("/flag", {"KUBECONFIG": "/env"}) == Path("/flag")
    assert kubeconfigs.kubeconfig_path(None, {"KUBECONFIG": f"/first:{tmp_path}"}) == Path("/first")
    assert kubeconfigs.kubeconfig_path(None, {}) == Path.home() / ".kube" / "config"


def test_run_maps_configuration_errors_to_exit_1_as_kubectl_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = argparse.Namespace(
        migration_command="list", kubeconfig=str(tmp_path / "missing"), context=None, namespace=None
    )
    assert running.run(arguments) == 1
    assert "cannot read kubeconfig" in capsys.readouterr().err


RETRY = "offload.vk-provider.dev/retry"


@pytest.mark.parametrize("phase", ["RolledBack", "Failed"])
def test_a_flip_toward_where_the_last_migration_failed_to_go_asks_for_a_retry(phase: str) -> None:
    failed = offload("away", phase=phase, targetPlacement="away", awayWeight=0)
    assert flip_patch(failed, flip("away"), retry="t1") == {
        "metadata": {"annotations": {**HELD, RETRY: "t1"}},
        "spec": {"placement": "away"},
    }
    # Toward the other side it is an ordinary flip, as is any flip after a success.
    assert flip_patch(failed, flip("home"), retry="t1") == {
        "metadata": {"annotations": HELD},
        "spec": {"placement": "home"},
    }
    succeeded = offload("away", phase="Succeeded", targetPlacement="away")
    assert RETRY not in flip_patch(succeeded, flip("away"), retry="t1")["metadata"]["annotations"]


def test_waiting_on_a_retry_ignores_the_old_ending_until_the_controller_takes_it_up() -> None:
    old = offload("away", phase="RolledBack", observedGeneration=2, handledRetry="t0")
    assert commands.finished_code(old, 2, "away", retry="t1") is None
    started = offload("away", phase="Preparing", observedGeneration=2, handledRetry="t1")
    assert commands.finished_code(started, 2, "away", retry="t1") is None
    assert commands.finished_code(offload("away", phase="Succeeded", handledRetry="t1"), 2, "away", "t1") == 0
    assert commands.finished_code(offload("away", phase="Failed", handledRetry="t1"), 2, "away", "t1") == 1


def _not_ready(generation: int, observed: int) -> dict[str, Any]:
    ready = {"type": "Ready", "status": "False", "reason": "HomeDeploymentNotFound", "message": "no chat"}
    return offload("away", generation, phase="Idle", observedGeneration=observed, conditions=[ready])


def test_not_ready_counts_once_the_controller_judged_the_new_generation() -> None:
    assert commands.not_ready(_not_ready(3, 2), 3) is None
    assert commands.not_ready(_not_ready(3, 3), 3) == "HomeDeploymentNotFound: no chat"
    ready = offload("away", 3, observedGeneration=3, conditions=[{"type": "Ready", "status": "True"}])
    assert commands.not_ready(ready, 3) is None


async def test_flip_wait_fails_fast_with_the_reason_when_the_offload_is_not_ready(
    capsys: pytest.CaptureFixture[str],
) -> None:
    patched = _not_ready(3, 2)
    patched["metadata"]["namespace"] = "ml"
    api = FakeApi(patched, [])
    judged = _not_ready(3, 3)
    judged["metadata"]["namespace"] = "ml"
    api.change(judged)
    code = await asyncio.wait_for(commands.wait_for_end(cast(KubeApi, api), "ml", patched, "away"), 5)
    assert code == 1
    error = capsys.readouterr().err
    assert "offload chat is not Ready (HomeDeploymentNotFound: no chat)" in error
    assert "kubectl offload flip chat --to away -n ml" in error


async def test_a_failed_migration_says_how_to_retry(capsys: pytest.CaptureFixture[str]) -> None:
    ended = offload(
        "away",
        2,
        phase="RolledBack",
        observedGeneration=2,
        targetPlacement="away",
        outcomeReason="GatesFailed",
    )
    ended["metadata"]["namespace"] = "ml"
    code = await commands.wait_for_end(cast(KubeApi, FakeApi(ended, [])), "ml", ended, "away")
    assert code == 1
    error = capsys.readouterr().err
    assert (
        "ended RolledBack (GatesFailed); to try it again: `kubectl offload flip chat --to away -n ml`"
        in error
    )
    assert "to go back: `kubectl offload flip chat --to home -n ml`" in error
