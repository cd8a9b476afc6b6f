"""An apiserver that cannot be reached (connection refused, a name that does not resolve, a certificate
not trusted) ends every command with one line naming the server and why, exit 1, and no traceback;
no real cluster is needed: the kubeconfig points at a closed port, a `.invalid` name or a local TLS
server whose CA the kubeconfig does not trust."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from tests.unit.local import LOOPBACK, closed_port_url
from vk_devtools.devcluster.pki import CertificateAuthority
from vk_provider.cli import offload_main
from vk_provider.kit.kube import KubeApi
from vk_provider.offloadcli import uninstall

ROOT = Path(__file__).resolve().parents[3]

COMMANDS = [
    ["list"],
    ["list", "-A", "-o", "wide"],
    ["status", "chat"],
    ["flip", "chat", "--to", "away", "--wait", "--timeout", "1m"],
    ["flip", "chat", "--to", "away", "--dry-run=server"],
    ["pause", "chat"],
    ["resume", "chat", "--dry-run"],
    ["abort", "chat"],
    ["promote", "chat"],
    ["auto", "off", "chat"],
    ["policy", "list"],
    ["policy", "status", "training-first"],
    ["uninstall", "--timeout", "1m"],
    ["uninstall", "--dry-run"],
]


def write_kubeconfig(folder: Path, server: str, *, certificate_authority: Path | None = None) -> Path:
    trust = (
        f"certificate-authority: {certificate_authority}"
        if certificate_authority
        else "insecure-skip-tls-verify: true"
    )
    path = folder / "kubeconfig"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {{server: "{server}", {trust}}}
contexts:
- name: lab
  context: {{cluster: lab, user: me, namespace: ml}}
current-context: lab
users:
- name: me
  user: {{token: not-a-secret}}
"""
    )
    return path


def run_failing(command: list[str], kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The command's one line on stderr, after checking it exited 1 and said nothing else there (stdout
    may hold what it set out to do, e.g. `uninstall: every namespace, within 1m`)."""
    assert offload_main([*command, "--kubeconfig", str(kubeconfig)]) == 1
    out, error = capsys.readouterr()
    assert "would" not in out
    assert error.count("\n") == 1, error
    return error.rstrip("\n")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_refused_connection_is_one_line_and_exit_1(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = closed_port_url().replace("http://", "https://")
    port = server.rsplit(":", 1)[1]
    line = run_failing(command, write_kubeconfig(tmp_path, server), capsys)
    assert line == (
        f"error: cannot reach the apiserver at {server}: the connection to {LOOPBACK}:{port} was refused"
    )


def test_a_name_that_does_not_resolve_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = write_kubeconfig(tmp_path, "https://apiserver.example.invalid:6443")
    line = run_failing(["list"], kubeconfig, capsys)
    assert line.startswith(
        "error: cannot reach the apiserver at https://apiserver.example.invalid:6443: "
        "the name apiserver.example.invalid does not resolve ("
    )


@contextlib.contextmanager
def tls_server(folder: Path) -> Iterator[tuple[str, Path]]:
    """A local TLS server with a certificate of its own CA: (its URL, that CA's certificate)."""
    authority = CertificateAuthority.create(folder / "ca")
    pair = authority.issue_serving(
        folder, "apiserver", common_name="apiserver", ip_addresses=(ipaddress.IPv4Address(LOOPBACK),)
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pair.cert, pair.key)
    listener = socket.create_server((LOOPBACK, 0))

    def serve() -> None:
        with contextlib.suppress(OSError):  # the listener closed: the test is over
            while True:
                connection, _ = listener.accept()
                with contextlib.suppress(OSError), connection:
                    context.wrap_socket(connection, server_side=True).close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"https://{LOOPBACK}:{listener.getsockname()[1]}", authority.paths.cert
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept(); close() alone would not
        listener.close()
        thread.join(timeout=5)


def test_a_certificate_the_kubeconfig_does_not_trust_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = CertificateAuthority.create(tmp_path / "other")
    with tls_server(tmp_path) as (server, _):
        kubeconfig = write_kubeconfig(tmp_path, server, certificate_authority=other.paths.cert)
        line = run_failing(["status", "chat"], kubeconfig, capsys)
    assert line == (
        f"error: cannot reach the apiserver at {server}: its TLS certificate is not trusted "
        "(unable to get local issuer certificate)"
    )


def test_version_still_prints_both_lines_and_says_why_the_controller_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = closed_port_url().replace("http://", "https://")
    assert offload_main(["version", "--kubeconfig", str(write_kubeconfig(tmp_path, server))]) == 0
    client, controller = capsys.readouterr().out.splitlines()
    assert client.startswith("client: ")
    assert controller.startswith(f"controller: unreachable (cannot reach the apiserver at {server}: ")


def test_the_process_prints_no_traceback(tmp_path: Path) -> None:
    server = closed_port_url().replace("http://", "https://")
    kubeconfig = write_kubeconfig(tmp_path, server)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from vk_provider.cli import offload_main; sys.exit(offload_main())",
            "-n",
            "ml",
            "list",
            "--kubeconfig",
            str(kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"error: cannot reach the apiserver at {server}: ")
    assert done.stderr.count("\n") == 1


class FlakyApi:
    """Answers GETs with an empty list, except that the listed calls raise a refused connection."""

    def __init__(self, refused: set[int]) -> None:
        self.refused = refused
        self.calls = 0

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self.calls += 1
        if self.calls in self.refused:
            raise ConnectionRefusedError(111, "Connection refused")
        return {"items": []}


def uninstall_settings() -> uninstall.Settings:
    return uninstall.Settings(
        scope=None, timeout_seconds=60, lease=("ns", "lease"), virtual_nodes="x=y", force=False, dry_run=None
    )


async def test_uninstall_gives_up_at_once_until_the_apiserver_has_answered_then_waits_a_restart_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(uninstall, "RETRY_INITIAL_SECONDS", 0.001)
    monkeypatch.setattr(uninstall, "RETRY_MAX_SECONDS", 0.001)
    never = FlakyApi(refused={1})
    with pytest.raises(ConnectionRefusedError):
        await uninstall.Cluster(cast(KubeApi, never), uninstall_settings()).offloads()
    assert never.calls == 1

    restarting = FlakyApi(refused={2, 3})
    cluster = uninstall.Cluster(cast(KubeApi, restarting), uninstall_settings())
    assert await cluster.offloads() == []
    assert await cluster.offloads() == []
    assert restarting.calls == 4
    assert capsys.readouterr().err.count("warning: reading the Offloads failed") == 2
