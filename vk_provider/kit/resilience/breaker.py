"""A circuit breaker per provider: stop calling a provider that keeps failing, and say so.

Closed: calls go through; a run of `failure_threshold` consecutive failures opens it. Open: calls are
refused at once (`BreakerOpenError`, a temporary error carrying how long until the next try) for
`open_seconds`. Half-open: after that, exactly one trial call goes through; its success closes the
breaker, its failure opens it for another `open_seconds`, and a call that proves nothing (cancelled, or
rate-limited) lets the next caller try.

What counts is decided by the caller through the permit it holds for each call: `succeeded()` (the
provider answered, even with a 4xx: it is up), `failed(message)` (timeout, connection failure, 5xx), or
`released()` (neither). `status()` is what the provider's health check reports: the node turns an open
breaker into `ProviderAvailable=False` with `describe()` as the message.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import time
from collections.abc import Callable

from vk_provider.errors import ProviderUnavailableError, TemporaryProviderError

logger = logging.getLogger(__name__)


class BreakerState(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


@dataclasses.dataclass(frozen=True, slots=True)
class BreakerStatus:
    """A snapshot of a breaker, for health checks, metrics and messages."""

    name: str
    state: BreakerState
    consecutive_failures: int
    failure_threshold: int
    retry_in_seconds: float | None
    """While open: seconds until a trial call is let through. None otherwise."""
    last_failure: str | None

    @property
    def available(self) -> bool:
        """Whether the provider should count as available (the breaker is not open)."""
        return self.state is not BreakerState.OPEN

    def describe(self) -> str:
        last = f" (last: {self.last_failure})" if self.last_failure else ""
        if self.state is BreakerState.OPEN:
            return (
                f"{self.name} calls suspended after {self.consecutive_failures} consecutive failures{last};"
                f" next try in {self.retry_in_seconds or 0:.0f}s"
            )
        if self.state is BreakerState.HALF_OPEN:
            return f"{self.name} is on trial: one call decides whether it is back{last}"
        if self.consecutive_failures:
            return f"{self.name} is up; {self.consecutive_failures} failure(s) in a row{last}"
        return f"{self.name} is up"


class BreakerOpenError(TemporaryProviderError):
    """The breaker refused the call without making it."""


class BreakerPermit:
    """Leave to make one call; settle it exactly once (later settlements are ignored)."""

    __slots__ = ("_breaker", "_settled", "trial")

    def __init__(self, breaker: CircuitBreaker, *, trial: bool) -> None:
        self._breaker = breaker
        self._settled = False
        self.trial = trial

    def succeeded(self) -> None:
        if not self._settled:
            self._settled = True
            self._breaker._on_success(self)

    def failed(self, message: str) -> None:
        if not self._settled:
            self._settled = True
            self._breaker._on_failure(self, message)

    def released(self) -> None:
        if not self._settled:
            self._settled = True
            self._breaker._on_neutral(self)


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        *,
        failure_threshold: int = 5,
        open_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError(f"failure_threshold must be >= 1, not {failure_threshold}")
        if open_seconds <= 0:
            raise ValueError(f"open_seconds must be > 0, not {open_seconds}")
        self.name = name
        self.failure_threshold = failure_threshold
        self.open_seconds = open_seconds
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False
        self._last_failure: str | None = None

    def __repr__(self) -> str:
        return f"CircuitBreaker({self.name!r}, {self.status().state.value})"

    def _state(self) -> BreakerState:
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock() - self._opened_at < self.open_seconds:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    def status(self) -> BreakerStatus:
        state = self._state()
        retry_in = None
        if state is BreakerState.OPEN and self._opened_at is not None:
            retry_in = max(0.0, self._opened_at + self.open_seconds - self._clock())
        return BreakerStatus(
            name=self.name,
            state=state,
            consecutive_failures=self._failures,
            failure_threshold=self.failure_threshold,
            retry_in_seconds=retry_in,
            last_failure=self._last_failure,
        )

    def acquire(self) -> BreakerPermit:
        """A permit for one call; raises BreakerOpenError if the breaker refuses it."""
        state = self._state()
        if state is BreakerState.CLOSED:
            return BreakerPermit(self, trial=False)
        if state is BreakerState.HALF_OPEN and not self._trial_in_flight:
            self._trial_in_flight = True
            return BreakerPermit(self, trial=True)
        status = self.status()
        raise BreakerOpenError(status.describe(), retry_after_seconds=status.retry_in_seconds or 1.0)

    def raise_if_open(self) -> None:
        """For health checks: ProviderUnavailableError with the breaker's account while it is open."""
        status = self.status()
        if not status.available:
            raise ProviderUnavailableError(status.describe())

    # Settlements (called by permits)

    def _on_success(self, permit: BreakerPermit) -> None:
        was_open = self._opened_at is not None
        if permit.trial:
            self._trial_in_flight = False
        if was_open and not permit.trial:
            # A call admitted before the breaker opened proves little about now; only a trial closes it.
            return
        self._failures = 0
        self._opened_at = None
        self._last_failure = None
        if was_open:
            logger.info("%s answered again; closing its circuit breaker", self.name)

    def _on_failure(self, permit: BreakerPermit, message: str) -> None:
        self._failures += 1
        self._last_failure = message
        if permit.trial:
            self._trial_in_flight = False
            self._opened_at = self._clock()
            logger.warning(
                "%s failed its trial call (%s); open for another %gs", self.name, message, self.open_seconds
            )
        elif self._opened_at is None and self._failures >= self.failure_threshold:
            self._opened_at = self._clock()
            logger.warning(
                "%s failed %d times in a row (last: %s); suspending calls for %gs",
                self.name,
                self._failures,
                message,
                self.open_seconds,
            )

    def _on_neutral(self, permit: BreakerPermit) -> None:
        if permit.trial:
            self._trial_in_flight = False
