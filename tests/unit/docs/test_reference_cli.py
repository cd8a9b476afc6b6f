"""docs/reference/cli.md is what the parsers of both command lines say, every command at every depth."""

from __future__ import annotations

import argparse
import unittest.mock

from vk_devtools.reference import cli, pages, rendering

PAGE = pages.page_of(cli.MODULE)


def test_the_committed_page_is_what_the_parsers_say() -> None:
    assert pages.is_current(PAGE), PAGE.stale_line()


def _toy() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="toy", description="The toy.")
    commands = root.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser("run", aliases=["go"], help="run it", description="Run the toy.")
    run.add_argument("--speed", type=int, default=3, help="how fast (default: %(default)s)")
    run.add_argument("--colour", choices=("red", "blue"), help="which colour")
    run.add_argument("--secret", help=argparse.SUPPRESS)
    run.add_argument("target", help="what to run")
    deeper = run.add_subparsers(dest="how").add_parser("slowly", help="take the long way")
    deeper.add_argument("--steps", metavar="N", help="how many")
    return root


def test_every_depth_alias_and_option_is_found_and_hidden_ones_are_not() -> None:
    found = {command.name: command for command in cli.commands(_toy(), "toy")}
    assert list(found) == ["toy", "toy run", "toy run slowly"]
    assert found["toy run"].aliases == ("go",)
    assert found["toy run"].summary == "run it"
    options = [action.dest for action in cli.documented_actions(found["toy run"].parser)]
    assert options == ["speed", "colour", "target"]
    assert cli.usage(found["toy run"]) == "toy run [options] target COMMAND ..."


def test_a_section_shows_flags_values_defaults_and_expanded_help() -> None:
    page = "\n".join(cli._section(next(c for c in cli.commands(_toy(), "toy") if c.name == "toy run")))
    assert "| `--speed` | `SPEED` | `3` | how fast (default: 3) |" in page
    assert "| `--colour` | `{red,blue}` |  | which colour |" in page
    assert "--secret" not in page
    assert "[`slowly`](#toy-run-slowly)" in page


def test_a_command_reached_by_two_names_is_shown_once() -> None:
    found = cli.all_commands()
    names = {command.name for command in found}
    # Every migration command is both `kubectl offload X` and `vk-provider migrate X`, dev is under both.
    assert {"kubectl offload flip", "vk-provider migrate flip", "vk-provider dev up"} <= names
    elsewhere = cli.documented_in_full(found)
    assert elsewhere["vk-provider migrate flip"] == "kubectl offload flip"
    assert elsewhere["kubectl offload dev"] == "vk-provider dev"
    text = cli.render()
    assert "## `vk-provider dev up`" in text
    assert "## `kubectl offload dev up`" not in text
    assert "The same command as [`kubectl offload flip`](#kubectl-offload-flip)" in text


def test_every_option_of_every_command_is_on_the_page() -> None:
    text = cli.render()
    elsewhere = cli.documented_in_full(cli.all_commands())
    for command in cli.all_commands():
        shown = elsewhere.get(command.name, command.name)
        assert f"## `{shown}`" in text or any(shown.startswith(f"{other} ") for other in elsewhere.values())
        for action in cli.documented_actions(command.parser):
            for flag in action.option_strings:
                assert f"`{flag}`" in text, f"{command.name} {flag} is not on the page"


def test_anchors_are_the_ones_mkdocs_makes() -> None:
    assert cli.anchor("kubectl offload policy list") == "kubectl-offload-policy-list"
    assert cli.anchor("vk-provider dev up") == "vk-provider-dev-up"


def test_the_page_is_the_same_on_a_machine_of_another_size() -> None:
    with unittest.mock.patch("os.sched_getaffinity", return_value=set(range(5))):
        text = cli.render()
    assert text == cli.render()
    assert "| `--worker-processes` | `N` | the machine's |" in text  # the router's: its usable CPUs
    assert "here &lt;N&gt;" in text


def test_placeholders_in_help_survive_markdown() -> None:
    assert rendering.cell("KEY=<provider>:NoSchedule, `x<y>`") == "KEY=&lt;provider&gt;:NoSchedule, `x<y>`"
