"""`vk-provider xds`'s command line: its defaults, and that bad input is refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from vk_provider.cli import build_parser
from vk_provider.kit.grpctls import ServerTls
from vk_provider.xds.authentication import AuthenticationArgumentError, server_tls
from vk_provider.xds.command import run_xds_command


def test_the_xds_command_listens_for_envoys_on_18000_and_gives_them_port_8080() -> None:
    arguments = build_parser().parse_args(["xds"])
    assert arguments.command == "xds"
    assert arguments.listen == ("0.0.0.0", 18000)  # noqa: S104 - an xDS server serves the network
    assert arguments.envoy_port == 8080
    assert arguments.namespace is None
    assert arguments.upstream_ca_file is None
    assert arguments.check_interval_seconds > 0  # the router's active checks, shared


def test_an_xds_address_without_a_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["xds", "--listen", "localhost"])
    assert exit_info.value.code == 2
    assert "--listen" in capsys.readouterr().err


def test_the_xds_command_serves_its_status_on_18001() -> None:
    assert build_parser().parse_args(["xds"]).admin_listen == ("0.0.0.0", 18001)  # noqa: S104
    arguments = build_parser().parse_args(["xds", "--admin-listen", "127.0.0.1:9901"])
    assert arguments.admin_listen == ("127.0.0.1", 9901)


def test_without_mutual_tls_or_an_explicit_plaintext_the_xds_command_refuses_to_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    arguments = build_parser().parse_args(["xds", "--kubeconfig", "/nonexistent"])
    assert run_xds_command(arguments) == 2
    assert "--allow-plaintext" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tls-cert-file", "c"], "--tls-cert-file needs --tls-key-file, --client-ca-file too"),
        (["--tls-cert-file", "c", "--tls-key-file", "k", "--client-ca-file", "a"], "cannot read c, k, a"),
        (
            ["--tls-cert-file", "c", "--tls-key-file", "k", "--client-ca-file", "a", "--allow-plaintext"],
            "contradicts",
        ),
    ],
)
def test_tls_flags_that_cannot_work_are_refused_by_name(
    flags: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AuthenticationArgumentError, match=message):
        server_tls(build_parser().parse_args(["xds", *flags]))


def test_plaintext_is_served_only_when_asked_for_and_said_loudly(caplog: pytest.LogCaptureFixture) -> None:
    assert server_tls(build_parser().parse_args(["xds", "--allow-plaintext"])) is None
    assert any(record.levelname == "WARNING" and "PLAINTEXT" in record.message for record in caplog.records)


def test_the_three_tls_files_make_a_mutual_tls_server(tmp_path: Path) -> None:
    cert, key, ca = (tmp_path / name for name in ("xds.crt", "xds.key", "ca.crt"))
    for path in (cert, key, ca):
        path.write_text("pem")
    flags = ["--tls-cert-file", str(cert), "--tls-key-file", str(key), "--client-ca-file", str(ca)]
    assert server_tls(build_parser().parse_args(["xds", *flags])) == ServerTls(cert, key, ca)
