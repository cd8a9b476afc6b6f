"""Ordinary mistakes on the daemons' command lines end in one line that names the problem, not a
traceback: exit 2 for usage (a bad flag value), 1 otherwise (a kubeconfig that cannot be used, no
cluster at all). And the daemons find their cluster as kubectl does: `--kubeconfig`, `$KUBECONFIG`,
`~/.kube/config`, the pod's ServiceAccount."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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


def test_a_log_level_from_the_nodes_environment_is_checked_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VK_PROVIDER_LOG_LEVEL", "loud")
    with pytest.raises(SystemExit) as exit_:
        main(["node"])
    assert exit_.value.code == 2
    assert "log_level: unknown log level 'loud'" in capsys.readouterr().err


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
