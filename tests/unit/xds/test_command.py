"""`vk-provider xds`'s command line: its defaults, and that bad input is refused before anything runs."""

from __future__ import annotations

import pytest

from vk_provider.cli import build_parser


def test_the_xds_command_listens_for_envoys_on_18000_and_gives_them_port_8080() -> None:
    arguments = build_parser().parse_args(["xds"])
    assert arguments.command == "xds"
    assert arguments.listen == ("0.0.0.0", 18000)  # noqa: S104 - an xDS server serves the network
    assert arguments.envoy_port == 8080
    assert arguments.namespace is None
    assert arguments.upstream_ca_file is None
    assert arguments.check_interval > 0  # the router's active checks, shared


def test_an_xds_address_without_a_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["xds", "--listen", "localhost"])
    assert exit_info.value.code == 2
    assert "--listen" in capsys.readouterr().err


def test_the_xds_command_serves_its_status_on_18001() -> None:
    assert build_parser().parse_args(["xds"]).status_listen == ("0.0.0.0", 18001)  # noqa: S104
    arguments = build_parser().parse_args(["xds", "--status-listen", "127.0.0.1:9901"])
    assert arguments.status_listen == ("127.0.0.1", 9901)
