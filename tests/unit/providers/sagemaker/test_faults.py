"""Faults of SageMaker and how the provider meets them: retries, refusals, timeouts, the breaker, auth."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from vk_devtools.standins.sagemaker import MotoSageMaker, SageMakerLayer
from vk_provider.errors import InvalidPodError, ProviderUnavailableError, TemporaryProviderError
from vk_provider.kit.resilience import AccountError, BreakerOpenError, BreakerState
from vk_provider.provider import PodRef, ProviderContext
from vk_providers.sagemaker import SageMakerProvider

from .support import ManualClock, RecordedSleep, make_provider, pod_request, provider_config

UNKNOWN = PodRef("default", "unknown", "9a1b2c3d-0000-4000-8000-000000000000")


async def test_throttling_is_retried_with_backoff(
    provider: SageMakerProvider, layer: SageMakerLayer, sleep: RecordedSleep
) -> None:
    layer.fail("DescribeEndpoint", code="ThrottlingException", message="Rate exceeded", times=2)
    assert await provider.get_pod_state(UNKNOWN) is None
    assert layer.calls["DescribeEndpoint"] == 3
    assert len(sleep.waits) == 2
    assert all(0 <= wait <= 0.05 for wait in sleep.waits)  # backoff_max_seconds
    # Throttling says nothing about SageMaker being down.
    assert provider.breaker_status().consecutive_failures == 0


async def test_throttling_beyond_the_attempts_is_temporary(
    provider: SageMakerProvider, layer: SageMakerLayer
) -> None:
    layer.fail("ListEndpoints", code="ThrottlingException", message="Rate exceeded", times=None)
    with pytest.raises(TemporaryProviderError) as raised:
        await provider.list_pods()
    assert "ThrottlingException: Rate exceeded (gave up after 4 attempts)" in str(raised.value)
    assert layer.calls["ListEndpoints"] == 4


async def test_server_errors_are_retried(provider: SageMakerProvider, layer: SageMakerLayer) -> None:
    layer.fail(
        "CreateModel", code="InternalFailure", message="An internal error occurred", status=500, times=2
    )
    request = pod_request("after-500s")
    await provider.create_pod(request)
    assert layer.calls["CreateModel"] == 3
    assert await provider.get_pod_state(request.ref) is not None


async def test_a_validation_error_is_not_retried_and_fails_the_pod_with_its_message(
    provider: SageMakerProvider, moto: MotoSageMaker, layer: SageMakerLayer, sleep: RecordedSleep
) -> None:
    message = (
        "Requested image 123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-server:1 not found, or the role "
        "lacks ecr:BatchGetImage."
    )
    layer.fail("CreateEndpoint", code="ValidationException", message=message, times=None)
    request = pod_request("refused")
    with pytest.raises(InvalidPodError) as raised:
        await provider.create_pod(request)
    assert str(raised.value) == f"SageMaker create_endpoint: ValidationException: {message}"
    assert layer.calls["CreateEndpoint"] == 1
    assert sleep.waits == []
    # Nothing is left behind for a pod refused for good.
    name = provider.resource_name(request.ref)
    client = moto.client()
    with pytest.raises(ClientError, match="Could not find"):
        client.describe_model(ModelName=name)
    with pytest.raises(ClientError, match="Could not find"):
        client.describe_endpoint_config(EndpointConfigName=name)
    # A refusal is an answer: SageMaker is up.
    assert provider.breaker_status().consecutive_failures == 0


async def test_a_quota_refusal_is_a_temporary_capacity_error(
    provider: SageMakerProvider, layer: SageMakerLayer, sleep: RecordedSleep
) -> None:
    message = (
        "The account-level service limit 'ml.g4dn.xlarge for endpoint usage' is 1 Instances, with current "
        "utilization of 1 Instances and a request delta of 1 Instances."
    )
    layer.fail("CreateEndpoint", code="ResourceLimitExceeded", message=message)
    request = pod_request("over-quota")
    with pytest.raises(TemporaryProviderError) as raised:
        await provider.create_pod(request)
    assert not isinstance(raised.value, InvalidPodError)
    assert raised.value.retry_after_seconds == provider.settings.capacity_retry_seconds
    assert f"ResourceLimitExceeded: {message}" in str(raised.value)
    assert "quota or capacity" in str(raised.value)
    assert layer.calls["CreateEndpoint"] == 1  # not retried within the call: the node waits
    assert sleep.waits == []
    await provider.create_pod(request)  # the quota freed up: resumes at the endpoint
    assert (layer.calls["CreateModel"], layer.calls["CreateEndpoint"]) == (1, 2)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (
            "AccessDeniedException",
            "User: arn:aws:iam::123456789012:user/vk is not authorized to perform: sagemaker:CreateModel",
        ),
        ("UnrecognizedClientException", "The security token included in the request is invalid."),
        ("ExpiredTokenException", "The security token included in the request is expired"),
    ],
)
async def test_refused_credentials_make_the_provider_unavailable(
    provider: SageMakerProvider, layer: SageMakerLayer, code: str, message: str
) -> None:
    layer.fail(None, code=code, message=message, times=None)
    with pytest.raises(AccountError, match=message):
        await provider.create_pod(pod_request("no-access"))
    with pytest.raises(ProviderUnavailableError, match=code):
        await provider.check_health()
    layer.clear_faults()
    await provider.check_health()


async def test_a_hanging_call_times_out_and_is_retried(
    moto: MotoSageMaker, layer: SageMakerLayer, tmp_path: Path, clock: ManualClock
) -> None:
    provider = make_provider(
        moto, tmp_path, layer=layer, clock=clock, call_timeout_seconds=1.0, max_attempts=2
    )
    try:
        # One answered call first, so the timed attempts below do not include making the client;
        # a second each keeps a loaded machine's slow answer from passing for a hang.
        assert await provider.get_pod_state(UNKNOWN) is None
        answered = layer.calls["DescribeEndpoint"]
        layer.hang("DescribeEndpoint")
        assert await provider.get_pod_state(UNKNOWN) is None  # the retry is answered
        assert layer.calls["DescribeEndpoint"] == answered + 2
        layer.hang("DescribeEndpoint", times=None)
        with pytest.raises(TemporaryProviderError, match=r"no answer within 1s \(gave up after 2 attempts\)"):
            await provider.get_pod_state(UNKNOWN)
    finally:
        layer.clear_faults()
        await provider.aclose()


async def test_an_unreachable_sagemaker_is_a_temporary_error(moto: MotoSageMaker, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleep = RecordedSleep()
    provider = make_provider(
        moto, tmp_path, sleep=sleep, max_attempts=3, endpoint_url=f"http://127.0.0.1:{port}"
    )
    try:
        with pytest.raises(TemporaryProviderError) as raised:
            await provider.list_pods()
        assert "EndpointConnectionError" in str(raised.value)
        assert "gave up after 3 attempts" in str(raised.value)
        assert len(sleep.waits) == 2
        assert provider.breaker_status().consecutive_failures == 3
    finally:
        await provider.aclose()


async def test_the_breaker_opens_after_repeated_failures_and_closes_after_a_trial(
    provider: SageMakerProvider, layer: SageMakerLayer, clock: ManualClock
) -> None:
    layer.start_outage()
    with pytest.raises(TemporaryProviderError):
        await provider.list_pods()  # 4 failed attempts
    suspended = "SageMaker calls suspended after 5 consecutive failures"
    with pytest.raises(ProviderUnavailableError, match=suspended):
        await provider.check_health()  # the fifth failure opens the breaker
    assert provider.breaker_status().state is BreakerState.OPEN
    with pytest.raises(ProviderUnavailableError, match=suspended):
        await provider.check_health()  # and it stays open, without a call
    calls = sum(layer.calls.values())
    with pytest.raises(BreakerOpenError):
        await provider.create_pod(pod_request("refused-by-the-breaker"))
    assert sum(layer.calls.values()) == calls  # refused without calling
    layer.clear_faults()
    clock.advance(31)
    await provider.check_health()  # the trial call
    assert provider.breaker_status().state is BreakerState.CLOSED


async def test_no_credentials_at_all_makes_the_provider_unavailable(
    moto: MotoSageMaker, tmp_path: Path
) -> None:
    # The standard chain finds nothing: no variables, no files, no metadata service (see conftest).
    config = provider_config(moto, tmp_path / "unused")
    del config["credentials_file"]
    provider = SageMakerProvider(ProviderContext("n", config, "10.0.0.1", tmp_path))
    try:
        with pytest.raises(ProviderUnavailableError, match="no usable AWS credentials"):
            await provider.check_health()
        with pytest.raises(AccountError, match="no usable AWS credentials"):
            await provider.create_pod(pod_request("no-credentials"))
        with pytest.raises(ProviderUnavailableError, match="no AWS credentials to sign"):
            await provider.request_signer()
    finally:
        await provider.aclose()
