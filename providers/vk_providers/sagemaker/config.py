"""The sagemaker provider's settings, read once from its section of the node configuration.

A wrong value fails when the daemon starts, with a message naming the key. AWS credentials are not
settings: only where they come from is (`profile`, `credentials_file`, or else boto3's standard chain:
environment, web identity (IRSA), shared files, container or instance metadata).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vk_provider.resilience import CallPolicy

logger = logging.getLogger(__name__)

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
    """Where invocations go; None: https://runtime.sagemaker.<region>.amazonaws.com (.com.cn in China)."""
    profile: str | None = None
    """A named profile of the shared AWS files (or of `credentials_file`)."""
    credentials_file: Path | None = None
    """A mounted AWS shared-credentials file (a Secret); re-read when it changes. Wins over the chain."""
    instance_type: str | None = None
    """The instance type (e.g. ml.g5.xlarge) for pods without the instance-type annotation."""
    instance_count: int = 1
    container_startup_timeout_seconds: int | None = None
    """ContainerStartupHealthCheckTimeoutInSeconds (60-3600): how long /ping may fail at start."""
    name_prefix: str = "vk"
    """SageMaker names are `<name_prefix>-<pod UID>`."""
    capacity: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Resources the node advertises, e.g. {"nvidia.com/gpu": "8"}."""
    call_timeout_seconds: float = 30.0
    connect_timeout_seconds: float = 10.0
    max_attempts: int = 4
    backoff_initial_seconds: float = 0.5
    backoff_max_seconds: float = 8.0
    max_retry_after_seconds: float = 30.0
    breaker_failure_threshold: int = 5
    breaker_open_seconds: float = 30.0
    health_timeout_seconds: float = 5.0
    """The health probe's limit: under the node's own 10 s, so a hang counts as a failed probe."""
    max_concurrent_calls: int = 8
    """Threads (and HTTP connections) for boto3 calls, which block: the event loop never runs them."""
    capacity_retry_seconds: float = 120.0
    """The node's wait before trying again after a quota refusal (ResourceLimitExceeded)."""
    deletion_poll_seconds: float = 30.0
    """How often a deletion SageMaker refused (the endpoint was Creating or Updating) is tried again."""

    def call_policy(self) -> CallPolicy:
        return CallPolicy(
            timeout_seconds=self.call_timeout_seconds,
            max_attempts=self.max_attempts,
            initial_backoff_seconds=self.backoff_initial_seconds,
            max_backoff_seconds=self.backoff_max_seconds,
            max_retry_after_seconds=self.max_retry_after_seconds,
        )


def parse_settings(config: Mapping[str, Any]) -> SageMakerSettings:
    known = {field.name for field in dataclasses.fields(SageMakerSettings)}
    unknown = sorted(set(config) - known)
    if unknown:
        logger.warning("ignoring unknown sagemaker provider settings %s (known: %s)", unknown, sorted(known))
    defaults = SageMakerSettings()
    startup = config.get("container_startup_timeout_seconds")
    settings = SageMakerSettings(
        role_arn=_role_arn(config.get("role_arn")),
        region=_optional_text(config, "region"),
        endpoint_url=_optional_url(config, "endpoint_url"),
        runtime_url=_optional_url(config, "runtime_url"),
        profile=_optional_text(config, "profile"),
        credentials_file=_optional_path(config.get("credentials_file")),
        instance_type=_optional_text(config, "instance_type"),
        instance_count=_integer(config, "instance_count", defaults.instance_count, minimum=1),
        container_startup_timeout_seconds=None
        if startup is None
        else _integer(
            config,
            "container_startup_timeout_seconds",
            0,
            minimum=MIN_STARTUP_TIMEOUT_SECONDS,
            maximum=MAX_STARTUP_TIMEOUT_SECONDS,
        ),
        name_prefix=_name_prefix(config.get("name_prefix", defaults.name_prefix)),
        capacity=_capacity(config.get("capacity", {})),
        call_timeout_seconds=_seconds(
            config, "call_timeout_seconds", defaults.call_timeout_seconds, positive=True
        ),
        connect_timeout_seconds=_seconds(
            config, "connect_timeout_seconds", defaults.connect_timeout_seconds, positive=True
        ),
        max_attempts=_integer(config, "max_attempts", defaults.max_attempts, minimum=1),
        backoff_initial_seconds=_seconds(config, "backoff_initial_seconds", defaults.backoff_initial_seconds),
        backoff_max_seconds=_seconds(config, "backoff_max_seconds", defaults.backoff_max_seconds),
        max_retry_after_seconds=_seconds(config, "max_retry_after_seconds", defaults.max_retry_after_seconds),
        breaker_failure_threshold=_integer(
            config, "breaker_failure_threshold", defaults.breaker_failure_threshold, minimum=1
        ),
        breaker_open_seconds=_seconds(
            config, "breaker_open_seconds", defaults.breaker_open_seconds, positive=True
        ),
        health_timeout_seconds=_seconds(
            config, "health_timeout_seconds", defaults.health_timeout_seconds, positive=True
        ),
        max_concurrent_calls=_integer(
            config, "max_concurrent_calls", defaults.max_concurrent_calls, minimum=1, maximum=64
        ),
        capacity_retry_seconds=_seconds(
            config, "capacity_retry_seconds", defaults.capacity_retry_seconds, positive=True
        ),
        deletion_poll_seconds=_seconds(
            config, "deletion_poll_seconds", defaults.deletion_poll_seconds, positive=True
        ),
    )
    try:
        settings.call_policy()
    except ValueError as error:
        raise ValueError(f"sagemaker provider: {error}") from None
    return settings


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


def _optional_path(value: Any) -> Path | None:
    if value is None or value == "":
        return None
    return Path(str(value))


def _integer(
    config: Mapping[str, Any], key: str, default: int, *, minimum: int, maximum: int | None = None
) -> int:
    value = config.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bound = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
        raise ValueError(f"sagemaker provider: {key} must be an integer {bound}, not {value!r}")
    return value


def _seconds(config: Mapping[str, Any], key: str, default: float, *, positive: bool = False) -> float:
    value = config.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value < 0
        or (positive and value == 0)
    ):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"sagemaker provider: {key} must be a number of seconds {bound}, not {value!r}")
    return float(value)


def _capacity(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(
            f"sagemaker provider: capacity must be a mapping like {{'nvidia.com/gpu': '8'}}, not {value!r}"
        )
    return {str(name): str(quantity) for name, quantity in value.items()}
