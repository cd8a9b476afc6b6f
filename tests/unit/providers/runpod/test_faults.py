"""Faults of RunPod and how the provider meets them: retries, Retry-After, timeouts, the breaker, auth."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.errors import InvalidPodError, ProviderUnavailableError, TemporaryProviderError
from vk_provider.kit.resilience import AccountError, BreakerOpenError, BreakerState
from vk_provider.provider import ProviderContext
from vk_providers.runpod import RunPodProvider

from .support import ManualClock, make_provider, pod_request, provider_config, requests_to, write_key

LIST = "^/v2/pods$"


async def test_server_errors_are_retried(fake: FakeRunPod, provider: RunPodProvider) -> None:
    await fake.control.fail(status=502, method="GET", path=LIST, times=2)
    assert await provider.list_pods() == []
    assert [request["status"] for request in await requests_to(fake, "GET")] == [502, 502, 200]


async def test_server_errors_beyond_the_attempts_are_temporary(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    await fake.control.fail(status=500, method="GET", path=LIST, times=None, detail="database unavailable")
    with pytest.raises(TemporaryProviderError) as raised:
        await provider.list_pods()
    assert str(raised.value) == (
        "RunPod list_pods: HTTP 500 Internal Server Error: database unavailable (gave up after 3 attempts)"
    )
    assert len(await requests_to(fake, "GET")) == 3


async def test_rate_limit_waits_as_long_as_retry_after_says(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    await fake.control.fail(status=429, method="GET", path=LIST, retry_after=1, detail="rate limit exceeded")
    assert await provider.list_pods() == []
    limited, answered = await requests_to(fake, "GET")
    assert (limited["status"], answered["status"]) == (429, 200)
    assert answered["at"] - limited["at"] >= 1.0  # the backoff alone would be 0.05 s at most


async def test_rate_limit_with_an_http_date_is_honoured_too(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    await fake.control.fail(status=429, method="GET", path=LIST, retry_after="Thu, 01 Jan 1970 00:00:00 GMT")
    assert await provider.list_pods() == []  # a date in the past: no extra wait, but still a retry
    assert [request["status"] for request in await requests_to(fake, "GET")] == [429, 200]


async def test_a_long_retry_after_is_handed_to_the_node(fake: FakeRunPod, provider: RunPodProvider) -> None:
    await fake.control.fail(status=429, method="POST", path=LIST, retry_after=120, detail="hourly window")
    with pytest.raises(TemporaryProviderError) as raised:
        await provider.create_pod(pod_request("throttled"))
    assert raised.value.retry_after_seconds == 120.0
    assert "hourly window" in str(raised.value)
    assert len(await requests_to(fake, "POST")) == 1


async def test_a_hanging_call_times_out_and_is_retried(fake: FakeRunPod, tmp_path: Path) -> None:
    provider = make_provider(fake, tmp_path, call_timeout_seconds=0.2)
    try:
        await fake.control.hang(method="GET", path=LIST)
        assert await provider.list_pods() == []
        statuses = [request["status"] for request in await requests_to(fake, "GET")]
        assert statuses == [None, 200]  # the first is still hanging when the retry is answered
        await fake.control.hang(method="GET", path=LIST, times=None)
        with pytest.raises(
            TemporaryProviderError, match=r"no answer within 0.2s \(gave up after 3 attempts\)"
        ):
            await provider.list_pods()
    finally:
        await fake.control.clear_faults()
        await provider.aclose()


async def test_a_dropped_connection_is_retried(fake: FakeRunPod, provider: RunPodProvider) -> None:
    await fake.control.disconnect(method="GET", path=LIST)
    assert await provider.list_pods() == []


async def test_a_request_runpod_refuses_fails_the_pod_with_its_words(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    await fake.control.fail(status=422, method="POST", path=LIST, detail="$.gpu.id: unknown GPU type")
    with pytest.raises(
        InvalidPodError, match=r"HTTP 422 Unprocessable Entity: \$\.gpu\.id: unknown GPU type"
    ):
        await provider.create_pod(pod_request("refused"))
    assert len(await requests_to(fake, "POST")) == 1


async def test_an_outage_opens_the_breaker_and_the_node_sees_it(
    fake: FakeRunPod, provider: RunPodProvider, clock: ManualClock
) -> None:
    await fake.control.fail(status=503, times=None, detail="upstream connect error")
    with pytest.raises(TemporaryProviderError):
        await provider.list_pods()  # 3 failures
    await provider.check_health()  # the 4th: one failed probe does not make RunPod unavailable
    with pytest.raises(ProviderUnavailableError, match="RunPod calls suspended after 5 consecutive failures"):
        await provider.check_health()  # the 5th opens the breaker
    assert provider.breaker_status().state is BreakerState.OPEN
    calls = len(await fake.control.requests())
    with pytest.raises(BreakerOpenError) as refused:
        await provider.create_pod(pod_request("refused-by-breaker"))
    assert isinstance(refused.value, TemporaryProviderError)
    assert refused.value.retry_after_seconds == 30.0
    with pytest.raises(ProviderUnavailableError):
        await provider.check_health()
    assert len(await fake.control.requests()) == calls  # nothing sent while open

    clock.advance(30)  # half-open: the health probe is the trial, and it fails
    with pytest.raises(ProviderUnavailableError):
        await provider.check_health()
    await fake.control.clear_faults()
    clock.advance(30)
    await provider.check_health()
    assert provider.breaker_status().state is BreakerState.CLOSED
    await provider.create_pod(pod_request("after-the-outage"))


async def test_a_wrong_key_is_an_account_error_not_retried_and_not_the_pods_fault(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    key_file = write_key(tmp_path / "key", "rp_wrong_key")
    provider = make_provider(fake, tmp_path, key_file=key_file)
    try:
        with pytest.raises(AccountError) as raised:
            await provider.create_pod(pod_request("unauthorised"))
        assert isinstance(raised.value, ProviderUnavailableError)
        assert not isinstance(raised.value, InvalidPodError)
        assert str(raised.value) == "RunPod find_pod: HTTP 401 Unauthorized: invalid api key"
        assert [request["authorization"] for request in await fake.control.requests()] == ["invalid"]
        with pytest.raises(ProviderUnavailableError, match="401 Unauthorized"):
            await provider.check_health()
        assert provider.breaker_status().state is BreakerState.CLOSED  # RunPod is up; our key is not
        # The Secret is fixed: the mounted file changes, and the next call uses the new key.
        write_key(key_file, fake.api_key)
        stat = key_file.stat()
        os.utime(key_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        await provider.check_health()
        await provider.create_pod(pod_request("authorised"))
    finally:
        await provider.aclose()


async def test_a_missing_key_file_stops_the_provider_at_start(fake: FakeRunPod, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no RunPod API key: cannot read .*absent"):
        make_provider(fake, tmp_path, key_file=tmp_path / "absent")


async def test_a_key_file_removed_later_makes_the_provider_unavailable(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    key_file = write_key(tmp_path / "key", fake.api_key)
    provider = make_provider(fake, tmp_path, key_file=key_file)
    try:
        key_file.unlink()
        with pytest.raises(ProviderUnavailableError, match="no RunPod API key"):
            await provider.check_health()
        assert await fake.control.requests() == []
    finally:
        await provider.aclose()


async def test_a_pod_that_vanished_is_reported_gone(fake: FakeRunPod, provider: RunPodProvider) -> None:
    request = pod_request("vanishing")
    await provider.create_pod(request)
    [pod] = await fake.control.pods()
    await fake.control.vanish(pod["id"])
    assert await provider.get_pod_state(request.ref) is None
    assert await provider.list_pods() == []


async def test_api_key_from_the_environment(fake: FakeRunPod, tmp_path: Path) -> None:
    config = provider_config(fake, tmp_path / "unused")
    del config["api_key_file"]
    context = ProviderContext("env-node", {**config, "api_key_env": "MY_RUNPOD_KEY"}, "10.0.0.1", tmp_path)
    provider = RunPodProvider(context, environ={"MY_RUNPOD_KEY": fake.api_key}, clock=ManualClock())
    try:
        await provider.check_health()
    finally:
        await provider.aclose()
    with pytest.raises(ValueError, match="MY_RUNPOD_KEY is unset or empty"):
        RunPodProvider(context, environ={})


async def test_a_hanging_health_probe_fails_within_the_nodes_patience(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake, tmp_path, call_timeout_seconds=20, health_timeout_seconds=0.2)
    try:
        await fake.control.hang(path="^/v2/catalog/gpus$")
        await asyncio.wait_for(provider.check_health(), 5)  # counted as a failed probe, not yet unavailable
        assert provider.breaker_status().consecutive_failures == 1
        assert provider.breaker_status().last_failure == "no answer within 0.2s"
    finally:
        await fake.control.clear_faults()
        await provider.aclose()
