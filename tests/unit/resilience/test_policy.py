"""ResilientCaller: which failures are retried, how long it waits, what it raises, what the breaker sees."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest

from vk_provider.errors import (
    InvalidPodError,
    NotFoundError,
    ProviderError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.kit.resilience import (
    AccountError,
    ApiStatusError,
    BreakerOpenError,
    BreakerState,
    CallPolicy,
    CircuitBreaker,
    ResilientCaller,
)

from .fakes import HANG, FakeTime, Script

POLICY = CallPolicy(
    timeout_seconds=0.05,
    max_attempts=4,
    initial_backoff_seconds=1.0,
    max_backoff_seconds=4.0,
    max_retry_after_seconds=30.0,
)


def caller(
    time: FakeTime, *, policy: CallPolicy = POLICY, threshold: int = 100, **options: object
) -> ResilientCaller:
    breaker = CircuitBreaker("Cloud", failure_threshold=threshold, open_seconds=60.0, clock=time.clock)
    return ResilientCaller("Cloud", policy=policy, breaker=breaker, sleep=time.sleep, **options)  # type: ignore[arg-type]


async def test_server_errors_are_retried_with_capped_jittered_exponential_backoff() -> None:
    time = FakeTime()
    script = Script(ApiStatusError(500), ApiStatusError(502), ApiStatusError(503), "done")
    assert await caller(time).call("list", script) == "done"
    assert script.calls == 4
    # Steps 1, 2, 4 seconds (capped at 4), each drawn from the upper half of its step.
    for delay, step in zip(time.sleeps, (1.0, 2.0, 4.0), strict=True):
        assert step / 2 <= delay <= step


async def test_backoff_never_exceeds_its_cap() -> None:
    time = FakeTime()
    policy = CallPolicy(timeout_seconds=1, max_attempts=8, initial_backoff_seconds=1, max_backoff_seconds=3)
    with pytest.raises(TemporaryProviderError):
        await caller(time, policy=policy).call("list", Script(ApiStatusError(503)))
    assert len(time.sleeps) == 7
    assert max(time.sleeps) <= 3.0
    assert all(delay >= 1.5 for delay in time.sleeps[2:])


async def test_attempts_are_bounded_and_the_outcome_is_temporary_with_the_providers_words() -> None:
    time = FakeTime()
    script = Script(ApiStatusError(503, "maintenance", retry_after_seconds=2.0))
    with pytest.raises(TemporaryProviderError) as raised:
        await caller(time).call("create_pod", script)
    assert script.calls == 4
    assert str(raised.value) == (
        "Cloud create_pod: HTTP 503 Service Unavailable: maintenance (gave up after 4 attempts)"
    )
    assert raised.value.retry_after_seconds == 2.0


async def test_retry_after_is_the_least_wait() -> None:
    time = FakeTime()
    script = Script(ApiStatusError(429, "slow down", retry_after_seconds=7.0), "ok")
    assert await caller(time).call("list", script) == "ok"
    assert time.sleeps == [7.0]  # above the 0.5..1 s the first backoff step would give


async def test_backoff_wins_over_a_shorter_retry_after() -> None:
    time = FakeTime()
    script = Script(
        ApiStatusError(503), ApiStatusError(503), ApiStatusError(429, retry_after_seconds=0.0), "ok"
    )
    assert await caller(time).call("list", script) == "ok"
    assert time.sleeps[2] >= 2.0  # third step is 4 s, jittered down to at least 2 s


async def test_a_retry_after_longer_than_one_call_may_wait_is_handed_back_at_once() -> None:
    time = FakeTime()
    script = Script(ApiStatusError(429, "daily quota", retry_after_seconds=3600.0), "never")
    with pytest.raises(TemporaryProviderError) as raised:
        await caller(time).call("create_pod", script)
    assert script.calls == 1
    assert time.sleeps == []
    assert raised.value.retry_after_seconds == 3600.0
    assert "daily quota" in str(raised.value)


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, InvalidPodError),
        (409, InvalidPodError),
        (422, InvalidPodError),
        (404, NotFoundError),
        (401, AccountError),
        (402, AccountError),
        (403, AccountError),
    ],
)
async def test_client_errors_are_never_retried(status: int, error_type: type[ProviderError]) -> None:
    time = FakeTime()
    script = Script(ApiStatusError(status, "the provider says no"), "never")
    with pytest.raises(error_type) as raised:
        await caller(time).call("create_pod", script)
    assert script.calls == 1
    assert time.sleeps == []
    assert type(raised.value) is error_type
    assert str(raised.value) == f"Cloud create_pod: {ApiStatusError(status, 'the provider says no')}"


def test_account_errors_mark_the_provider_unavailable_not_the_pod_invalid() -> None:
    assert issubclass(AccountError, ProviderUnavailableError)
    assert not issubclass(AccountError, InvalidPodError)


async def test_request_timeout_408_is_retried() -> None:
    time = FakeTime()
    script = Script(ApiStatusError(408), "ok")
    assert await caller(time).call("get", script) == "ok"
    assert script.calls == 2


async def test_every_attempt_has_a_timeout_and_timeouts_are_retried() -> None:
    time = FakeTime()
    script = Script(HANG, HANG, "ok")
    assert await caller(time).call("get", script) == "ok"
    assert script.calls == 3


async def test_timeouts_to_the_end_give_a_temporary_error() -> None:
    time = FakeTime()
    script = Script(HANG)
    policy = CallPolicy(
        timeout_seconds=0.02, max_attempts=2, initial_backoff_seconds=0.1, max_backoff_seconds=0.1
    )
    with pytest.raises(
        TemporaryProviderError, match=r"Cloud get: no answer within 0.02s \(gave up after 2 attempts\)"
    ):
        await caller(time, policy=policy).call("get", script)
    assert script.calls == 2


@pytest.mark.parametrize(
    "error",
    [
        aiohttp.ClientConnectionError("refused"),
        aiohttp.ServerDisconnectedError(),
        aiohttp.ClientPayloadError("cut short"),
        ConnectionResetError("reset"),
    ],
)
async def test_connection_failures_are_retried(error: Exception) -> None:
    time = FakeTime()
    script = Script(error, "ok")
    assert await caller(time).call("get", script) == "ok"
    assert script.calls == 2


async def test_single_attempt_when_asked() -> None:
    time = FakeTime()
    script = Script(ApiStatusError(503), "ok")
    with pytest.raises(TemporaryProviderError) as raised:
        await caller(time).call("probe", script, retry=False)
    assert script.calls == 1
    assert "gave up" not in str(raised.value)


async def test_status_mapping_can_be_changed_per_call() -> None:
    time = FakeTime()

    def capacity(error: ApiStatusError, context: str) -> ProviderError:
        return TemporaryProviderError(f"{context}: no capacity ({error.detail})", retry_after_seconds=30.0)

    with pytest.raises(TemporaryProviderError) as raised:
        await caller(time).call("create", Script(ApiStatusError(400, "no instances")), map_status=capacity)
    assert str(raised.value) == "Cloud create: no capacity (no instances)"
    assert raised.value.retry_after_seconds == 30.0


async def test_errors_the_attempt_raises_on_purpose_pass_through_unretried() -> None:
    time = FakeTime()
    script = Script(InvalidPodError("two containers"), "never")
    with pytest.raises(InvalidPodError, match=r"^two containers$"):
        await caller(time).call("create", script)
    assert script.calls == 1


async def test_unexpected_errors_are_not_retried_and_count_against_the_provider() -> None:
    time = FakeTime()
    subject = caller(time, threshold=1)
    with pytest.raises(ValueError, match="not JSON"):
        await subject.call("list", Script(ValueError("not JSON")))
    assert subject.breaker.status().state is BreakerState.OPEN


async def test_failures_open_the_breaker_and_then_calls_are_refused_without_trying() -> None:
    time = FakeTime()
    subject = caller(time, threshold=3)
    with pytest.raises(TemporaryProviderError):
        await subject.call("list", Script(ApiStatusError(503)))
    # The third failed attempt opened it; the fourth attempt was refused by the breaker, not made.
    assert subject.breaker.status().state is BreakerState.OPEN
    script = Script("ok")
    with pytest.raises(BreakerOpenError) as refused:
        await subject.call("list", script)
    assert script.calls == 0
    assert refused.value.retry_after_seconds == pytest.approx(60.0 - time.sleeps[-1])
    assert str(refused.value).startswith("Cloud list: Cloud calls suspended after 3 consecutive failures")


async def test_trial_after_the_open_period_closes_the_breaker() -> None:
    time = FakeTime()
    subject = caller(time, threshold=1)
    with pytest.raises(TemporaryProviderError):
        await subject.call("list", Script(ApiStatusError(500)))
    time.advance(60)
    assert await subject.call("list", Script("ok")) == "ok"
    assert subject.breaker.status().state is BreakerState.CLOSED


async def test_client_errors_and_rate_limits_do_not_open_the_breaker() -> None:
    time = FakeTime()
    subject = caller(time, threshold=2)
    for _ in range(3):
        with pytest.raises(InvalidPodError):
            await subject.call("create", Script(ApiStatusError(422)))
    rate_limited = Script(ApiStatusError(429, retry_after_seconds=1.0))
    with pytest.raises(TemporaryProviderError):
        await subject.call("list", rate_limited)
    assert rate_limited.calls == 4
    assert subject.breaker.status().state is BreakerState.CLOSED
    assert subject.breaker.status().consecutive_failures == 0


async def test_cancellation_propagates_and_frees_the_trial() -> None:
    time = FakeTime()
    subject = caller(time, threshold=1, policy=CallPolicy(timeout_seconds=30))
    with pytest.raises(TemporaryProviderError):
        await subject.call("list", Script(ApiStatusError(500)), retry=False)
    time.advance(60)
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(subject.call("list", hang))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert subject.breaker.acquire().trial  # the cancelled trial did not keep the slot


async def test_secrets_are_redacted_from_errors_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    time = FakeTime()
    secret = "rp_SECRET_KEY_123"
    subject = caller(time, redact=lambda text: text.replace(secret, "***"))
    echoing = ApiStatusError(503, f"bad key {secret}")
    with pytest.raises(TemporaryProviderError) as temporary:
        await subject.call("list", Script(echoing))
    with pytest.raises(AccountError) as account:
        await subject.call("list", Script(ApiStatusError(401, f"invalid key {secret}")))
    for error in (temporary.value, account.value):
        assert secret not in str(error)
        assert secret not in repr(error)
        assert "***" in str(error)
        assert error.__cause__ is None
        assert error.__context__ is None  # the original, key and all, is not kept
    assert "retrying" in caplog.text
    assert secret not in caplog.text


def test_policy_values_are_checked() -> None:
    with pytest.raises(ValueError, match="timeout_seconds"):
        CallPolicy(timeout_seconds=0)
    with pytest.raises(ValueError, match="max_attempts"):
        CallPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="backoff"):
        CallPolicy(initial_backoff_seconds=5, max_backoff_seconds=1)


async def test_one_call_may_have_its_own_timeout() -> None:
    time = FakeTime()
    policy = CallPolicy(timeout_seconds=30)
    with pytest.raises(TemporaryProviderError, match=r"^Cloud probe: no answer within 0.02s$"):
        await caller(time, policy=policy).call("probe", Script(HANG), retry=False, timeout_seconds=0.02)
