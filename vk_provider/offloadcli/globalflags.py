"""`kubectl offload -n ml list`: the connection flags before the command as well as after it.

kubectl takes its global flags anywhere on the line, so people (and their shell aliases, such as
`alias ko='kubectl offload -n ml'`) put them first. argparse reads the words before the command with
the top-level parser only, so these flags are declared there too, under other names (`global_*`), and
merged into the command's own after parsing: a subcommand's defaults would otherwise overwrite them.
The value after the command wins; a command that has no use for a flag ignores it, as kubectl does.
"""

from __future__ import annotations

import argparse

PREFIX = "global_"
GLOBAL_FLAGS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("kubeconfig", ("--kubeconfig",), "PATH", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"),
    ("context", ("--context",), "NAME", "the kubeconfig context to use (default: its current context)"),
    (
        "namespace",
        ("-n", "--namespace"),
        "NAMESPACE",
        "the Offloads' namespace (default: the context's namespace or default; `uninstall`: every namespace)",
    ),
)
"""(the command's attribute, the flags, metavar, help) of each flag accepted before the command."""


def add_global_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "global flags",
        "Accepted before the command as well as after it; when a flag is given in both places, the value "
        "after the command wins. A command that does not use one ignores it.",
    )
    for attribute, flags, metavar, help_text in GLOBAL_FLAGS:
        group.add_argument(*flags, dest=PREFIX + attribute, metavar=metavar, help=help_text)


def merge_global_flags(arguments: argparse.Namespace) -> argparse.Namespace:
    """Fill each of the command's connection flags left unset with the value given before the command.

    Idempotent, so every entry point may call it."""
    for attribute, *_ in GLOBAL_FLAGS:
        before = getattr(arguments, PREFIX + attribute, None)
        if before is not None and hasattr(arguments, attribute) and getattr(arguments, attribute) is None:
            setattr(arguments, attribute, before)
    return arguments
