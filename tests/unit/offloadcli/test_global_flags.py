"""`kubectl offload -n ml list`: the connection flags before the command as well as after it, the one
after winning when both are given."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from vk_provider.cli import build_offload_parser, build_parser, offload_main
from vk_provider.offloadcli import running
from vk_provider.offloadcli.globalflags import merge_global_flags


def parse_plugin(*words: str) -> argparse.Namespace:
    return merge_global_flags(build_offload_parser().parse_args(words))


def parse_migrate(*words: str) -> argparse.Namespace:
    return merge_global_flags(build_parser().parse_args(["migrate", *words]))


PARSERS = [parse_plugin, parse_migrate]


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize(
    "words",
    [
        ["-n", "ml", "--kubeconfig", "/k", "--context", "lab", "list"],
        ["list", "-n", "ml", "--kubeconfig", "/k", "--context", "lab"],
        ["--namespace=ml", "list", "--context", "lab", "--kubeconfig=/k"],
    ],
)
def test_the_connection_flags_work_before_or_after_the_command(
    parse: Callable[..., argparse.Namespace], words: list[str]
) -> None:
    parsed = parse(*words)
    assert (parsed.migration_command, parsed.namespace, parsed.kubeconfig, parsed.context) == (
        "list",
        "ml",
        "/k",
        "lab",
    )


@pytest.mark.parametrize("parse", PARSERS)
def test_the_value_after_the_command_wins(parse: Callable[..., argparse.Namespace]) -> None:
    parsed = parse("-n", "before", "--context", "early", "flip", "chat", "--to", "away", "-n", "after")
    assert (parsed.namespace, parsed.context) == ("after", "early")


def test_each_command_takes_them_first_and_one_without_a_use_for_a_flag_ignores_it() -> None:
    assert parse_plugin("-n", "ml", "uninstall").namespace == "ml"
    assert parse_plugin("--context", "lab", "policy", "status", "p").context == "lab"
    version = parse_plugin("-n", "ml", "--kubeconfig", "/k", "version")
    assert version.kubeconfig == "/k"
    assert not hasattr(version, "namespace")


def test_the_help_says_where_they_go_and_which_wins(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        offload_main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "global flags:" in text
    assert "the value after the command wins" in text


def test_the_runner_merges_them_for_vk_provider_migrate(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str | None, str | None]] = []

    def resolve(kubeconfig: str | None, context: str | None, namespace: str | None) -> None:
        seen.append((kubeconfig, namespace))
        raise running.ConfigurationError("stop here")

    monkeypatch.setattr(running, "resolve", resolve)
    arguments = build_parser().parse_args(["migrate", "-n", "ml", "--kubeconfig", "/k", "list"])
    assert running.run(arguments) == 1
    assert seen == [("/k", "ml")]
