"""The circuit breaker: opens after consecutive failures, refuses while open, lets one trial through."""

from __future__ import annotations

import pytest

from vk_provider.errors import ProviderUnavailableError, TemporaryProviderError
from vk_provider.kit.resilience import BreakerOpenError, BreakerState, CircuitBreaker

from .fakes import FakeTime


def breaker(time: FakeTime, *, threshold: int = 3, open_seconds: float = 10.0) -> CircuitBreaker:
    return CircuitBreaker(
        "Provider", failure_threshold=threshold, open_seconds=open_seconds, clock=time.clock
    )


def fail(subject: CircuitBreaker, times: int = 1, message: str = "boom") -> None:
    for _ in range(times):
        subject.acquire().failed(message)


def test_opens_after_threshold_consecutive_failures_only() -> None:
    time = FakeTime()
    subject = breaker(time)
    fail(subject, 2)
    subject.acquire().succeeded()  # a success breaks the run
    fail(subject, 2)
    assert subject.status().state is BreakerState.CLOSED
    assert subject.status().consecutive_failures == 2
    fail(subject, 1, "HTTP 503")
    status = subject.status()
    assert status.state is BreakerState.OPEN
    assert not status.available
    assert status.retry_in_seconds == 10.0
    assert "3 consecutive failures" in status.describe()
    assert "HTTP 503" in status.describe()


def test_open_breaker_refuses_with_a_temporary_error_saying_when() -> None:
    time = FakeTime()
    subject = breaker(time)
    fail(subject, 3)
    time.advance(4)
    with pytest.raises(BreakerOpenError) as refused:
        subject.acquire()
    assert isinstance(refused.value, TemporaryProviderError)
    assert refused.value.retry_after_seconds == pytest.approx(6.0)
    with pytest.raises(ProviderUnavailableError, match="calls suspended"):
        subject.raise_if_open()


def test_half_open_lets_exactly_one_trial_through_and_its_success_closes() -> None:
    time = FakeTime()
    subject = breaker(time)
    fail(subject, 3)
    time.advance(10)
    assert subject.status().state is BreakerState.HALF_OPEN
    assert subject.status().available
    trial = subject.acquire()
    assert trial.trial
    with pytest.raises(BreakerOpenError):
        subject.acquire()  # only one trial at a time
    trial.succeeded()
    status = subject.status()
    assert status.state is BreakerState.CLOSED
    assert status.consecutive_failures == 0
    assert status.last_failure is None
    subject.acquire().succeeded()


def test_failed_trial_opens_for_the_full_duration_again() -> None:
    time = FakeTime()
    subject = breaker(time)
    fail(subject, 3)
    time.advance(12)
    subject.acquire().failed("still down")
    assert subject.status().state is BreakerState.OPEN
    assert subject.status().retry_in_seconds == 10.0
    time.advance(9.9)
    with pytest.raises(BreakerOpenError):
        subject.acquire()
    time.advance(0.1)
    assert subject.acquire().trial


def test_a_trial_that_proves_nothing_lets_the_next_caller_try() -> None:
    time = FakeTime()
    subject = breaker(time)
    fail(subject, 3)
    time.advance(10)
    subject.acquire().released()
    assert subject.status().state is BreakerState.HALF_OPEN
    assert subject.acquire().trial


def test_late_success_of_a_call_admitted_before_opening_does_not_close() -> None:
    time = FakeTime()
    subject = breaker(time)
    early = subject.acquire()
    fail(subject, 3)
    early.succeeded()
    assert subject.status().state is BreakerState.OPEN


def test_a_permit_settles_once() -> None:
    time = FakeTime()
    subject = breaker(time, threshold=2)
    permit = subject.acquire()
    permit.failed("one")
    permit.failed("two")
    permit.succeeded()
    assert subject.status().consecutive_failures == 1
    assert subject.status().last_failure == "one"


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="failure_threshold"):
        CircuitBreaker("x", failure_threshold=0)
    with pytest.raises(ValueError, match="open_seconds"):
        CircuitBreaker("x", open_seconds=0)
