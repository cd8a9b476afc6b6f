"""The helpers every daemon's command line is built with: value types, deprecated aliases, environment."""

from __future__ import annotations

import argparse

import pytest

from vk_provider.runtime.flagaliases import add_deprecated_alias
from vk_provider.runtime.flagenvironment import environment_variable, read_environment, service_link
from vk_provider.runtime.flagtypes import host_port, seconds_with_unit


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30.0), ("30s", 30.0), ("1.5", 1.5), ("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0)],
)
def test_the_old_duration_forms_read_as_seconds(text: str, seconds: float) -> None:
    assert seconds_with_unit(text) == seconds


@pytest.mark.parametrize("text", ["", "-1", "soon", "1d", "1e3"])
def test_a_duration_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected a duration"):
        seconds_with_unit(text)


@pytest.mark.parametrize(
    ("text", "address"),
    [("10.0.0.1:80", ("10.0.0.1", 80)), (":8081", ("0.0.0.0", 8081)), ("[::1]:9", ("::1", 9))],  # noqa: S104
)
def test_host_port(text: str, address: tuple[str, int]) -> None:
    assert host_port(text) == address


def test_an_alias_of_a_switch_switches_it_and_warns(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--allow-everything", action="store_true")
    add_deprecated_alias(parser, "--yolo", "--allow-everything")
    assert parser.parse_args(["--yolo"]).allow_everything is True
    assert capsys.readouterr().err == "warning: --yolo is deprecated, use --allow-everything\n"
    assert "--yolo" not in parser.format_help()


def test_the_variable_of_a_flag_and_what_is_not_one() -> None:
    assert environment_variable("--leader-election-lease-duration-seconds") == (
        "VK_PROVIDER_LEADER_ELECTION_LEASE_DURATION_SECONDS"
    )
    assert service_link("VK_PROVIDER_ROUTER_PORT", "tcp://10.0.0.1:9081")
    assert not service_link("VK_PROVIDER_ROUTER_PORT", "9081")
    assert not service_link("VK_PROVIDER_ROUTER_URL", "tcp://10.0.0.1:9081")


def test_a_choice_from_the_environment_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="daemon")
    parser.add_argument("--mode", choices=("a", "b"), default="a")
    read_environment(parser, {"VK_PROVIDER_MODE": "b"})
    assert parser.parse_args([]).mode == "b"
    with pytest.raises(SystemExit):
        read_environment(parser, {"VK_PROVIDER_MODE": "c"})
    assert "environment variable VK_PROVIDER_MODE='c': choose from a, b" in capsys.readouterr().err
