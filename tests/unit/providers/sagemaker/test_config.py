"""Settings, names, and what the provider refuses before calling SageMaker."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from vk_devtools.standins.sagemaker import TEST_ROLE_ARN
from vk_provider.errors import InvalidPodError
from vk_provider.provider import ContainerSpec, PodRef, ProviderContext
from vk_providers.sagemaker import SageMakerProvider, create_provider, parse_settings
from vk_providers.sagemaker.config import SageMakerSettings
from vk_providers.sagemaker.translate import (
    INSTANCE_COUNT_ANNOTATION,
    INSTANCE_TYPE_ANNOTATION,
    deployment_for,
    resource_name,
    runtime_base_url,
)

from .support import pod_request, write_credentials

NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*")
SETTINGS = SageMakerSettings(role_arn=TEST_ROLE_ARN, instance_type="ml.g5.xlarge")


def test_defaults_and_values() -> None:
    settings = parse_settings(
        {
            "role_arn": "arn:aws-cn:iam::123456789012:role/service-role/SageMaker",
            "region": "cn-north-1",
            "instance_type": "ml.g5.2xlarge",
            "container_startup_timeout_seconds": 900,
            "capacity": {"nvidia.com/gpu": 4},
        }
    )
    assert settings.instance_count == 1
    assert settings.container_startup_timeout_seconds == 900
    assert settings.capacity == {"nvidia.com/gpu": "4"}
    assert settings.calls.call_policy().max_attempts == 4
    assert runtime_base_url(settings, "cn-north-1") == "https://runtime.sagemaker.cn-north-1.amazonaws.com.cn"
    assert runtime_base_url(SETTINGS, "eu-west-1") == "https://runtime.sagemaker.eu-west-1.amazonaws.com"


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"role_arn": None}, "role_arn must be the ARN"),
        ({"role_arn": "SageMakerRole"}, "role_arn must be the ARN"),
        ({"name_prefix": "-vk"}, "name_prefix must be"),
        ({"name_prefix": "a" * 21}, "name_prefix must be"),
        ({"endpoint_url": "localhost:5000"}, "endpoint_url must be an http(s) URL"),
        ({"instance_count": 0}, "instance_count must be an integer >= 1"),
        ({"container_startup_timeout_seconds": 30}, "from 60 to 3600"),
        ({"max_concurrent_calls": 0}, "max_concurrent_calls must be an integer from 1 to 64"),
        ({"call_timeout_seconds": 0}, "call_timeout_seconds must be a number of seconds > 0"),
        ({"backoff_initial_seconds": 2, "backoff_max_seconds": 1}, "backoff must satisfy"),
    ],
)
def test_wrong_settings_are_refused_with_the_key(config: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        parse_settings({"role_arn": TEST_ROLE_ARN, **config})


def test_unknown_settings_are_named(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parse_settings({"role_arn": TEST_ROLE_ARN, "instance_typ": "ml.g5.xlarge"})
    assert "ignoring unknown sagemaker provider settings ['instance_typ']" in caplog.text


def test_names_come_from_the_pod_uid_and_fit_sagemaker() -> None:
    uid = "0b6f2c8e-5d7a-4d0e-9c1b-6a2f1e3d4c5b"
    assert resource_name("vk", uid) == f"vk-{uid}"
    long_prefix = resource_name("a" * 20, uid)  # 57 characters: still the UID
    assert long_prefix.endswith(uid)
    for odd in ("uid_with_underscores", "x" * 80, "trailing-"):
        name = resource_name("vk", odd)
        assert len(name) <= 63
        assert NAME.fullmatch(name)
        assert name == resource_name("vk", odd)  # stable


def test_a_pod_becomes_a_deployment() -> None:
    request = pod_request("p", annotations={INSTANCE_COUNT_ANNOTATION: " 3 "})
    deployment = deployment_for(request, SETTINGS, "node-a")
    assert deployment.instance_type == "ml.g5.xlarge"
    assert deployment.instance_count == 3
    assert dict(deployment.tags)["vk-provider.dev/pod"] == "default/p"
    assert dict(deployment.tags)["vk-provider.dev/node"] == "node-a"
    # An image too long for a tag is simply not tagged.
    long_image = "registry.example/" + "x" * 250 + ":1"
    assert "vk-provider.dev/image" not in dict(
        deployment_for(pod_request("p", image=long_image), SETTINGS, "n").tags
    )


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"command": ("python",)}, "sets command"),
        ({"args": ("--port", "8080")}, "sets args"),
        ({"working_dir": "/srv"}, "sets workingDir"),
    ],
)
def test_what_sagemaker_cannot_run_is_refused(changes: dict[str, Any], words: str) -> None:
    container = ContainerSpec(name="server", image="i", **changes)
    with pytest.raises(InvalidPodError, match=words):
        deployment_for(pod_request("p", containers=(container,)), SETTINGS, "n")


def test_one_container_and_an_instance_type_are_required() -> None:
    two = (ContainerSpec(name="a", image="i"), ContainerSpec(name="b", image="i"))
    with pytest.raises(InvalidPodError, match="one container per endpoint, and this pod has 2"):
        deployment_for(pod_request("p", containers=two), SETTINGS, "n")
    without_default = SageMakerSettings(role_arn=TEST_ROLE_ARN)
    with pytest.raises(InvalidPodError, match=re.escape(INSTANCE_TYPE_ANNOTATION)):
        deployment_for(pod_request("p"), without_default, "n")
    with pytest.raises(InvalidPodError, match="must be a whole number >= 1"):
        deployment_for(pod_request("p", annotations={INSTANCE_COUNT_ANNOTATION: "two"}), SETTINGS, "n")
    too_long = pod_request("p" * 253, namespace="n" * 10)
    with pytest.raises(InvalidPodError, match="tag values hold at most 256 characters"):
        deployment_for(too_long, SETTINGS, "n")


async def test_invalid_pods_are_refused_before_any_call(tmp_path: Path) -> None:
    # No endpoint_url to a server: a call would fail differently.
    config = {
        "role_arn": TEST_ROLE_ARN,
        "region": "us-east-1",
        "endpoint_url": "http://127.0.0.1:9",
        "credentials_file": str(write_credentials(tmp_path / "c")),
    }
    provider = create_provider(ProviderContext("n", config, "10.0.0.1", tmp_path))
    assert isinstance(provider, SageMakerProvider)
    try:
        with pytest.raises(InvalidPodError, match="no SageMaker instance type"):
            await provider.create_pod(pod_request("p"))
    finally:
        await provider.aclose()


def test_a_region_is_required(tmp_path: Path) -> None:
    config = {"role_arn": TEST_ROLE_ARN, "credentials_file": str(write_credentials(tmp_path / "c"))}
    with pytest.raises(ValueError, match="no region"):
        SageMakerProvider(ProviderContext("n", config, "10.0.0.1", tmp_path))


def test_the_provider_says_where_a_pods_traffic_goes(tmp_path: Path) -> None:
    config = {
        "role_arn": TEST_ROLE_ARN,
        "region": "ap-southeast-2",
        "credentials_file": str(write_credentials(tmp_path / "c")),
    }
    provider = SageMakerProvider(ProviderContext("n", config, "10.0.0.1", tmp_path))
    ref = PodRef("default", "p", "0b6f2c8e-5d7a-4d0e-9c1b-6a2f1e3d4c5b")
    assert provider.traffic_address(ref) == (
        f"https://runtime.sagemaker.ap-southeast-2.amazonaws.com/endpoints/vk-{ref.uid}/invocations"
    )
    assert repr(provider) == "SageMakerProvider(node='n', region='ap-southeast-2')"
