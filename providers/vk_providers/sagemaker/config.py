"""The sagemaker provider's settings, read once from its section of the node configuration.

A wrong value fails when the daemon starts, with a message naming the key. AWS credentials are not
settings: only where they come from is (`profile`, `credentials_file`, or else boto3's standard chain:
environment, web identity (IRSA), shared files, container or instance metadata).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vk_provider.kit.resilience.settings import CallSettings, ConfigValues, read_call_settings

NAME_PATTERN = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*")
"""What SageMaker accepts as a model, endpoint configuration or endpoint name (at most 63 characters)."""
MAX_NAME_PREFIX = 20
"""Leaves room for the 36 characters of a pod UID and a dash within SageMaker's 63."""
ROLE_ARN_PATTERN = re.compile(r"arn:aws[a-z\-]*:iam::\d{12}:role/\S+")
MIN_STARTUP_TIMEOUT_SECONDS = 60
MAX_STARTUP_TIMEOUT_SECONDS = 3600


@dataclasses.dataclass(frozen=True, slots=True)
class SageMakerSettings:
    role_arn: str = ""
    """The IAM role SageMaker assumes to run the model (ExecutionRoleArn; it pulls the image). Required."""
    region: str | None = None
    """None: the region of the boto3 chain (AWS_REGION, AWS_DEFAULT_REGION, the profile)."""
    endpoint_url: str | None = None
    """The SageMaker API's address; None for AWS's own. Set for moto or a VPC interface endpoint."""
    runtime_url: str | None = None
    """Where invocations go; None: https://runtime.sagemaker.<region>.amazonaws.com (.com.cn in China).
    The router signs requests for another host (a VPC endpoint's, a stand-in's) only when its
    `--sign-for-host` names it."""
    profile: str | None = None
    """A named profile of the shared AWS files (or of `credentials_file`)."""
    credentials_file: Path | None = None
    """A mounted AWS shared-credentials file (a Secret); re-read when it changes. Wins over the chain."""
    instance_type: str | None = None
    """The instance type (e.g. ml.g5.xlarge) for pods without the instance-type annotation."""
    instance_count: int = 1
    instance_prices: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """USD per instance-hour by instance type, e.g. {"ml.g5.xlarge": 1.408}: over the built-in us-east-1
    table (`prices`), and the only prices in any other region."""
    container_startup_timeout_seconds: int | None = None
    """ContainerStartupHealthCheckTimeoutInSeconds (60-3600): how long /ping may fail at start."""
    name_prefix: str = "vk"
    """SageMaker names are `<name_prefix>-<pod UID>` (an update's model and configuration add `-<digest>`)."""
    capacity: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Resources the node advertises, e.g. {"nvidia.com/gpu": "8"}."""
    connect_timeout_seconds: float = 10.0
    calls: CallSettings = dataclasses.field(default_factory=CallSettings)
    """Timeouts, retries, the circuit breaker and the health probe (flat keys: `call_timeout_seconds`...)."""
    max_concurrent_calls: int = 8
    """Threads (and HTTP connections) for boto3 calls, which block: the event loop never runs them."""
    capacity_retry_seconds: float = 120.0
    """The first wait before an instance type refused for quota (ResourceLimitExceeded) is asked again,
    and before a type whose endpoint failed for want of capacity is tried again for that pod."""
    deletion_poll_seconds: float = 30.0
    """How often a deletion SageMaker refused (the endpoint was Creating or Updating) is tried again, and
    an endpoint being updated is checked (to remove the versions it no longer uses)."""


def parse_settings(config: Mapping[str, Any]) -> SageMakerSettings:
    values = ConfigValues("sagemaker", config)
    values.warn_unknown(SageMakerSettings)
    defaults = SageMakerSettings()
    startup = config.get("container_startup_timeout_seconds")
    return SageMakerSettings(
        role_arn=_role_arn(config.get("role_arn")),
        region=_optional_text(config, "region"),
        endpoint_url=_optional_url(config, "endpoint_url"),
        runtime_url=_optional_url(config, "runtime_url"),
        profile=_optional_text(config, "profile"),
        credentials_file=values.optional_path("credentials_file"),
        instance_type=_optional_text(config, "instance_type"),
        instance_count=values.integer("instance_count", defaults.instance_count, minimum=1),
        instance_prices=values.prices_per_hour("instance_prices", "{'ml.g5.xlarge': 1.408}"),
        container_startup_timeout_seconds=None
        if startup is None
        else values.integer(
            "container_startup_timeout_seconds",
            0,
            minimum=MIN_STARTUP_TIMEOUT_SECONDS,
            maximum=MAX_STARTUP_TIMEOUT_SECONDS,
        ),
        name_prefix=_name_prefix(config.get("name_prefix", defaults.name_prefix)),
        capacity=values.capacity(),
        connect_timeout_seconds=values.seconds(
            "connect_timeout_seconds", defaults.connect_timeout_seconds, positive=True
        ),
        calls=read_call_settings(values),
        max_concurrent_calls=values.integer(
            "max_concurrent_calls", defaults.max_concurrent_calls, minimum=1, maximum=64
        ),
        capacity_retry_seconds=values.seconds(
            "capacity_retry_seconds", defaults.capacity_retry_seconds, positive=True
        ),
        deletion_poll_seconds=values.seconds(
            "deletion_poll_seconds", defaults.deletion_poll_seconds, positive=True
        ),
    )


def _role_arn(value: Any) -> str:
    if not isinstance(value, str) or not ROLE_ARN_PATTERN.fullmatch(value):
        raise ValueError(
            "sagemaker provider: role_arn must be the ARN of the IAM role SageMaker runs models with "
            f"(arn:aws:iam::<account>:role/<name>), not {value!r}"
        )
    return value


def _name_prefix(value: Any) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value) or len(value) > MAX_NAME_PREFIX:
        raise ValueError(
            f"sagemaker provider: name_prefix must be 1-{MAX_NAME_PREFIX} letters, digits and inner dashes, "
            f"not {value!r}"
        )
    return value


def _optional_url(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError(f"sagemaker provider: {key} must be an http(s) URL, not {value!r}")
    return value.rstrip("/")


def _optional_text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"sagemaker provider: {key} must be a non-empty string, not {value!r}")
    return value.strip()
