"""One way to call a provider's API: timeouts, retries with backoff, the breaker, typed outcomes.

`ResilientCaller.call(operation, attempt)` runs `attempt` (an async function making one try of the
whole operation) under these rules:

- every attempt has `timeout_seconds`; running out counts as a transient failure;
- transient failures (timeouts, connection failures, HTTP 408, 429 and 5xx) are retried, at most
  `max_attempts` tries in all, waiting a capped, jittered exponential backoff
  (`vk_provider.kit.backoff.jittered_backoff_seconds`) between them, and never less than the answer's
  `Retry-After`. A `Retry-After` longer than `max_retry_after_seconds` ends the call at once: the node
  then waits that long itself (the error carries it), instead of a worker blocking on it;
- other client errors are never retried: the request is wrong and sending it again will not help;
- every attempt first asks the circuit breaker, and tells it how it went;
- what comes out is one of the contract's errors: `TemporaryProviderError` (with `retry_after_seconds`)
  when the provider may recover; `InvalidPodError` for a request the provider refuses (the pod fails
  with the provider's message); `NotFoundError` for 404; `AccountError`, a `ProviderUnavailableError`,
  when the provider refuses our credentials or account (401, 402, 403). Which status means what can be
  changed per call (`map_status`), because providers overload some codes.

Every message passes through `redact` before it is logged or raised, so a key echoed back by a provider
never leaks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base

from vk_provider.errors import (
    InvalidPodError,
    NotFoundError,
    ProviderError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.resilience.breaker import BreakerOpenError, BreakerPermit, CircuitBreaker
from vk_provider.kit.resilience.http import ApiStatusError

logger = logging.getLogger(__name__)

T = TypeVar("T")

StatusMapper = Callable[[ApiStatusError, str], ProviderError]
"""(the error, "<provider> <operation>") -> the contract error to raise for a status that is final."""

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    TimeoutError,
    aiohttp.ClientConnectionError,  # refused, reset, DNS, server disconnected, socket timeouts
    aiohttp.ClientPayloadError,  # the answer broke off half-way
    ConnectionError,
)


_TRANSLATED: tuple[type[BaseException], ...] = (ProviderError, ApiStatusError, *TRANSPORT_ERRORS)
"""What `call` turns into contract errors; anything else (a bug, cancellation) passes through as is."""


class AccountError(ProviderUnavailableError):
    """The provider refuses our key or account (401, 402, 403): no retry helps until someone fixes it."""


@dataclasses.dataclass(frozen=True, slots=True)
class CallPolicy:
    timeout_seconds: float = 30.0
    """Each attempt's limit, from sending the request to having the answer (headers, for a stream)."""
    max_attempts: int = 4
    initial_backoff_seconds: float = 0.5
    max_backoff_seconds: float = 8.0
    max_retry_after_seconds: float = 30.0
    """The longest Retry-After waited out within one call; longer ones are handed back to the node."""

    def __post_init__(self) -> None:
        if self.timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be > 0, not {self.timeout_seconds}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, not {self.max_attempts}")
        if self.initial_backoff_seconds < 0 or self.max_backoff_seconds < self.initial_backoff_seconds:
            raise ValueError("backoff must satisfy 0 <= initial_backoff_seconds <= max_backoff_seconds")
        if self.max_retry_after_seconds < 0:
            raise ValueError(f"max_retry_after_seconds must be >= 0, not {self.max_retry_after_seconds}")


def is_transient(error: BaseException) -> bool:
    """Worth another try: a timeout, a connection failure, or a retryable HTTP status."""
    if isinstance(error, ApiStatusError):
        return error.retryable
    return isinstance(error, TRANSPORT_ERRORS)


def default_status_error(error: ApiStatusError, context: str) -> ProviderError:
    """The contract error for a final HTTP status: a refused request, a missing object, a bad key."""
    message = f"{context}: {error}"
    if error.status in (401, 402, 403):
        return AccountError(message)
    if error.status == 404:
        return NotFoundError(message)
    if error.retryable:
        return TemporaryProviderError(message, retry_after_seconds=error.retry_after_seconds)
    return InvalidPodError(message)


def _describe(error: BaseException, timeout_seconds: float) -> str:
    if isinstance(error, TimeoutError):
        return f"no answer within {timeout_seconds:g}s"
    if isinstance(error, ApiStatusError):
        return str(error)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class _StopOnLongRetryAfter(stop_base):
    """Stop when the provider asks for a longer pause than one call may take."""

    def __init__(self, limit_seconds: float) -> None:
        self._limit = limit_seconds

    def __call__(self, retry_state: RetryCallState) -> bool:
        error = retry_state.outcome.exception() if retry_state.outcome is not None else None
        wait = getattr(error, "retry_after_seconds", None)
        return wait is not None and wait > self._limit


class _Wait:
    """Jittered exponential backoff, but never shorter than the provider's Retry-After."""

    def __init__(self, policy: CallPolicy) -> None:
        self._policy = policy

    def __call__(self, retry_state: RetryCallState) -> float:
        delay = jittered_backoff_seconds(
            retry_state.attempt_number,
            initial_seconds=self._policy.initial_backoff_seconds,
            max_seconds=self._policy.max_backoff_seconds,
        )
        error = retry_state.outcome.exception() if retry_state.outcome is not None else None
        retry_after = getattr(error, "retry_after_seconds", None)
        if isinstance(retry_after, int | float):
            delay = max(delay, float(retry_after))
        return delay


def _settle(permit: BreakerPermit, error: BaseException, message: str) -> None:
    """Tell the breaker what an attempt's failure says about the provider."""
    if isinstance(error, ApiStatusError):
        if error.status >= 500:
            permit.failed(message)
        elif error.status in (408, 429):
            permit.released()  # busy or throttling us, but answering
        else:
            permit.succeeded()  # it answered; the request was the problem
    elif isinstance(error, ProviderError | asyncio.CancelledError):
        permit.released()  # the attempt's own verdict, or nobody waited for the answer
    else:
        permit.failed(message)


class ResilientCaller:
    """Calls to one provider: a shared policy and breaker, a name for messages, redaction of secrets."""

    def __init__(
        self,
        name: str,
        *,
        policy: CallPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        redact: Callable[[str], str] = str,
        map_status: StatusMapper = default_status_error,
    ) -> None:
        """`sleep` waits between attempts (tests pass a fake); `redact` scrubs secrets from messages."""
        self.name = name
        self.policy = policy or CallPolicy()
        self.breaker = breaker or CircuitBreaker(name)
        self._sleep = sleep
        self._redact = redact
        self._map_status = map_status

    def __repr__(self) -> str:
        return f"ResilientCaller({self.name!r}, {self.policy}, {self.breaker!r})"

    async def call(
        self,
        operation: str,
        attempt: Callable[[], Awaitable[T]],
        *,
        retry: bool = True,
        map_status: StatusMapper | None = None,
        timeout_seconds: float | None = None,
    ) -> T:
        """Run `attempt` under the policy; raise only the contract's errors (or cancellation).

        `retry=False` makes a single attempt (health probes, calls that must not be repeated);
        `timeout_seconds` replaces the policy's limit per attempt for this call.
        """
        context = f"{self.name} {operation}"
        attempts = 0
        timeout = self.policy.timeout_seconds if timeout_seconds is None else timeout_seconds

        async def one_attempt() -> T:
            nonlocal attempts
            attempts += 1
            permit = self.breaker.acquire()
            try:
                async with asyncio.timeout(timeout):
                    result = await attempt()
            except BaseException as error:
                _settle(permit, error, self._redact(_describe(error, timeout)))
                raise
            permit.succeeded()
            return result

        async def before_sleep(retry_state: RetryCallState) -> None:
            error = retry_state.outcome.exception() if retry_state.outcome is not None else None
            wait = retry_state.upcoming_sleep
            logger.info(
                "%s: attempt %d of %d failed (%s); retrying in %.2fs",
                context,
                retry_state.attempt_number,
                self.policy.max_attempts,
                self._redact(_describe(error, timeout)) if error else "?",
                wait,
            )

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.policy.max_attempts if retry else 1)
            | _StopOnLongRetryAfter(self.policy.max_retry_after_seconds),
            wait=_Wait(self.policy),
            retry=retry_if_exception(
                lambda error: not isinstance(error, BreakerOpenError) and is_transient(error)
            ),
            sleep=self._sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return await retrying(one_attempt)
        except _TRANSLATED as error:
            failure: BaseException = error
        # Raised outside the handler, so the original (which may quote a secret) is not kept as context.
        raise self._contract_error(failure, context, attempts, map_status or self._map_status, timeout)

    def _contract_error(
        self, error: BaseException, context: str, attempts: int, map_status: StatusMapper, timeout: float
    ) -> BaseException:
        if isinstance(error, BreakerOpenError):
            return BreakerOpenError(
                self._redact(f"{context}: {error}"), retry_after_seconds=error.retry_after_seconds
            )
        if isinstance(error, ProviderError):
            return error  # the attempt's own verdict
        if isinstance(error, ApiStatusError):
            redacted = ApiStatusError(
                error.status,
                self._redact(error.detail),
                reason=error.reason,
                retry_after_seconds=error.retry_after_seconds,
            )
            if redacted.retryable:
                return TemporaryProviderError(
                    f"{context}: {redacted}{_after(attempts)}",
                    retry_after_seconds=redacted.retry_after_seconds,
                )
            return map_status(redacted, context)
        description = self._redact(_describe(error, timeout))
        return TemporaryProviderError(f"{context}: {description}{_after(attempts)}")


def _after(attempts: int) -> str:
    return f" (gave up after {attempts} attempts)" if attempts > 1 else ""
