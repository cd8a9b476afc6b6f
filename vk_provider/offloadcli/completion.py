"""`kubectl offload completion bash|zsh`: a shell completion script generated from the parser itself.

The parser is walked once (`command_tree`) into what a shell needs: at each command path its
subcommands, its flags, which flags take a value and of what kind, and what each positional is. The
script holds that as `case` tables, so pressing Tab runs no Python; only Offload, OffloadPolicy,
namespace and context names are asked of the cluster, through `kubectl get ... -o name` with a short
request timeout and the -n/--kubeconfig/--context already typed (a failure completes nothing).

zsh runs the same functions through its bash completion emulation (`bashcompinit`); so the functions
index no array (zsh counts from 1) and name no variable zsh reserves (`path`, `commands`, `words`).
The script completes `kubectl-offload`, the plugin's own executable.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from vk_provider.offload.names import GROUP, PLURAL
from vk_provider.policy.names import POLICY_PLURAL

PROGRAM = "kubectl-offload"
FUNCTION = "_kubectl_offload"
PLUGIN_COMPLETER = "kubectl_complete-offload"
SHELLS = ("bash", "zsh", "kubectl")
"""`kubectl`: not a shell, the completer kubectl's own completion asks (see `kubectl_plugin_script`)."""
FILE, CONTEXTS, NAMESPACES, OFFLOADS, POLICIES = "file", "contexts", "namespaces", "offloads", "policies"
FLAG_VALUES = {"--kubeconfig": FILE, "--context": CONTEXTS, "--namespace": NAMESPACES}
"""The kind of value of the flags whose values the cluster or the file system can complete."""
POLICY_PATHS = ("policy",)
"""A NAME under these commands is an OffloadPolicy's; elsewhere an Offload's."""


@dataclass
class Command:
    """What completes at one command path (`policy status`, or `` for the top)."""

    subcommands: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    flag_values: dict[str, str] = field(default_factory=dict)
    """Flag -> the kind of its value (`choices:a b`, `file`, ...; `` for a free value)."""
    positionals: list[str] = field(default_factory=list)
    """The kind of each positional, in order."""


def _value_kind(action: argparse.Action) -> str:
    if action.choices is not None:
        return "choices:" + " ".join(str(choice) for choice in action.choices)
    longest = max(action.option_strings, key=len)
    return FLAG_VALUES.get(longest, "")


def _positional_kind(action: argparse.Action, path: tuple[str, ...]) -> str:
    if action.choices is not None:
        return "choices:" + " ".join(str(choice) for choice in action.choices)
    if action.dest == "name":
        return POLICIES if path[:1] == POLICY_PATHS else OFFLOADS
    return ""


def command_tree(parser: argparse.ArgumentParser) -> dict[tuple[str, ...], Command]:
    """Every command path of `parser` with what completes there."""
    tree: dict[tuple[str, ...], Command] = {}

    def visit(current: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        command = tree.setdefault(path, Command())
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    command.subcommands.append(name)
                    visit(child, (*path, name))
            elif action.option_strings:
                command.flags.extend(action.option_strings)
                if action.nargs != 0:
                    for flag in action.option_strings:
                        command.flag_values[flag] = _value_kind(action)
            else:
                command.positionals.append(_positional_kind(action, path))

    visit(parser, ())
    return tree


def _quoted(word: str) -> str:
    """`word` as one shell word, for a case pattern or a printf argument (single-quoted when it holds
    anything a shell would read; printf, not echo: zsh's echo prints nothing for a lone `-`)."""
    return shlex.quote(word)


def _table(name: str, rows: dict[str, str], comment: str) -> Iterator[str]:
    """A shell function answering `$1` with the row of that key, failing for any other."""
    yield f"# {comment}"
    yield f"{name}() {{"
    yield '    case "$1" in'
    for key, value in rows.items():
        yield f"        {_quoted(key)}) printf '%s\\n' {_quoted(value)} ;;"
    yield "        *) return 1 ;;"
    yield "    esac"
    yield "}"
    yield ""


def _tables(tree: dict[tuple[str, ...], Command]) -> Iterator[str]:
    def key(path: tuple[str, ...], *more: str) -> str:
        return ":".join([" ".join(path), *more])

    yield from _table(
        f"{FUNCTION}_subcommands",
        {key(path): " ".join(command.subcommands) for path, command in tree.items() if command.subcommands},
        "the commands under a command path",
    )
    yield from _table(
        f"{FUNCTION}_flags",
        {key(path): " ".join(command.flags) for path, command in tree.items()},
        "the flags of a command path",
    )
    yield from _table(
        f"{FUNCTION}_flag_value",
        {
            key(path, flag): kind or "-"
            for path, command in tree.items()
            for flag, kind in command.flag_values.items()
        },
        "the kind of value a flag takes (-: anything); fails for a flag that takes none",
    )
    yield from _table(
        f"{FUNCTION}_positional",
        {
            key(path, str(index)): kind or "-"
            for path, command in tree.items()
            for index, kind in enumerate(command.positionals)
        },
        "the kind of the Nth positional of a command path",
    )


_FUNCTIONS = r"""
# Remember the connection flags typed so far, for the kubectl that lists names.
_kubectl_offload_remember() {
    case "$1" in
        -n|--namespace) _kubectl_offload_connection+=(--namespace "$2") ;;
        --kubeconfig) _kubectl_offload_connection+=(--kubeconfig "$2") ;;
        --context) _kubectl_offload_connection+=(--context "$2") ;;
    esac
}

# The names of `kubectl get $1` (in the typed namespace and context), without their kind/ prefix.
_kubectl_offload_names() {
    kubectl "${_kubectl_offload_connection[@]}" get "$1" -o name --request-timeout=5s 2>/dev/null |
        while read -r line; do echo "${line##*/}"; done
}

# Candidates of the kind $1 for the word $2, each with the prefix $3 (`--flag=` when typed so).
_kubectl_offload_values() {
    local candidates=""
    case "$1" in
        choices:*) candidates="${1#choices:}" ;;
        file) COMPREPLY=($(compgen -f -- "$2")); return ;;
        contexts) candidates="$(kubectl config get-contexts -o name 2>/dev/null)" ;;
        namespaces) candidates="$(_kubectl_offload_names namespaces)" ;;
        offloads) candidates="$(_kubectl_offload_names __OFFLOADS__)" ;;
        policies) candidates="$(_kubectl_offload_names __POLICIES__)" ;;
        *) return ;;
    esac
    COMPREPLY=($(compgen -P "$3" -W "$candidates" -- "$2"))
}

__FUNCTION__() {
    local cur="$2" cmdpath="" word expect="" kind="" prefix="" subcommands=""
    local index=0 positional=0
    _kubectl_offload_connection=()
    COMPREPLY=()
    # Walk the words before the one being completed: the command path, the positionals given, and
    # whether the last word is a flag waiting for its value. (bash splits --flag=value at the =.)
    for word in "${COMP_WORDS[@]}"; do
        if ((index == COMP_CWORD)); then break; fi
        index=$((index + 1))
        if ((index == 1)); then continue; fi
        if [[ -n "$expect" ]]; then
            if [[ "$word" == "=" ]]; then continue; fi
            _kubectl_offload_remember "$expect" "$word"
            expect=""
            continue
        fi
        case "$word" in
            --*=*) _kubectl_offload_remember "${word%%=*}" "${word#*=}" ;;
            -*) if __FUNCTION___flag_value "$cmdpath:$word" >/dev/null; then expect="$word"; fi ;;
            *)
                subcommands="$(__FUNCTION___subcommands "$cmdpath")"
                if [[ " $subcommands " == *" $word "* ]]; then
                    cmdpath="${cmdpath:+$cmdpath }$word"
                    positional=0
                else
                    positional=$((positional + 1))
                fi
                ;;
        esac
    done
    if [[ -n "$expect" ]]; then
        kind="$(__FUNCTION___flag_value "$cmdpath:$expect")"
        if [[ "$cur" == "=" ]]; then cur=""; fi
    elif [[ "$cur" == --*=* ]]; then
        kind="$(__FUNCTION___flag_value "$cmdpath:${cur%%=*}")"
        prefix="${cur%%=*}="
        cur="${cur#*=}"
    elif [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$(__FUNCTION___flags "$cmdpath")" -- "$cur"))
        return 0
    elif subcommands="$(__FUNCTION___subcommands "$cmdpath")"; then
        COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
        return 0
    else
        kind="$(__FUNCTION___positional "$cmdpath:$positional")"
    fi
    _kubectl_offload_values "$kind" "$cur" "$prefix"
    return 0
}
"""

_PLUGIN_DRIVER = r"""
# kubectl runs this with the words after `kubectl offload`, the last one being completed (maybe empty),
# and reads one candidate a line, then a directive of cobra's: 4, do not complete file names instead.
COMP_WORDS=(__PROGRAM__ "$@")
COMP_CWORD=$#
__FUNCTION__ __PROGRAM__ "${COMP_WORDS[COMP_CWORD]}" ""
if ((${#COMPREPLY[@]})); then printf '%s\n' "${COMPREPLY[@]}"; fi
echo ":4"
"""


def _functions(parser: argparse.ArgumentParser) -> str:
    """The tables of `parser` and the functions that complete from them, registered nowhere."""
    return "\n".join(_tables(command_tree(parser))) + _fill(_FUNCTIONS)


def _fill(template: str) -> str:
    return (
        template.replace("__FUNCTION__", FUNCTION)
        .replace("__PROGRAM__", PROGRAM)
        .replace("__OFFLOADS__", f"{PLURAL}.{GROUP}")
        .replace("__POLICIES__", f"{POLICY_PLURAL}.{GROUP}")
    )


def bash_script(parser: argparse.ArgumentParser) -> str:
    return "\n".join(
        [
            f"# bash completion for {PROGRAM}, generated by `kubectl offload completion bash`.",
            f"# Load it in ~/.bashrc: source <({PROGRAM} completion bash)",
            "",
            _functions(parser),
            f"complete -F {FUNCTION} {PROGRAM}",
            "",
        ]
    )


def kubectl_plugin_script(parser: argparse.ArgumentParser) -> str:
    """`kubectl_complete-offload`: the executable through which kubectl's own completion (kubectl 1.26
    and later, any shell) completes `kubectl offload ...`; the same functions, run by bash."""
    return "\n".join(
        [
            "#!/usr/bin/env bash",
            f"# {PLUGIN_COMPLETER}, generated by `kubectl offload completion kubectl`. Put it on $PATH,",
            "# executable, for kubectl's completion to complete `kubectl offload ...`.",
            "",
            _functions(parser),
            _fill(_PLUGIN_DRIVER),
        ]
    )


def zsh_script(parser: argparse.ArgumentParser) -> str:
    """The bash functions, run by zsh's bash completion emulation."""
    return "\n".join(
        [
            f"# zsh completion for {PROGRAM}, generated by `kubectl offload completion zsh`.",
            f"# Load it in ~/.zshrc, after compinit: source <({PROGRAM} completion zsh)",
            "autoload -U +X bashcompinit && bashcompinit",
            "",
            bash_script(parser),
        ]
    )


def add_completion_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], root: argparse.ArgumentParser
) -> None:
    """`completion bash|zsh`, printing the script for `root` (the whole command line)."""
    completion = subparsers.add_parser(
        "completion",
        help="print a shell completion script: bash or zsh",
        description=f"Print a completion script for {PROGRAM}: commands, flags, their choices, and the "
        "names of Offloads, OffloadPolicies, namespaces and contexts (asked of the cluster with kubectl "
        f"as you type). bash: source <({PROGRAM} completion bash); zsh: source <({PROGRAM} completion "
        f"zsh) after compinit. For `kubectl offload ...` itself, kubectl's own completion (1.26+) asks "
        f"an executable named {PLUGIN_COMPLETER} on $PATH: `completion kubectl` prints it (a bash "
        "script).",
    )
    completion.add_argument(
        "shell", choices=SHELLS, help=f"bash, zsh, or kubectl (the {PLUGIN_COMPLETER} executable)"
    )
    scripts = {"bash": bash_script, "zsh": zsh_script, "kubectl": kubectl_plugin_script}

    def run(arguments: argparse.Namespace) -> int:
        sys.stdout.write(scripts[arguments.shell](root))
        return 0

    completion.set_defaults(run_command=run)
