"""Helpers for the sagemaker provider's tests: settings for moto, pods, credentials, a manual clock."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from vk_devtools.standins.sagemaker import GPU_INSTANCE_TYPE, TEST_ROLE_ARN, MotoSageMaker, SageMakerLayer
from vk_provider.provider import ContainerPort, ContainerSpec, PodRef, PodRequest, ProviderContext
from vk_providers.sagemaker import SageMakerProvider

NODE = "sagemaker-test"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-server:1"
REGION = "us-east-1"

# Distinctive values, so a test can tell they leaked anywhere.
ACCESS_KEY = "AKIAVKPROVIDERTEST01"
SECRET_KEY = "vk-provider-secret-key/never+logged0000000"
SESSION_TOKEN = "vk-provider-session-token-FwoGZXIvYXdzEJr//////////wEaDNeverLogged"


class ManualClock:
    """A clock that moves only when told (the breaker's, the layer's)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordedSleep:
    """The provider's wait between retries: returns at once, and remembers how long it was asked to wait."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def write_credentials(
    path: Path,
    *,
    access_key: str = ACCESS_KEY,
    secret_key: str = SECRET_KEY,
    token: str | None = SESSION_TOKEN,
    profile: str = "default",
) -> Path:
    lines = [f"[{profile}]", f"aws_access_key_id = {access_key}", f"aws_secret_access_key = {secret_key}"]
    if token is not None:
        lines.append(f"aws_session_token = {token}")
    path.write_text("\n".join(lines) + "\n")
    return path


def provider_config(moto: MotoSageMaker, credentials_file: Path, **overrides: Any) -> dict[str, Any]:
    return {
        "role_arn": TEST_ROLE_ARN,
        "region": REGION,
        "endpoint_url": moto.endpoint_url,
        "credentials_file": str(credentials_file),
        "instance_type": GPU_INSTANCE_TYPE,
        "call_timeout_seconds": 15.0,  # moto answers slowly on a busy machine; the breaker's clock is manual
        "max_attempts": 4,
        "backoff_initial_seconds": 0.01,
        "backoff_max_seconds": 0.05,
        "breaker_failure_threshold": 5,
        "breaker_open_seconds": 30.0,
        "deletion_poll_seconds": 0.02,
        **overrides,
    }


def make_provider(
    moto: MotoSageMaker,
    state_dir: Path,
    *,
    layer: SageMakerLayer | None = None,
    clock: ManualClock | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    node_name: str = NODE,
    credentials_file: Path | None = None,
    client_hook: Callable[[Any], None] | None = None,
    **overrides: Any,
) -> SageMakerProvider:
    """A provider on moto; its client goes through `layer` (if any), or through `client_hook` if given."""
    credentials_file = credentials_file or state_dir / "aws-credentials"
    if not credentials_file.exists():
        write_credentials(credentials_file)
    context = ProviderContext(
        node_name, provider_config(moto, credentials_file, **overrides), "10.0.0.1", state_dir
    )
    extra: dict[str, Any] = {} if sleep is None else {"sleep": sleep}
    return SageMakerProvider(
        context,
        clock=clock or ManualClock(),
        client_hook=client_hook or (None if layer is None else layer.install),
        **extra,
    )


def pod_request(
    name: str,
    *,
    uid: str | None = None,
    node_name: str = NODE,
    namespace: str = "default",
    image: str = IMAGE,
    env: tuple[tuple[str, str], ...] = (("MODEL", "llama"),),
    annotations: Mapping[str, str] | None = None,
    containers: tuple[ContainerSpec, ...] | None = None,
) -> PodRequest:
    container = ContainerSpec(name="server", image=image, env=env, ports=(ContainerPort(8080, name="http"),))
    return PodRequest(
        ref=PodRef(namespace, name, uid or str(uuid.uuid4())),
        node_name=node_name,
        containers=containers if containers is not None else (container,),
        annotations=dict(annotations or {}),
    )


def instance_type_served(moto: MotoSageMaker, name: str) -> str:
    """The instance type of the endpoint's (first) variant, as SageMaker says."""
    client = moto.client()
    config = client.describe_endpoint(EndpointName=name)["EndpointConfigName"]
    variant = client.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"][0]
    return str(variant["InstanceType"])
