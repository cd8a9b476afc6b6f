"""Ordinary mistakes on the daemons' command lines end in one line that names the problem, not a
traceback: exit 2 for usage (a bad flag value, a bad variable, an unreadable settings file), 1
otherwise (a kubeconfig that cannot be used, no cluster at all). An apiserver that does not answer is
retried with one line per attempt, never a traceback. And the daemons find their cluster as kubectl
does: `--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`, the pod's ServiceAccount."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from vk_devtools.devcluster.pki import CertificateAuthority
from vk_devtools.devcluster.ports import PortPicker
from vk_provider.cli import DAEMONS, main
from vk_provider.kit.kubeconfigs import KubeconfigError, daemon_kubeconfig

ROOT = Path(__file__).parents[2]


def kubeconfig(path: Path, *, current: str | None = "lab", contexts: tuple[str, ...] = ("lab",)) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": name, "context": {"cluster": "c", "user": "u"}} for name in contexts],
    }
    if current is not None:
        document["current-context"] = current
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("command", DAEMONS)
def test_a_missing_kubeconfig_is_one_line_and_exit_1(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    plaintext = ["--allow-plaintext"] if command == "xds" else []  # else it wants its TLS files first
    assert main([command, "--kubeconfig", "/nonexistent/kubeconfig", *plaintext]) == 1
    error = capsys.readouterr().err
    assert error == (
        f"vk-provider {command}: cannot read kubeconfig /nonexistent/kubeconfig: No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("contents", "problem"),
    [
        ("", "is empty or not a mapping"),
        ("clusters: [", "is not valid YAML"),
        (None, "sets no current-context"),
        ("other", "its current-context 'other' is not among its contexts"),
    ],
)
def test_a_broken_kubeconfig_says_what_is_wrong(
    tmp_path: Path, contents: str | None, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kubeconfig"
    if contents in (None, "other"):
        kubeconfig(path, current=contents)
    else:
        path.write_text(contents)
    assert main(["controller", "--kubeconfig", str(path)]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"vk-provider controller: kubeconfig {path}")
    assert problem in error
    assert error.count("\n") == 1


def test_the_kubeconfig_is_found_as_kubectl_finds_it(tmp_path: Path) -> None:
    flagged = kubeconfig(tmp_path / "flagged")
    from_environment = kubeconfig(tmp_path / "environment")
    home = tmp_path / "home"
    assert daemon_kubeconfig(str(flagged), {"KUBECONFIG": str(from_environment)}, home) == str(flagged)
    assert daemon_kubeconfig(None, {"KUBECONFIG": f"{from_environment}:/elsewhere"}, home) == str(
        from_environment
    )
    # In a pod, with nothing named: the ServiceAccount.
    assert daemon_kubeconfig(None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, home) is None
    # ~/.kube/config before the ServiceAccount, as kubectl.
    (home / ".kube").mkdir(parents=True)
    kubeconfig(home / ".kube" / "config")
    assert daemon_kubeconfig(None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, home) == str(
        home / ".kube" / "config"
    )
    assert daemon_kubeconfig(None, {}, home) == str(home / ".kube" / "config")
    with pytest.raises(KubeconfigError, match="no cluster to talk to"):
        daemon_kubeconfig(None, {}, tmp_path / "empty-home")


@pytest.mark.parametrize("command", DAEMONS)
def test_an_unknown_log_level_is_a_usage_error_naming_the_choices(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--log-level", "verbose"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "unknown log level 'verbose' (choose from DEBUG, INFO, WARNING, ERROR, CRITICAL)" in error
    assert "Traceback" not in error


@pytest.mark.parametrize(
    ("variable", "message"),
    [
        ("VK_PROVIDER_LOG_LEVEL", "log_level: unknown log level 'loud'"),
        ("VK_PROVIDER_LOG_FORMAT", "log_format: unknown log format 'loud'"),
    ],
)
def test_a_log_setting_from_the_nodes_environment_is_checked_too(
    variable: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, "loud")
    with pytest.raises(SystemExit) as exit_:
        main(["node"])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_daemon_started_without_a_usable_kubeconfig_prints_no_traceback(tmp_path: Path) -> None:
    """The process as users run it: one line on stderr, exit 1."""
    done = subprocess.run(
        [sys.executable, "-m", "vk_provider", "router", "--kubeconfig", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    # The router says which event loop it runs first (the image's test reads that line), then why it stops.
    assert done.stderr.strip().splitlines()[-1] == (
        f"vk-provider router: cannot read kubeconfig {tmp_path / 'missing'}: No such file or directory"
    )


def exit_code_and_error(arguments: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """What `vk-provider <arguments>` exits with and writes to stderr, whether argparse stops it
    (SystemExit) or the command returns."""
    try:
        code = main(list(arguments))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


PLUGIN_SERVE = ("plugin", "serve", "--provider", "mock", "--node-name", "n", "--address", "unix:///x.sock")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["controller", "--leader-election-lease-duration-seconds", "abc"],
            "argument --leader-election-lease-duration-seconds: expected a number of seconds, got 'abc'",
        ),
        (
            ["controller", "--leader-election-retry-period-seconds", "-1"],
            "expected a number of seconds greater than 0, got '-1'",
        ),
        (
            [
                "controller",
                "--leader-election-lease-duration-seconds",
                "4",
                "--leader-election-retry-period-seconds",
                "5",
            ],
            "--leader-election-retry-period-seconds must be shorter than the renew deadline",
        ),
        (
            ["controller", "--concurrent-reconciles", "0"],
            "argument --concurrent-reconciles: expected at least 1",
        ),
        (["controller", "--admin-listen", "localhost"], "expected HOST:PORT with a port from 1 to 65535"),
        (["router", "--listen", "0.0.0.0:99999"], "argument --listen: expected HOST:PORT"),
        (["router", "--worker-processes", "-2"], "argument --worker-processes: expected at least 1, got -2"),
        (["router", "--shutdown-grace-seconds", "-5"], "expected 0 seconds or more, got '-5'"),
        (["router", "--check-interval-seconds", "nan"], "expected a finite number of seconds"),
        (["router", "--log-format", "xml"], "unknown log format 'xml' (choose from text, json)"),
        (
            ["router", "--sign-for-host", "https://x"],
            "expected a host name or IP address (no scheme, port or path)",
        ),
        (["xds", "--envoy-port", "70000"], "argument --envoy-port: expected a port from 1 to 65535"),
        (["xds", "--admin-listen", ":"], "argument --admin-listen: expected HOST:PORT"),
        (["node", "--concurrent-pod-reconciles", "-3"], "concurrent_pod_reconciles '-3' is out of range"),
        (["node", "--lease-duration-seconds", "abc"], "lease_duration_seconds 'abc' is invalid"),
        (["node", "--log-format", "xml"], "argument --log-format: unknown log format 'xml'"),
        ([*PLUGIN_SERVE, "--state-dir", "state", "--log-format", "xml"], "unknown log format 'xml'"),
    ],
)
def test_a_bad_flag_value_is_one_line_and_exit_2(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, error = exit_code_and_error(arguments, capsys)
    assert code == 2, error
    assert message in error
    assert error.count("\n") == 1, error  # no usage screen, no traceback
    assert error.startswith("vk-provider ")


@pytest.mark.parametrize(
    "command",
    [
        [*PLUGIN_SERVE, "--state-dir", "STATE", "--provider-config", "MISSING"],
        ["conformance", "--provider", "mock", "--provider-config", "MISSING"],
        ["node", "--config", "MISSING"],
    ],
    ids=["plugin", "conformance", "node"],
)
def test_an_unreadable_settings_file_is_one_line_and_exit_2(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.yaml"
    arguments = [
        {"MISSING": str(missing), "STATE": str(tmp_path / "state")}.get(word, word) for word in command
    ]
    code, error = exit_code_and_error(arguments, capsys)
    assert code == 2
    assert f"cannot read {missing}: No such file or directory" in error
    assert error.count("\n") == 1, error


def test_a_bad_value_in_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VK_PROVIDER_CONCURRENT_RECONCILES", "many")
    code, error = exit_code_and_error(["controller"], capsys)
    assert code == 2
    assert error == (
        "vk-provider controller: error: environment variable VK_PROVIDER_CONCURRENT_RECONCILES='many': "
        "expected a whole number, got 'many'\n"
    )


def apiserver_that_refuses(folder: Path) -> Path:
    """A kubeconfig whose server refuses every connection (port 1 on loopback), with a CA the node
    accepts, so each daemon gets as far as talking to it."""
    authority = CertificateAuthority.create(folder / "ca")
    path = kubeconfig(folder / "kubeconfig")
    document = yaml.safe_load(path.read_text())
    document["clusters"][0]["cluster"]["certificate-authority"] = str(authority.paths.cert)
    path.write_text(yaml.safe_dump(document))
    return path


def daemon_arguments(command: str, folder: Path) -> list[str]:
    ports = PortPicker()
    free = [f"127.0.0.1:{ports.pick()}" for _ in range(2)]
    return {
        "node": [
            "--node-name",
            "t",
            "--state-dir",
            str(folder / "state"),
            "--kubelet-port",
            str(ports.pick()),
        ],
        "router": ["--listen", free[0], "--admin-listen", free[1], "--worker-processes", "1"],
        "xds": ["--listen", free[0], "--admin-listen", free[1], "--allow-plaintext"],
        "controller": [],
    }[command]


RETRY_LINES = {
    "node": "leader election: cannot reach the apiserver: Cannot connect to host 127.0.0.1:1",
    "router": "watching offloads failed (Cannot connect to host 127.0.0.1:1",
    "xds": "watching offloads failed (Cannot connect to host 127.0.0.1:1",
    "controller": "leader election: cannot reach the apiserver: Cannot connect to host 127.0.0.1:1",
}


@pytest.mark.parametrize("command", DAEMONS)
def test_an_apiserver_that_refuses_connections_is_retried_with_one_line_per_attempt(
    command: str, tmp_path: Path
) -> None:
    """Every daemon keeps trying (a Deployment's pods start before the apiserver is reachable, and the
    apiserver restarts under them): Ready stays false meanwhile, and the log says why in one line
    per attempt, with no traceback; SIGTERM still stops it cleanly."""
    arguments = ["--kubeconfig", str(apiserver_that_refuses(tmp_path)), *daemon_arguments(command, tmp_path)]
    log = tmp_path / "stderr"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "vk_provider", command, *arguments], stderr=stderr, cwd=ROOT
        )
        try:
            deadline = time.monotonic() + 30
            while RETRY_LINES[command] not in log.read_text() and time.monotonic() < deadline:
                assert process.poll() is None, log.read_text()
                time.sleep(0.2)  # the poll of a wait bounded by its deadline (noqa: sleep-ok)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0, log.read_text()
        finally:
            process.kill()
    output = log.read_text()
    assert RETRY_LINES[command] in output
    assert "Traceback" not in output


def test_a_node_without_leader_election_stops_with_one_line_when_the_apiserver_refuses(
    tmp_path: Path,
) -> None:
    """Without a Lease to wait on it cannot register its Node: one line, exit 1 (its pod restarts)."""
    arguments = ["--kubeconfig", str(apiserver_that_refuses(tmp_path)), *daemon_arguments("node", tmp_path)]
    done = subprocess.run(
        [sys.executable, "-m", "vk_provider", "node", *arguments, "--leader-elect", "false"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "node t: cannot reach the apiserver: Cannot connect to host 127.0.0.1:1 ssl:default "
            "[Connect call failed ('127.0.0.1', 1)]"
        )
    )


def test_json_logs_are_one_object_a_line_from_the_first_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vk_provider",
            "router",
            "--log-format",
            "json",
            "--kubeconfig",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "VK_PROVIDER_LOG_LEVEL": "debug"},
        check=False,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    records = [json.loads(line) for line in lines[:-1]]  # the last: the one-line refusal, as ever
    assert records, done.stderr
    assert {record["logger"] for record in records} >= {"vk_provider.router.running"}
    assert all(set(record) >= {"time", "level", "logger", "message"} for record in records)
    assert lines[-1].startswith("vk-provider router: cannot read kubeconfig")


def run_vk_provider(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vk_provider", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )


def test_a_plugin_that_cannot_listen_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        done = run_vk_provider(*PLUGIN_SERVE[:-1], address, "--state-dir", str(tmp_path / "state"))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"vk-provider plugin serve: error: cannot listen on {address} "
        "(in use, or not an address this host has)"
    )


def test_a_node_whose_state_folder_cannot_be_made_says_so_in_one_line(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    done = run_vk_provider(
        "node",
        "--kubeconfig",
        str(kubeconfig(tmp_path / "kubeconfig")),
        "--state-dir",
        str(blocked / "state"),
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(f"node vk-provider: cannot create --state-dir {blocked / 'state'}: Not a directory")
    )
