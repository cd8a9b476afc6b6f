"""The call settings every remote provider shares: read from flat keys, checked, named when wrong."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from vk_provider.kit.resilience.settings import CallSettings, ConfigValues, read_call_settings, setting_keys

from .fakes import FakeTime


@dataclasses.dataclass(frozen=True, slots=True)
class ExampleSettings:
    region: str = ""
    calls: CallSettings = dataclasses.field(default_factory=CallSettings)


def test_absent_keys_give_the_defaults_and_the_policy_and_breaker_follow_them() -> None:
    settings = read_call_settings(ConfigValues("example", {}))
    assert settings == CallSettings()
    policy = settings.call_policy()
    assert (policy.timeout_seconds, policy.max_attempts, policy.max_retry_after_seconds) == (30.0, 4, 30.0)
    assert (policy.initial_backoff_seconds, policy.max_backoff_seconds) == (0.5, 8.0)
    breaker = settings.breaker("Example", FakeTime().clock)
    assert (breaker.name, breaker.failure_threshold, breaker.open_seconds) == ("Example", 5, 30.0)


def test_the_health_probe_waits_no_longer_than_a_call() -> None:
    assert CallSettings(health_timeout_seconds=5, call_timeout_seconds=2).health_probe_timeout_seconds == 2
    assert CallSettings(health_timeout_seconds=5, call_timeout_seconds=9).health_probe_timeout_seconds == 5


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"call_timeout_seconds": 0}, "call_timeout_seconds must be a number of seconds > 0, not 0"),
        ({"max_attempts": 0}, "max_attempts must be an integer >= 1, not 0"),
        ({"max_attempts": True}, "max_attempts must be an integer >= 1, not True"),
        ({"backoff_max_seconds": -1}, "backoff_max_seconds must be a number of seconds >= 0, not -1"),
        ({"breaker_open_seconds": "30"}, "breaker_open_seconds must be a number of seconds > 0, not '30'"),
        ({"backoff_initial_seconds": 2, "backoff_max_seconds": 1}, "backoff must satisfy"),
    ],
)
def test_a_wrong_value_names_the_provider_and_the_key(config: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=r"^example provider: ") as raised:
        read_call_settings(ConfigValues("example", config))
    assert words in str(raised.value)


def test_the_call_keys_sit_flat_beside_the_providers_own(caplog: pytest.LogCaptureFixture) -> None:
    assert setting_keys(ExampleSettings) == [
        "region",
        *(field.name for field in dataclasses.fields(CallSettings)),
    ]
    with caplog.at_level(logging.WARNING):
        ConfigValues("example", {"region": "x", "max_attempts": 2, "calls": {}}).warn_unknown(ExampleSettings)
    assert "ignoring unknown example provider settings ['calls']" in caplog.text
