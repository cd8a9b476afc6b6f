"""`--dry-run=client|server` on every command that writes, applied once where the command gets its
connection: client sends no write and says what it would send; server sends each with dryRun=All."""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from tests.unit.offloadcli.test_policy_commands import PatchingApi, offload
from tests.unit.offloadcli.test_uninstall_flow import ScriptedApi
from tests.unit.offloadcli.test_uninstall_flow import arguments as uninstall_arguments
from vk_provider.cli import build_offload_parser, offload_main
from vk_provider.kit.kube import MERGE_PATCH, KubeApi
from vk_provider.offloadcli import commands, dryrun, running, uninstall
from vk_provider.offloadcli.connection import Target
from vk_provider.offloadcli.dryrun import DryRunApi, merge_patch

WRITERS = [
    ["flip", "chat", "--to", "away"],
    ["pause", "chat"],
    ["resume", "chat"],
    ["abort", "chat"],
    ["promote", "chat"],
    ["auto", "off", "chat"],
    ["uninstall"],
]


@pytest.mark.parametrize("command", WRITERS)
def test_every_command_that_writes_takes_dry_run_and_a_bare_one_means_client(command: list[str]) -> None:
    parser = build_offload_parser()
    assert parser.parse_args(command).dry_run is None
    assert parser.parse_args([*command, "--dry-run"]).dry_run == "client"
    assert parser.parse_args([*command, "--dry-run=server"]).dry_run == "server"
    assert parser.parse_args([*command, "--dry-run", "client"]).dry_run == "client"


@pytest.mark.parametrize("command", [["list"], ["status", "chat"], ["policy", "list"], ["version"]])
def test_commands_that_only_read_have_no_dry_run(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        offload_main([*command, "--dry-run"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --dry-run" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("words", "reason"),
    [
        (["pause", "--dry-run=later", "chat"], "'later' is not a dry-run mode (client or server)"),
        # A bare --dry-run takes the next word as its mode; the message says how to write it instead.
        (["pause", "--dry-run", "chat"], "before a NAME write --dry-run=client"),
    ],
)
def test_a_bad_mode_is_one_line_and_exit_2(
    words: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        offload_main(words)
    assert exited.value.code == 2
    problem = capsys.readouterr().err.rstrip("\n")
    assert "\n" not in problem  # one line: no usage screen
    assert problem.startswith("kubectl offload pause: error: argument --dry-run: ")
    assert reason in problem


def test_a_merge_patch_applied_here_as_the_apiserver_applies_it() -> None:
    current = {
        "metadata": {"annotations": {"a": "1", "b": "2"}},
        "spec": {"placement": "home", "paused": True},
    }
    patch = {"metadata": {"annotations": {"a": None, "c": "3"}}, "spec": {"placement": "away"}}
    assert merge_patch(current, patch) == {
        "metadata": {"annotations": {"b": "2", "c": "3"}},
        "spec": {"placement": "away", "paused": True},
    }
    assert current["spec"]["placement"] == "home"  # the read object itself is left alone


class ServerRecordingApi(PatchingApi):
    """PatchingApi that also answers `request`, recording each (method, path, query, body)."""

    def __init__(self, current: dict[str, Any]) -> None:
        super().__init__(current)
        self.requests: list[tuple[str, str, dict[str, Any], Any]] = []

    async def request(
        self, method: str, path: str, *, query: Mapping[str, Any] | None = None, body: Any = None, **_: Any
    ) -> dict[str, Any]:
        self.requests.append((method, path, dict(query or {}), copy.deepcopy(body)))
        return merge_patch(copy.deepcopy(self.current), body) if method == "PATCH" else {}


def flip_arguments(dry_run: str | None) -> argparse.Namespace:
    return argparse.Namespace(
        name="chat", to="away", steps=None, interval=None, save=False, wait=False, hold=None, dry_run=dry_run
    )


async def test_a_client_dry_run_flip_sends_no_write_and_says_what_it_would(
    capsys: pytest.CaptureFixture[str],
) -> None:
    inner = ServerRecordingApi(offload())
    api = DryRunApi(cast(KubeApi, inner), dryrun.CLIENT, commands.emit)

    assert await commands.run_flip(api, flip_arguments("client"), "ml") == 0

    assert inner.patches == []
    assert inner.requests == []
    out = capsys.readouterr().out.splitlines()
    would = out[0]
    assert would.startswith("dry run: would patch offloads/chat in namespace ml: ")
    assert json.loads(would.split(": ", 2)[2])["spec"] == {"placement": "away"}
    assert out[1] == "offload chat: placement set to away (dry run)"
    assert out[2].startswith("offload chat: OffloadPolicies leave it alone until the next flip by a person")
    assert out[2].endswith("(dry run)")


async def test_a_server_dry_run_sends_each_write_with_dry_run_all(capsys: pytest.CaptureFixture[str]) -> None:
    inner = ServerRecordingApi(offload())
    api = DryRunApi(cast(KubeApi, inner), dryrun.SERVER, commands.emit)
    arguments = argparse.Namespace(name="chat", dry_run="server")

    assert await commands.run_pause(api, arguments, "ml") == 0

    assert inner.patches == []
    [(method, path, query, body)] = inner.requests
    assert (method, path, query, body) == (
        "PATCH",
        "/apis/offload.vk-provider.dev/v1alpha1/namespaces/ml/offloads/chat",
        {"dryRun": "All"},
        {"spec": {"paused": True}},
    )
    accepted = "server dry run: the apiserver accepts the patch of offloads/chat in namespace ml: "
    assert capsys.readouterr().out.splitlines() == [
        accepted + '{"spec": {"paused": true}}',
        "offload chat: paused (server dry run)",
    ]


async def test_a_client_dry_run_patch_answers_with_the_object_as_the_patch_would_leave_it() -> None:
    inner = ServerRecordingApi(offload())
    api = DryRunApi(cast(KubeApi, inner), dryrun.CLIENT, lambda _: None)
    path = "/apis/offload.vk-provider.dev/v1alpha1/namespaces/ml/offloads/chat"
    result = await api.patch(path, {"spec": {"paused": True}}, content_type=MERGE_PATCH)
    assert result["spec"] == {"placement": "home", "paused": True}
    assert await api.delete(path) == {}
    assert inner.requests == []


def test_the_runner_wraps_the_connection_once_for_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    inner = ServerRecordingApi(offload())
    closed: list[bool] = []

    async def connect(target: Target) -> KubeApi:
        async def close() -> None:
            closed.append(True)

        inner.close = close  # type: ignore[attr-defined]
        return cast(KubeApi, inner)

    monkeypatch.setattr(running, "connect", connect)
    monkeypatch.setattr(
        running, "resolve", lambda *_: Target(kubeconfig=Path("/k"), context=None, namespace="ml")
    )
    for words in (["resume", "chat"], ["auto", "on", "chat"], ["pause", "chat"]):
        arguments = build_offload_parser().parse_args([*words, "--dry-run=client"])
        assert running.run(arguments) == 0
    assert inner.patches == []
    assert inner.requests == []
    assert closed == [True, True, True]


@pytest.mark.parametrize("wrapped", [True, False], ids=["as-run", "unwrapped"])
async def test_uninstall_server_dry_run_has_the_apiserver_check_the_patch_home_and_the_delete(
    wrapped: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """As run, the connection is the dry-run one; handed a plain one, it still writes nothing real."""

    class Recording(ScriptedApi):
        requests: list[tuple[str, str, dict[str, Any]]]

        async def request(
            self, method: str, path: str, *, query: Mapping[str, Any] | None = None, **_: Any
        ) -> dict[str, Any]:
            self.requests.append((method, path, dict(query or {})))
            return copy.deepcopy(self.offload)

    inner = Recording(controller=True)
    inner.requests = []
    api = DryRunApi(cast(KubeApi, inner), dryrun.SERVER, commands.emit) if wrapped else cast(KubeApi, inner)

    assert await uninstall.run_uninstall(api, uninstall_arguments(dry_run="server"), "default") == 0

    assert inner.writes == []
    path = "/apis/offload.vk-provider.dev/v1alpha1/namespaces/ml/offloads/chat"
    assert inner.requests == [("PATCH", path, {"dryRun": "All"}), ("DELETE", path, {"dryRun": "All"})]
    out = capsys.readouterr().out
    assert "the apiserver accepts the deletion of offloads/chat in namespace ml" in out
    assert out.rstrip().endswith("nothing was changed (--dry-run=server)")


@pytest.mark.parametrize(
    ("words", "reason"),
    [
        (["--wait", "--dry-run"], "--wait waits for a migration and --dry-run starts none"),
        (["--timeout", "5m"], "--timeout bounds --wait: give --wait too"),
    ],
)
def test_flag_combinations_that_cannot_work_exit_2_before_any_cluster_is_looked_for(
    words: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = "/nonexistent/kubeconfig"
    assert offload_main(["flip", "chat", "--to", "away", "--kubeconfig", missing, *words]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {reason}")
    assert error.count("\n") == 1
    assert "kubeconfig" not in error
