"""Parsing of the migration commands: every command and flag, and misuse exits 2 with the reason."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import pytest

from vk_provider.cli import build_offload_parser, build_parser, main, offload_main
from vk_provider.offloadcli.arguments import parse_duration, parse_steps


def parse_plugin(*arguments: str) -> argparse.Namespace:
    return build_offload_parser().parse_args(arguments)


def parse_migrate(*arguments: str) -> argparse.Namespace:
    return build_parser().parse_args(["migrate", *arguments])


PARSERS = [parse_plugin, parse_migrate]


@pytest.mark.parametrize("parse", PARSERS)
def test_list_takes_namespace_kubeconfig_context_output_and_all_namespaces(
    parse: Callable[..., argparse.Namespace],
) -> None:
    parsed = parse("list", "-n", "ml", "--kubeconfig", "/k", "--context", "lab", "-o", "yaml", "-A")
    assert parsed.migration_command == "list"
    assert (parsed.namespace, parsed.kubeconfig, parsed.context) == ("ml", "/k", "lab")
    assert parsed.output == "yaml"
    assert parsed.all_namespaces is True


@pytest.mark.parametrize("parse", PARSERS)
def test_defaults_leave_resolution_to_the_kubeconfig(parse: Callable[..., argparse.Namespace]) -> None:
    parsed = parse("list")
    assert (parsed.namespace, parsed.kubeconfig, parsed.context, parsed.output) == (None, None, None, None)
    assert parsed.all_namespaces is False


@pytest.mark.parametrize("parse", PARSERS)
def test_status_takes_a_name_watch_and_output(parse: Callable[..., argparse.Namespace]) -> None:
    parsed = parse("status", "chat", "--watch", "--output", "json", "--namespace", "ml")
    assert (parsed.migration_command, parsed.name, parsed.watch, parsed.output) == (
        "status",
        "chat",
        True,
        "json",
    )
    assert parse("status", "chat", "-w").watch is True
    assert parse("status", "chat").watch is False


@pytest.mark.parametrize("parse", PARSERS)
def test_flip_takes_direction_steps_interval_and_wait(parse: Callable[..., argparse.Namespace]) -> None:
    parsed = parse("flip", "chat", "--to", "home", "--steps", "10, 25,50,100", "--interval", "2m", "--wait")
    assert parsed.migration_command == "flip"
    assert (parsed.name, parsed.to, parsed.steps, parsed.interval, parsed.wait) == (
        "chat",
        "home",
        (10, 25, 50, 100),
        120,
        True,
    )
    assert not parsed.save
    plain = parse("flip", "chat", "--to", "away")
    assert (plain.steps, plain.interval, plain.wait, plain.hold) == (None, None, False, None)
    assert parse("flip", "chat", "--to", "away", "--interval", "5s", "--save").save


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize(("text", "seconds"), [("2h", 7200), ("90m", 5400), ("1h30m", 5400)])
def test_flip_takes_a_hold(parse: Callable[..., argparse.Namespace], text: str, seconds: int) -> None:
    assert parse("flip", "chat", "--to", "away", "--hold", text).hold == seconds


@pytest.mark.parametrize("parse", PARSERS)
def test_auto_takes_on_or_off_and_a_name(parse: Callable[..., argparse.Namespace]) -> None:
    parsed = parse("auto", "off", "chat", "-n", "ml")
    assert (parsed.migration_command, parsed.state, parsed.name, parsed.namespace) == (
        "auto",
        "off",
        "chat",
        "ml",
    )
    assert parse("auto", "on", "chat").state == "on"


@pytest.mark.parametrize("parse", PARSERS)
def test_policy_list_and_status_take_output_watch_and_no_namespace(
    parse: Callable[..., argparse.Namespace],
) -> None:
    listed = parse("policy", "list", "-o", "json", "--context", "lab")
    assert (listed.migration_command, listed.output, listed.context, listed.namespace) == (
        "policy list",
        "json",
        "lab",
        None,
    )
    shown = parse("policy", "status", "training-first", "--watch", "--kubeconfig", "/k")
    assert (shown.migration_command, shown.name, shown.watch, shown.kubeconfig) == (
        "policy status",
        "training-first",
        True,
        "/k",
    )
    assert parse("policy", "status", "training-first").watch is False


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize("command", ["pause", "resume", "abort", "promote"])
def test_simple_commands_take_a_name_and_the_common_flags(
    parse: Callable[..., argparse.Namespace], command: str
) -> None:
    parsed = parse(command, "chat", "-n", "ml", "--context", "lab")
    assert (parsed.migration_command, parsed.name, parsed.namespace, parsed.context) == (
        command,
        "chat",
        "ml",
        "lab",
    )


ENTRIES: list[tuple[Callable[[Sequence[str] | None], int], list[str]]] = [
    (offload_main, []),
    (main, ["migrate"]),
]


@pytest.mark.parametrize(("entry", "prefix"), ENTRIES)
@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (["flip", "chat", "--to", "away", "--steps", "50,40,100"], "strictly increasing"),
        (["flip", "chat", "--to", "away", "--steps", "25,50"], "the last step must be 100"),
        (["flip", "chat", "--to", "away", "--steps", "0,100"], "outside 1..100"),
        (["flip", "chat", "--to", "away", "--steps", "ten,100"], "comma-separated list of whole numbers"),
        (["flip", "chat", "--to", "away", "--interval", "soon"], "is not a duration"),
        (["flip", "chat", "--to", "away", "--interval", "0"], "between 1 second"),
        (["flip", "chat", "--to", "sideways"], "invalid choice: 'sideways'"),
        (["flip", "chat"], "the following arguments are required: --to"),
        (["status"], "the following arguments are required: NAME"),
        (["list", "-o", "table"], "invalid choice: 'table'"),
        (["pause", "chat", "-o", "json"], "unrecognized arguments: -o json"),
        (["teleport", "chat"], "invalid choice: 'teleport'"),
        (["flip", "chat", "--to", "away", "--hold", "soon"], "'soon' is not a hold duration like 2h, 90m"),
        (["flip", "chat", "--to", "away", "--hold", "0s"], "is not a hold duration"),
        (["flip", "chat", "--to", "away", "--hold", "2d"], "is not a hold duration"),
        (["flip", "chat", "--to", "away", "--hold=-1h"], "is not a hold duration"),
        (["auto", "maybe", "chat"], "invalid choice: 'maybe'"),
        (["auto", "off"], "the following arguments are required: NAME"),
        (["policy"], "the following arguments are required: COMMAND"),
        (["policy", "status"], "the following arguments are required: NAME"),
        (["policy", "list", "-n", "ml"], "unrecognized arguments: -n ml"),
        (["flip", "chat", "--to", "away", "--wait", "--timeout", "0"], "'0' is not a timeout like 10m"),
        (["abort", "chat", "--dry-run=maybe"], "'maybe' is not a dry-run mode (client or server)"),
        (["uninstall", "--dry-run=maybe"], "'maybe' is not a dry-run mode (client or server)"),
        (["status", "chat", "-o", "table"], "invalid choice: 'table'"),
        (["-n"], "argument -n/--namespace: expected one argument"),
    ],
)
def test_misuse_exits_2_with_the_reason(
    entry: Callable[[Sequence[str] | None], int],
    prefix: list[str],
    arguments: list[str],
    reason: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        entry([*prefix, *arguments])
    assert exited.value.code == 2
    assert reason in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("2m", 120), ("90", 90), ("1h30m", 5400), ("1m30s", 90), (" 45s ", 45)],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "1.5s", "-5", "30x", "2m1h", "0s", "99999999999"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)


def test_steps_are_parsed_and_validated() -> None:
    assert parse_steps("100") == (100,)
    assert parse_steps("10,25,50,100") == (10, 25, 50, 100)
    with pytest.raises(argparse.ArgumentTypeError, match=r"must not be empty|whole numbers"):
        parse_steps("")


@pytest.mark.parametrize("entry", [offload_main, main])
def test_help_lists_the_migration_commands(
    entry: Callable[[Sequence[str] | None], int], capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = ["migrate"] if entry is main else []
    with pytest.raises(SystemExit) as exited:
        entry([*prefix, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for command in ("list", "status", "flip", "pause", "resume", "abort", "promote", "auto", "policy"):
        assert command in out
