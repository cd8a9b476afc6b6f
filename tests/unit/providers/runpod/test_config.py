"""The runpod provider's settings: defaults, and wrong values named at start-up."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from vk_provider import plugins
from vk_provider.provider import ProviderContext
from vk_providers.runpod import RunPodProvider
from vk_providers.runpod.config import (
    DEFAULT_API_URL,
    DEFAULT_PROXY_URL_TEMPLATE,
    RunPodSettings,
    parse_settings,
)


def test_defaults_point_at_runpods_v2_api_and_https_proxy() -> None:
    settings = parse_settings({})
    assert settings == RunPodSettings()
    assert settings.api_url == DEFAULT_API_URL == "https://api.runpod.io/v2"
    assert settings.proxy_url_template == DEFAULT_PROXY_URL_TEMPLATE
    assert (settings.api_key_file, settings.api_key_env, settings.cloud) == (None, "RUNPOD_API_KEY", "SECURE")
    policy = settings.calls.call_policy()
    assert (policy.timeout_seconds, policy.max_attempts) == (30.0, 4)
    assert settings.calls.breaker_failure_threshold > policy.max_attempts  # one exhausted call: still closed


def test_values_are_read() -> None:
    settings = parse_settings(
        {
            "api_url": "http://127.0.0.1:8080/v2/",
            "api_key_file": "/etc/runpod/key",
            "gpu_type": "NVIDIA A100 80GB PCIe",
            "gpu_count": 2,
            "cloud": "COMMUNITY",
            "data_center_ids": ["EU-RO-1"],
            "max_price_per_hour": 3,
            "capacity": {"nvidia.com/gpu": 16},
            "call_timeout_seconds": 5,
        }
    )
    assert settings.api_url == "http://127.0.0.1:8080/v2"
    assert settings.api_key_file == Path("/etc/runpod/key")
    assert (settings.gpu_type, settings.gpu_count, settings.cloud) == (
        "NVIDIA A100 80GB PCIe",
        2,
        "COMMUNITY",
    )
    assert (settings.data_center_ids, settings.max_price_per_hour) == (("EU-RO-1",), 3.0)
    assert settings.capacity == {"nvidia.com/gpu": "16"}
    assert settings.calls.call_policy().timeout_seconds == 5.0


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"api_url": "api.runpod.io"}, "api_url must be an http"),
        ({"proxy_url_template": "https://{pod_id}.proxy"}, "exactly the fields {pod_id} and {port}"),
        ({"proxy_url_template": "https://{pod_id}-{port}-{zone}"}, "exactly the fields"),
        ({"cloud": "secure"}, "cloud must be one of SECURE, COMMUNITY"),
        ({"gpu_count": 0}, "gpu_count must be an integer >= 1"),
        ({"gpu_count": True}, "gpu_count must be an integer"),
        ({"max_price_per_hour": -1}, "max_price_per_hour must be a positive number"),
        ({"data_center_ids": "EU-RO-1"}, "data_center_ids must be a list"),
        ({"call_timeout_seconds": 0}, "call_timeout_seconds must be a number of seconds > 0"),
        ({"backoff_initial_seconds": 9, "backoff_max_seconds": 1}, "backoff must satisfy"),
        ({"capacity": ["nvidia.com/gpu"]}, "capacity must be a mapping"),
        ({"api_key_env": ""}, "api_key_env must be a non-empty string"),
    ],
)
def test_wrong_values_are_named(config: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match="runpod provider: ") as raised:
        parse_settings(config)
    assert words in str(raised.value)


def test_unknown_keys_are_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parse_settings({"api_key": "do-not-put-keys-here"})
    assert "ignoring unknown runpod provider settings ['api_key']" in caplog.text
    assert "do-not-put-keys-here" not in caplog.text


def test_the_entry_point_builds_the_provider(tmp_path: Path) -> None:
    assert "runpod" in plugins.available()
    context = ProviderContext("n", {"api_key_env": "VK_TEST_NO_SUCH_RUNPOD_KEY"}, "10.0.0.1", tmp_path)
    with pytest.raises(ValueError, match="VK_TEST_NO_SUCH_RUNPOD_KEY is unset"):
        plugins.build("runpod", context)
    key = tmp_path / "key"
    key.write_text("rp_x")
    provider = plugins.build("runpod", ProviderContext("n", {"api_key_file": str(key)}, "10.0.0.1", tmp_path))
    assert isinstance(provider, RunPodProvider)
