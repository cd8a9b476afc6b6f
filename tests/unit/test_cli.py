"""The command lines answer --help and --version, and reject bad arguments with exit code 2."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vk_devtools.devcluster import cluster, commands
from vk_provider import __version__
from vk_provider.cli import _command_parser, build_parser, main, offload_main, parse_command_line
from vk_provider.node.settings import FIELDS, load_settings

ROOT = Path(__file__).parents[2]


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
        (
            "interconnect-exporter",
            ("grpc", "botocore", "vk_provider.node.running", "vk_provider.controller.running", "vk_devtools"),
        ),
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


# --- One naming scheme, the old names kept as deprecated aliases ----------------------------------

PLUGIN_SERVE = ["plugin", "serve", "--provider", "mock", "--node-name", "n", "--address", "unix:///x.sock"]


@pytest.mark.parametrize(
    ("arguments", "old", "new", "dest", "value"),
    [
        (["router", "--workers", "3"], "--workers", "--worker-processes", "worker_processes", 3),
        (
            ["router", "--shutdown-grace", "1m"],
            "--shutdown-grace",
            "--shutdown-grace-seconds",
            "shutdown_grace_seconds",
            60.0,
        ),
        (
            ["router", "--shutdown-delay", "5"],
            "--shutdown-delay",
            "--shutdown-delay-seconds",
            "shutdown_delay_seconds",
            5.0,
        ),
        (
            ["router", "--connect-timeout", "500ms"],
            "--connect-timeout",
            "--connect-timeout-seconds",
            "connect_timeout_seconds",
            0.5,
        ),
        (
            ["router", "--header-timeout", "10s"],
            "--header-timeout",
            "--header-timeout-seconds",
            "header_timeout_seconds",
            10.0,
        ),
        (
            ["xds", "--check-interval", "2s"],
            "--check-interval",
            "--check-interval-seconds",
            "check_interval_seconds",
            2.0,
        ),
        (
            ["xds", "--check-timeout", "1.5"],
            "--check-timeout",
            "--check-timeout-seconds",
            "check_timeout_seconds",
            1.5,
        ),
        (
            ["xds", "--status-listen", "127.0.0.1:9"],
            "--status-listen",
            "--admin-listen",
            "admin_listen",
            ("127.0.0.1", 9),
        ),
        (
            ["controller", "--workers", "8"],
            "--workers",
            "--concurrent-reconciles",
            "concurrent_reconciles",
            8,
        ),
        (
            ["controller", "--metrics-listen", ":8081"],
            "--metrics-listen",
            "--admin-listen",
            "admin_listen",
            ("0.0.0.0", 8081),  # noqa: S104 - an empty host is every address
        ),
        (
            ["controller", "--lease-name", "l"],
            "--lease-name",
            "--leader-election-lease-name",
            "leader_election_lease_name",
            "l",
        ),
        (
            ["controller", "--identity", "me"],
            "--identity",
            "--leader-election-identity",
            "leader_election_identity",
            "me",
        ),
        (
            ["controller", "--lease-duration", "30s"],
            "--lease-duration",
            "--leader-election-lease-duration-seconds",
            "leader_election_lease_duration_seconds",
            30.0,
        ),
        (
            ["controller", "--lease-renew", "2"],
            "--lease-renew",
            "--leader-election-retry-period-seconds",
            "leader_election_retry_period_seconds",
            2.0,
        ),
        (
            ["controller", "--policy-interval", "1m"],
            "--policy-interval",
            "--policy-interval-seconds",
            "policy_interval_seconds",
            60.0,
        ),
        (
            ["node", "--pod-workers", "7"],
            "--pod-workers",
            "--concurrent-pod-reconciles",
            "concurrent_pod_reconciles",
            "7",
        ),
        (
            [*PLUGIN_SERVE, "--state-dir", "s", "--tls-cert", "c"],
            "--tls-cert",
            "--tls-cert-file",
            "tls_cert_file",
            Path("c"),
        ),
        (
            [*PLUGIN_SERVE, "--state-dir", "s", "--tls-key", "k"],
            "--tls-key",
            "--tls-key-file",
            "tls_key_file",
            Path("k"),
        ),
        (
            [*PLUGIN_SERVE, "--state-dir", "s", "--tls-client-ca", "a"],
            "--tls-client-ca",
            "--client-ca-file",
            "client_ca_file",
            Path("a"),
        ),
    ],
)
def test_an_old_flag_name_still_works_and_names_its_new_one(  # noqa: PLR0917 - the cases' columns
    arguments: list[str], old: str, new: str, dest: str, value: object, capsys: pytest.CaptureFixture[str]
) -> None:
    _, parsed = parse_command_line(arguments, environ={})
    assert getattr(parsed, dest) == value
    assert capsys.readouterr().err == f"warning: {old} is deprecated, use {new}\n"
    if new.endswith("-seconds") and not arguments[-1].replace(".", "").isdigit():
        return  # a unit (30s) is for the old names only, below
    _, again = parse_command_line([*arguments[:-2], new, arguments[-1]], environ={})
    assert getattr(again, dest) == value  # the same under the new name, and without a warning
    assert capsys.readouterr().err == ""


def test_the_new_duration_flags_take_seconds_as_a_number(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_command_line(["router", "--shutdown-grace-seconds", "30s"], environ={})
    assert "expected a number of seconds, got '30s'" in capsys.readouterr().err
    _, parsed = parse_command_line(["router", "--shutdown-grace-seconds", "2.5"], environ={})
    assert parsed.shutdown_grace_seconds == 2.5


def test_the_node_reads_its_old_setting_names_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    settings = load_settings(config_file=None, environ={"VK_PROVIDER_POD_WORKERS": "3"}, flags={})
    assert settings.concurrent_pod_reconciles == 3
    assert capsys.readouterr().err == (
        "warning: VK_PROVIDER_POD_WORKERS is deprecated, use VK_PROVIDER_CONCURRENT_POD_RECONCILES\n"
    )


# --- Every option from VK_PROVIDER_<FLAG> too, the command line winning ---------------------------


def test_every_daemon_option_can_come_from_the_environment() -> None:
    environ = {
        "VK_PROVIDER_CONCURRENT_RECONCILES": "9",
        "VK_PROVIDER_LEADER_ELECT": "false",
        "VK_PROVIDER_NO_POLICY": "true",
        "VK_PROVIDER_ROUTER_URL": "http://a:9081, http://b:9081",
        "VK_PROVIDER_LOG_FORMAT": "JSON",
        "VK_PROVIDER_ADMIN_LISTEN": "127.0.0.1:8081",
    }
    _, parsed = parse_command_line(["controller"], environ)
    assert parsed.concurrent_reconciles == 9
    assert parsed.leader_elect is False
    assert parsed.policy is False
    assert parsed.router_urls == ["http://a:9081", "http://b:9081"]
    assert parsed.log_format == "json"
    assert parsed.admin_listen == ("127.0.0.1", 8081)
    _, parsed = parse_command_line(["controller", "--concurrent-reconciles", "2"], environ)
    assert parsed.concurrent_reconciles == 2


def test_a_required_option_may_come_from_the_environment() -> None:
    environ = {"VK_PROVIDER_PROVIDER": "mock", "VK_PROVIDER_NODE_NAME": "n", "VK_PROVIDER_STATE_DIR": "/s"}
    _, parsed = parse_command_line(["plugin", "serve", "--address", "unix:///x.sock"], environ)
    assert (parsed.provider, parsed.node_name, parsed.state_dir) == ("mock", "n", Path("/s"))
    _, parsed = parse_command_line(["conformance"], {"VK_PROVIDER_PLUGIN": "unix:///x.sock"})
    assert parsed.plugin == "unix:///x.sock"


def test_a_kubernetes_service_link_is_not_read_as_a_setting() -> None:
    """The Service vk-provider-router puts VK_PROVIDER_ROUTER_PORT=tcp://IP:PORT in every pod of its
    namespace: the controller's --router-port by name, but not a setting."""
    environ = {
        "VK_PROVIDER_ROUTER_PORT": "tcp://10.96.0.7:8080",
        "VK_PROVIDER_ENVOY_PORT": "tcp://10.96.0.8:8080",
    }
    _, parsed = parse_command_line(["controller"], environ)
    assert parsed.router_port == 9081
    _, parsed = parse_command_line(["xds"], environ)
    assert parsed.envoy_port == 8080
    _, parsed = parse_command_line(["controller"], {"VK_PROVIDER_ROUTER_PORT": "9999"})
    assert parsed.router_port == 9999


# --- --help shows every default ---------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["node"], ["router"], ["xds"], ["controller"], ["plugin", "serve"], ["conformance"]]
)
def test_help_shows_every_option_s_default(command: list[str]) -> None:
    parser = build_parser(only=command[0])
    _, command_parser = _command_parser(parser, command)
    formatter = command_parser._get_formatter()
    required_groups = [group for group in command_parser._mutually_exclusive_groups if group.required]
    unsaid = [
        action.option_strings[0]
        for action in command_parser._actions
        if action.option_strings
        and action.help != argparse.SUPPRESS
        and action.nargs != 0  # a switch is off unless given
        and not action.required
        and not any(action in group._group_actions for group in required_groups)
        and action.dest not in ("help", "version")
        and "(default" not in (formatter._get_help_string(action) or "")
    ]
    assert unsaid == []


# --- What the project ships runs with the new names only ---------------------------------------

SHIPPED = [
    *sorted((ROOT / "manifests").rglob("*.yaml")),
    *sorted((ROOT / "charts" / "vk-provider" / "templates").glob("*.yaml")),
]


def shipped_command_lines() -> list[tuple[str, str, list[str]]]:
    """(file, daemon, its flags) for each container of ours the manifests and the chart start."""
    found = []
    for path in SHIPPED:
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            inline = re.match(r'\s*args: \["(node|router|xds|controller)"(.*)\]', line)
            if inline:
                flags = re.findall(r'"(--[\w-]+)', inline.group(2))
                found.append((f"{path.name}:{number + 1}", inline.group(1), flags))
                continue
            block = re.match(r"(\s*)- (node|router|xds|controller)$", line)
            if not block or not lines[number - 1].strip().startswith("args:"):
                continue
            flags = []
            for following in lines[number + 1 :]:
                if following.strip().startswith(("#", "{{")):
                    continue  # a comment, a template's condition
                item = re.match(rf"{block.group(1)}- (--[\w-]+)", following)
                if item is None:
                    break
                flags.append(item.group(1))
            found.append((f"{path.name}:{number + 1}", block.group(2), flags))
    return found


def test_the_shipped_command_lines_use_no_deprecated_or_unknown_flag() -> None:
    command_lines = shipped_command_lines()
    assert {daemon for _, daemon, _ in command_lines} == {"node", "router", "xds", "controller"}
    wrong = []
    for where, daemon, flags in command_lines:
        parser = build_parser(only=daemon)
        _, command_parser = _command_parser(parser, [daemon])
        current = {
            option
            for action in command_parser._actions
            if action.help != argparse.SUPPRESS
            for option in action.option_strings
        }
        wrong += [f"{where}: {daemon} {flag}" for flag in flags if flag not in current]
    assert wrong == []
