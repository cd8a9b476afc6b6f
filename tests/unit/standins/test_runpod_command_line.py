"""`python -m vk_devtools.standins.runpod --profile ...`: the profile the command line builds."""

from __future__ import annotations

import pytest

from vk_devtools.standins.runpod.profile import REALISTIC
from vk_devtools.standins.runpod.server import STANDALONE_FAST_SECONDS, parse_arguments, profile_of


def test_without_a_profile_the_standalone_pace_is_unchanged() -> None:
    profile = profile_of(parse_arguments([]))
    assert profile.name == "fast"
    assert (profile.provisioning_seconds, profile.starting_seconds) == (STANDALONE_FAST_SECONDS,) * 2
    assert (profile.load_seconds, profile.rate_limits, profile.proxy_timeout_seconds) == (0, (), None)
    given = profile_of(parse_arguments(["--provisioning-seconds", "0.5", "--starting-seconds", "0.25"]))
    assert (given.provisioning_seconds, given.starting_seconds) == (0.5, 0.25)


def test_the_realistic_profile_scaled_and_with_a_load_time_given() -> None:
    assert profile_of(parse_arguments(["--profile", "realistic"])) == REALISTIC
    scaled = profile_of(parse_arguments(["--profile", "realistic", "--time-scale", "0.1"]))
    assert scaled.cold_start_seconds == pytest.approx(42)
    assert scaled.rate_limits == REALISTIC.rate_limits
    assert scaled.proxy_timeout_seconds == 100
    loaded = profile_of(parse_arguments(["--profile", "realistic", "--load-seconds", "5"]))
    assert (loaded.provisioning_seconds, loaded.load_seconds) == (30, 5)


def test_an_unknown_profile_is_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        parse_arguments(["--profile", "leisurely"])
