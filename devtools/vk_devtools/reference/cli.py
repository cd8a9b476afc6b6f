"""docs/reference/cli.md: every command of `vk-provider` and `kubectl offload`, from their parsers.

The parsers are walked through argparse's own structures (each parser's actions, and the parsers a
subcommand action holds), never through `--help` text, so the page shows what the code accepts:
every subcommand at every depth, the installed `dev` included, each option with its flags, value,
default and help.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import re
import sys
import unittest.mock
from collections.abc import Iterator, Sequence
from typing import Any

from vk_devtools.reference import pages, rendering
from vk_provider.cli import build_offload_parser, build_parser

MODULE = "vk_devtools.reference.cli"

_QUIET_ACTIONS = (argparse._HelpAction, argparse._VersionAction)
"""Left out of the tables: every command has them, and the page says so once."""


@dataclasses.dataclass(frozen=True)
class Command:
    path: tuple[str, ...]
    """The words that run it: ("vk-provider", "migrate", "flip")."""
    parser: argparse.ArgumentParser
    summary: str
    """The one line its parent's command list gives it."""
    aliases: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return " ".join(self.path)


def commands(root: argparse.ArgumentParser, program: str) -> Iterator[Command]:
    """`root` and every subcommand under it, depth first in the order they were added."""
    yield from _walk(Command((program,), root, root.description or ""))


def _walk(command: Command) -> Iterator[Command]:
    yield command
    for action in command.parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in _children(action):
                yield from _walk(dataclasses.replace(child, path=(*command.path, child.path[0])))


def _children(action: argparse._SubParsersAction[Any]) -> Iterator[Command]:
    summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
    names: dict[int, list[str]] = {}
    parsers: dict[int, argparse.ArgumentParser] = {}
    for name, parser in action.choices.items():
        names.setdefault(id(parser), []).append(name)
        parsers[id(parser)] = parser
    for key, (name, *aliases) in names.items():
        yield Command((name,), parsers[key], summaries.get(name, ""), tuple(aliases))


def _subcommand_action(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any] | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def documented_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options and arguments a command's table lists."""
    return [
        action
        for action in parser._actions
        if not isinstance(action, (*_QUIET_ACTIONS, argparse._SubParsersAction))
        and action.help is not argparse.SUPPRESS
    ]


def usage(command: Command) -> str:
    """A synopsis written here rather than by argparse, whose usage lines change with the terminal's
    width and the Python version: the page must be the same wherever it is generated."""
    words = [command.name]
    if any(action.option_strings for action in documented_actions(command.parser)):
        words.append("[options]")
    for action in command.parser._actions:
        if action.option_strings:
            continue
        if isinstance(action, argparse._SubParsersAction):
            words.append("COMMAND ...")
        else:
            words.append(_positional(action))
    return " ".join(words)


def _positional(action: argparse.Action) -> str:
    name = _value(action) or action.dest.upper()
    if action.nargs == "?":
        return f"[{name}]"
    if action.nargs in ("*", "+"):
        return f"{name} ..." if action.nargs == "+" else f"[{name} ...]"
    return name


def _value(action: argparse.Action) -> str:
    """What an option takes, as argparse names it: its metavar, its choices, or its name in capitals;
    nothing for a switch."""
    if action.nargs == 0:
        return ""
    if isinstance(action.metavar, tuple):
        return " ".join(action.metavar)
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "{" + ",".join(str(choice) for choice in action.choices) + "}"
    return action.dest.upper() if action.option_strings else action.dest


class _MachineDefault:
    """The default of an option that takes it from the machine it runs on."""

    def __str__(self) -> str:
        return "the machine's"


MACHINE_DEFAULT = _MachineDefault()


def _default(action: argparse.Action) -> str:
    default = action.default
    if isinstance(default, _MachineDefault):
        return f"{default}"
    if default is None or default is argparse.SUPPRESS or (action.nargs == 0 and default is False):
        return ""
    if isinstance(default, tuple):
        return ""  # a parsed value such as (host, port): the help says it as it is written
    if isinstance(default, list):
        return ", ".join(f"`{item}`" for item in default)
    return f"`{default}`" if str(default) else '`""`'


def help_text(action: argparse.Action, program: str) -> str:
    """The help as argparse would print it: `%(default)s` and the like filled in."""
    text = action.help or ""
    if "%" not in text:
        return text
    values = {key: value for key, value in vars(action).items() if value is not argparse.SUPPRESS}
    if values.get("choices") is not None:
        values["choices"] = ", ".join(str(choice) for choice in values["choices"])
    return text % {**values, "prog": program}


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{_value(action)}`"
    return ", ".join(f"`{flag}`" for flag in action.option_strings)


def anchor(name: str) -> str:
    """The id MkDocs gives a heading (Python-Markdown's toc slugify)."""
    slug = re.sub(r"[^\w\s-]", "", name).strip().lower()
    return re.sub(r"[-\s]+", "-", slug)


CANONICAL = ("vk-provider dev", "kubectl offload")
"""Where a command that both command lines carry (`dev`; the migration commands, which are
`vk-provider migrate ...` too) is documented in full; the other place points there."""


def signature(command: Command) -> tuple[Any, ...]:
    """What a command and everything under it accept, whatever it is called: two commands with the
    same signature are one command reached by two names."""
    parser = command.parser
    options = tuple(
        (tuple(a.option_strings), _value(a), _default(a), a.help) for a in documented_actions(parser)
    )
    action = _subcommand_action(parser)
    children = () if action is None else tuple((c.path[0], signature(c)) for c in _children(action))
    return parser.description, options, children


def _canonical(name: str) -> int:
    return next(
        (rank for rank, prefix in enumerate(CANONICAL) if f"{name} ".startswith(f"{prefix} ")), len(CANONICAL)
    )


def documented_in_full(found: Sequence[Command]) -> dict[str, str]:
    """Each command shown elsewhere (the same signature), by name -> the name it is shown under."""
    by_signature: dict[tuple[Any, ...], list[Command]] = {}
    for command in found:
        if command.parser._actions and len(command.path) > 1:
            by_signature.setdefault(signature(command), []).append(command)
    elsewhere: dict[str, str] = {}
    for same in by_signature.values():
        full = min(same, key=lambda command: _canonical(command.name))
        elsewhere.update({command.name: full.name for command in same if command is not full})
    return elsewhere


def _sentence(text: str) -> str:
    """A command list's line (`list the Offloads`) as a sentence (`List the Offloads.`)."""
    text = " ".join(text.split())
    if not text:
        return ""
    return text[0].upper() + text[1:] + ("" if text[-1] in ".!?:)" else ".")


def _reference(command: Command, full: str) -> list[str]:
    lines = [f"## `{command.name}`", ""]
    if command.summary:
        lines += [rendering.paragraph(_sentence(command.summary)), ""]
    return [*lines, f"The same command as [`{full}`](#{anchor(full)}), with the same options.", ""]


def _section(command: Command) -> list[str]:
    parser = command.parser
    lines = [f"## `{command.name}`", ""]
    if command.aliases:
        lines += ["Also: " + ", ".join(f"`{alias}`" for alias in command.aliases), ""]
    description = _sentence(parser.description or command.summary)
    if description:
        lines += [rendering.paragraph(description), ""]
    lines += ["```text", usage(command), "```", ""]
    subcommands = _subcommand_action(parser)
    if subcommands is not None:
        listed = [
            (f"[`{child.path[0]}`](#{anchor(f'{command.name} {child.path[0]}')})", child.summary)
            for child in _children(subcommands)
        ]
        lines += [*rendering.table(("Command", "What it does"), listed), ""]
    actions = documented_actions(parser)
    if actions:
        rows = [
            (
                _flags(action),
                f"`{_value(action)}`" if action.option_strings and _value(action) else "",
                _default(action),
                help_text(action, command.name),
            )
            for action in actions
        ]
        lines += [*rendering.table(("Option", "Value", "Default", "Description"), rows), ""]
    return lines


def programs() -> list[tuple[str, argparse.ArgumentParser]]:
    """The two command lines the project installs, as their console scripts build them."""
    return [("vk-provider", build_parser()), ("kubectl offload", build_offload_parser())]


MACHINE_PROBES = ("vk_provider.router.running.usable_cpus",)
"""What a parser asks of the machine it is built on (the router's `--worker-processes` defaults to the CPUs it
may use): answered with two different numbers while the parsers are built twice, so that a default
or help that follows them is told apart and shown as the machine's, not as this one's."""
MACHINE_VALUE = "<N>"
"""What stands for a machine's own value in a help text."""


def _commands_on(cpus: int) -> list[Command]:
    with contextlib.ExitStack() as stack:
        for probe in MACHINE_PROBES:
            stack.enter_context(unittest.mock.patch(probe, return_value=cpus))
        return [command for program, parser in programs() for command in commands(parser, program)]


def all_commands() -> list[Command]:
    """Every command, each option's default and help as on any machine: a default that depends on the
    machine reads `MACHINE_DEFAULT`, the words of its help that do read `MACHINE_VALUE`."""
    found, other = _commands_on(1), _commands_on(3)
    for command, twin in zip(found, other, strict=True):
        for action, same in zip(
            documented_actions(command.parser), documented_actions(twin.parser), strict=True
        ):
            if action.default != same.default:
                action.default = MACHINE_DEFAULT
            if action.help != same.help and action.help is not None and same.help is not None:
                action.help = _machine_words(action.help, same.help)
    return found


def _machine_words(one: str, other: str) -> str:
    """`one` with the words that differ from `other` (the machine's values) as `MACHINE_VALUE`."""
    words, others = one.split(" "), other.split(" ")
    if len(words) != len(others):
        return one
    return " ".join(
        a if a == b else re.sub(r"[0-9]+", MACHINE_VALUE, a) for a, b in zip(words, others, strict=True)
    )


def render() -> str:
    found = all_commands()
    lines = [
        "# Command-line reference",
        "",
        rendering.generated_note(MODULE, "the commands' argument parsers"),
        "",
        "Two command lines: `vk-provider` runs the daemons (the virtual node, the router, the xDS server, "
        "the controller), a provider plugin and the conformance kit, and carries the migration commands; "
        "`kubectl offload` is the kubectl plugin people use to move inference. `dev` is there only where "
        "the development tools (`vk-provider-devtools`) are installed.",
        "",
    ]
    quiet = sorted(
        {
            ", ".join(a.option_strings)
            for c in found
            for a in c.parser._actions
            if isinstance(a, _QUIET_ACTIONS)
        }
    )
    if quiet:
        everywhere = [flags for flags in quiet if all(_has(c.parser, flags) for c in found)]
        if everywhere:
            lines += [
                "Every command also takes "
                + " and ".join(f"`{flags}`" for flags in everywhere)
                + ", left out of the tables below.",
                "",
            ]
    elsewhere = documented_in_full(found)
    for command in found:
        if any(name in elsewhere for name in _ancestors(command)):
            continue  # its parent points to where the whole family is shown
        if command.name in elsewhere:
            lines += _reference(command, elsewhere[command.name])
        else:
            lines += _section(command)
    return "\n".join(lines).rstrip("\n") + "\n"


def _ancestors(command: Command) -> Iterator[str]:
    """The names of the commands above it, below the program itself."""
    for length in range(len(command.path) - 1, 1, -1):
        yield " ".join(command.path[:length])


def _has(parser: argparse.ArgumentParser, flags: str) -> bool:
    return any(", ".join(action.option_strings) == flags for action in parser._actions)


def main(argv: Sequence[str] | None = None) -> int:
    return pages.main_of(MODULE, argv)


if __name__ == "__main__":
    sys.exit(main())
