"""`kubectl offload completion bash|zsh`: the script is generated from the parser, and bash, given the
words typed (COMP_WORDS), completes commands at every depth, flags, their choices, and names asked of a
stand-in kubectl."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from vk_provider.cli import build_offload_parser, offload_main
from vk_provider.offloadcli.completion import (
    OFFLOADS,
    PLUGIN_COMPLETER,
    POLICIES,
    bash_script,
    command_tree,
    kubectl_plugin_script,
    zsh_script,
)

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")

OFFLOAD = "offload.offload.vk-provider.dev"
FAKE_KUBECTL = f"""#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
case " $* " in
    *" get offloads.offload.vk-provider.dev "*) printf '{OFFLOAD}/chat\\n{OFFLOAD}/embed\\n' ;;
    *" get offloadpolicies.offload.vk-provider.dev "*) echo offloadpolicy.{OFFLOAD[8:]}/training-first ;;
    *" get namespaces "*) printf 'namespace/default\\nnamespace/ml\\n' ;;
    " config get-contexts -o name ") printf 'lab\\nprod\\n' ;;
esac
"""


def test_the_tree_holds_every_command_at_every_depth_with_its_flags_and_positionals() -> None:
    tree = command_tree(build_offload_parser())
    assert set(tree[()].subcommands) >= {
        "list",
        "status",
        "flip",
        "policy",
        "uninstall",
        "version",
        "completion",
    }
    assert tree[("policy",)].subcommands == ["list", "status"]
    assert tree[("flip",)].flag_values["--to"] == "choices:home away"
    assert tree[("flip",)].flag_values["--dry-run"] == "choices:client server"
    assert tree[("flip",)].flag_values["--kubeconfig"] == "file"
    assert tree[()].flag_values["-n"] == "namespaces"
    assert "--wait" in tree[("flip",)].flags
    assert "--wait" not in tree[("flip",)].flag_values  # takes no value
    assert tree[("status",)].positionals == [OFFLOADS]
    assert tree[("auto",)].positionals == ["choices:on off", OFFLOADS]
    assert tree[("policy", "status")].positionals == [POLICIES]
    assert tree[("completion",)].positionals == ["choices:bash zsh kubectl"]
    assert set(tree[("list",)].flag_values["-o"].removeprefix("choices:").split()) == {
        "wide",
        "name",
        "json",
        "yaml",
    }


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "kubectl-offload.bash"
    path.write_text(bash_script(build_offload_parser()))
    kubectl = tmp_path / "bin" / "kubectl"
    kubectl.parent.mkdir()
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    return path


def complete(script: Path, *words: str) -> list[str]:
    """COMPREPLY for the command line `words` (the last one being completed), as bash computes it."""
    driver = (
        f'source "{script}"\n'
        'COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n'
        '_kubectl_offload kubectl-offload "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        [str(BASH), "--norc", "--noprofile", "-c", driver, "complete", "kubectl-offload", *words],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={"PATH": f"{script.parent / 'bin'}:/usr/bin:/bin"},
    )
    assert done.stderr == ""
    return [line for line in done.stdout.splitlines() if line]


@needs_bash
@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["f"], ["flip"]),
        (["-n", "ml", "p"], ["pause", "promote", "policy"]),
        (["policy", ""], ["list", "status"]),
        (["flip", "chat", "--to", ""], ["home", "away"]),
        # bash splits `--to=h` into `--to`, `=`, `h`
        (["flip", "chat", "--to", "=", "h"], ["home"]),
        (["flip", "chat", "--to", "="], ["home", "away"]),
        # zsh (and a bash without = in COMP_WORDBREAKS) keeps it one word
        (["pause", "chat", "--dry-run=s"], ["--dry-run=server"]),
        (["list", "-o", ""], ["wide", "name", "json", "yaml"]),
        (["flip", "chat", "--wa"], ["--wait"]),
        (["flip", "chat", "--to", "away", "--t"], ["--to", "--timeout"]),
        (["auto", ""], ["on", "off"]),
        (["completion", ""], ["bash", "zsh", "kubectl"]),
        (["flip", "chat", "--timeout", ""], []),
    ],
)
def test_bash_completes_commands_flags_and_choices(
    script: Path, words: list[str], expected: list[str]
) -> None:
    assert complete(script, *words) == expected


@needs_bash
def test_names_come_from_kubectl_in_the_namespace_and_context_typed(script: Path) -> None:
    assert complete(script, "-n", "ml", "status", "--context=lab", "") == ["chat", "embed"]
    assert complete(script, "auto", "off", "e") == ["embed"]
    assert complete(script, "policy", "status", "") == ["training-first"]
    assert complete(script, "list", "--namespace", "") == ["default", "ml"]
    assert complete(script, "--context", "p") == ["prod"]
    calls = (script.parent / "bin" / "calls").read_text().splitlines()
    assert calls[0] == (
        "--namespace ml --context lab get offloads.offload.vk-provider.dev -o name --request-timeout=5s"
    )
    assert calls[2] == "get offloadpolicies.offload.vk-provider.dev -o name --request-timeout=5s"
    # A command with a name given already wants no other: nothing is asked of the cluster.
    assert complete(script, "status", "chat", "") == []
    assert len((script.parent / "bin" / "calls").read_text().splitlines()) == 5


@needs_bash
def test_without_kubectl_names_complete_to_nothing_quietly(script: Path) -> None:
    (script.parent / "bin" / "kubectl").unlink()
    assert complete(script, "status", "") == []


def test_the_zsh_script_runs_the_same_functions_through_bashcompinit() -> None:
    parser = build_offload_parser()
    text = zsh_script(parser)
    assert "autoload -U +X bashcompinit && bashcompinit" in text.splitlines()[:4]
    assert text.endswith(bash_script(parser))
    # zsh reserves these names; a local of one of them would break completion (`path` is $PATH).
    for reserved in ("local path", "local words", "local commands", " path=", " words=", " commands="):
        assert reserved not in text


ZSH = shutil.which("zsh")
ZSH_DRIVER = """autoload -U compinit && compinit -u -D
source "$1"; shift
words=("$@"); CURRENT=$#
COMP_WORDS=("${words[@]}"); COMP_CWORD=$((CURRENT - 1))
compgen -F _kubectl_offload -- "${words[CURRENT]}"
"""
"""What zsh's bash emulation does on Tab (`_bash_complete`), short of compadd, which only runs in a
completion widget: the candidates, before zsh keeps those that match the word typed."""


@pytest.mark.skipif(ZSH is None, reason="zsh is not installed")
@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["f"], ["flip"]),
        (["policy", "s"], ["status"]),
        (["flip", "chat", "--to", ""], ["home", "away"]),
        (["flip", "chat", "--to=a"], ["--to=away"]),
        (["pause", "chat", "--dry-run=s"], ["--dry-run=server"]),
        (["-n", "ml", "status", "--context", "lab", ""], ["chat", "embed"]),
    ],
)
def test_zsh_completes_through_its_bash_emulation(
    script: Path, words: list[str], expected: list[str]
) -> None:
    zsh_file = script.parent / "kubectl-offload.zsh"
    zsh_file.write_text(zsh_script(build_offload_parser()))
    driver = script.parent / "drive.zsh"
    driver.write_text(ZSH_DRIVER)
    done = subprocess.run(
        [str(ZSH), "-f", str(driver), str(zsh_file), "kubectl-offload", *words],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={"PATH": f"{script.parent / 'bin'}:/usr/bin:/bin", "HOME": str(script.parent)},
    )
    assert done.stderr == ""
    typed = words[-1]
    assert [line for line in done.stdout.splitlines() if line and line.startswith(typed)] == expected
    if "ml" in words:
        calls = (script.parent / "bin" / "calls").read_text().splitlines()
        assert calls == [
            "--namespace ml --context lab get offloads.offload.vk-provider.dev -o name --request-timeout=5s"
        ]


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_command_prints_the_script(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert offload_main(["completion", shell]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {shell} completion for kubectl-offload")
    assert "complete -F _kubectl_offload kubectl-offload" in out


def test_an_unknown_shell_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        offload_main(["completion", "fish"])
    assert exited.value.code == 2
    assert "argument shell: invalid choice: 'fish' (choose from 'bash', 'zsh', 'kubectl')" in (
        capsys.readouterr().err
    )


@pytest.fixture
def completer(script: Path) -> Path:
    """kubectl_complete-offload beside the stand-in kubectl."""
    path = script.parent / "bin" / PLUGIN_COMPLETER
    path.write_text(kubectl_plugin_script(build_offload_parser()))
    path.chmod(0o755)
    return path


def run_completer(completer: Path, *words: str, kubectl: str = "") -> list[str]:
    done = subprocess.run(
        [kubectl, "__complete", "offload", *words] if kubectl else [str(completer), *words],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={"PATH": f"{completer.parent}:{Path(kubectl).parent if kubectl else ''}:/usr/bin:/bin"},
    )
    return done.stdout.splitlines()


@needs_bash
def test_the_kubectl_plugin_completer_answers_as_kubectl_asks(completer: Path) -> None:
    assert run_completer(completer, "flip", "chat", "--to", "") == ["home", "away", ":4"]
    assert run_completer(completer, "-n", "ml", "status", "c") == ["chat", ":4"]
    assert run_completer(completer, "status", "chat", "") == [":4"]


REAL_KUBECTL = shutil.which("kubectl")


@needs_bash
@pytest.mark.skipif(REAL_KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_completes_kubectl_offload_through_it(completer: Path) -> None:
    """kubectl (1.26+) finds the completer on $PATH, with the plugin itself."""
    plugin = completer.parent / "kubectl-offload"
    plugin.write_text("#!/bin/sh\n")
    plugin.chmod(0o755)
    shown = run_completer(completer, "flip", "chat", "--to", "", kubectl=str(REAL_KUBECTL))
    assert shown == ["home", "away", ":4"]


@needs_bash
def test_any_word_a_parser_names_is_quoted_for_the_shell(tmp_path: Path) -> None:
    """An installed command may name choices with quotes or $: the script stays valid shell and runs."""
    parser = build_offload_parser()
    odd = parser._subparsers._group_actions[0].add_parser("odd")  # type: ignore[union-attr]
    odd.add_argument("--mode", choices=["it's", "$HOME"])
    path = tmp_path / "odd.bash"
    path.write_text(bash_script(parser))
    subprocess.run([str(BASH), "-n", str(path)], check=True, timeout=30)
    tree = command_tree(parser)
    assert tree[("odd",)].flag_values["--mode"] == "choices:it's $HOME"
    (tmp_path / "bin").mkdir()
    assert complete(path, "o") == ["odd"]
