"""The command lines answer --help and --version, and reject bad arguments with exit code 2."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from vk_devtools.devcluster import cluster, commands
from vk_provider import __version__
from vk_provider.cli import main, offload_main
from vk_provider.node.settings import FIELDS


@pytest.mark.parametrize(("entry", "name"), [(main, "vk-provider"), (offload_main, "kubectl-offload")])
def test_version_prints_the_package_version(entry, name, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        entry(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"{name} {__version__}"


@pytest.mark.parametrize("entry", [main, offload_main])
def test_help_lists_the_dev_commands(entry, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        entry(["dev", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for command in ("up", "down", "status", "kubeconfig", "build"):
        assert command in out


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "required: COMMAND"),
        (["dev"], "required: COMMAND"),
        (["dev", "explode"], "invalid choice: 'explode'"),
        (["dev", "up", "--node-monitor-grace-period", "-5"], "'-5' must be greater than zero"),
        (["dev", "up", "--default-toleration-seconds", "soon"], "'soon' is not a whole number"),
        (["dev", "build", "--background", "--no-wait"], "not allowed with argument"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(arguments, message, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(arguments)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_node_help_documents_every_setting(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["node", "--help"])
    out = capsys.readouterr().out
    # Repeatable flags are singular: one label or address per flag.
    flag_names = {name: "--" + name.replace("_", "-") for name in FIELDS}
    flag_names.update(labels="--label", addresses="--address")
    undocumented = [
        name for name, flag in flag_names.items() if not re.search(re.escape(flag) + r"(?![-\w])", out)
    ]
    assert undocumented == []


def test_node_rejects_a_bad_setting_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["node", "--taint", "oops"])
    assert exited.value.code == 2
    assert "must look like KEY=VALUE:EFFECT" in capsys.readouterr().err


@pytest.mark.parametrize(("options", "preferred"), [([], True), (["--any-free-ports"], False)])
def test_dev_up_takes_the_usual_ports_unless_told_any_free_ones(
    options: list[str], preferred: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[cluster.ClusterSettings] = []

    def record(settings: cluster.ClusterSettings, *, with_kueue: bool) -> int:
        started.append(settings)
        return 0

    monkeypatch.setattr(commands, "up", record)
    assert main(["dev", "up", "--dir", str(tmp_path), *options]) == 0
    assert [settings.use_preferred_ports for settings in started] == [preferred]


@pytest.mark.parametrize(
    ("command", "absent"),
    [
        ("node", ("botocore", "grpc", "vk_provider.router.running", "vk_provider.controller.running")),
        ("router", ("grpc", "vk_provider.node.running", "vk_provider.controller.running", "vk_devtools")),
        ("controller", ("grpc", "botocore", "vk_provider.node.running", "vk_provider.router.running")),
    ],
)
def test_a_daemon_s_command_line_imports_none_of_the_other_daemons(
    command: str, absent: tuple[str, ...]
) -> None:
    """Each module a daemon does not need costs every start CPU time (and a node memory for days)."""
    probe = (
        "import sys; from vk_provider.cli import build_parser; "
        f"build_parser(only={command!r}).parse_args([{command!r}]); "
        f"print(sorted(name for name in {absent!r} if name in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
