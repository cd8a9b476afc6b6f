"""A provider that refuses all new work (an empty balance, a quota of 0), remembered so it is not asked
again and again.

RunPod answers a create with 402 when the account's balance cannot pay for the pod, and SageMaker with
ResourceLimitExceeded when the account's quota for the instance type is 0 (research notes, section 1:
`/work/shared/research/adoption-and-realism.md`). Nothing the node retries changes that: someone has to
top the balance up or raise the quota. Retried per pod at the node's backoff, every pending pod would
send a create a minute, for ever. `WorkRefusal` holds the refusal instead:

- while it holds, `check` raises the remembered `ProviderRefusesWorkError` without calling the provider,
  and `health_error` gives it to the health check (the node's ProviderAvailable condition, its reason
  and a Warning Event come from there);
- after `wait` (60 s at first unless the provider says otherwise, doubled at each new refusal, at most
  `max_wait_seconds`) one create is let through as a trial, and the health check passes again so that
  the node takes pods again: the trial succeeding ends the refusal, another refusal starts a longer wait.
  Over ten minutes of refusals with a first wait of 60 s, that is 4 creates (at 0, 60, 180 and 420 s)
  however many pods wait.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from vk_provider.errors import ProviderRefusesWorkError

logger = logging.getLogger(__name__)

FIRST_WAIT_SECONDS = 60.0
MAX_WAIT_SECONDS = 900.0


class WorkRefusal:
    def __init__(
        self,
        provider: str,
        *,
        clock: Callable[[], float],
        first_wait_seconds: float = FIRST_WAIT_SECONDS,
        max_wait_seconds: float = MAX_WAIT_SECONDS,
    ) -> None:
        self._provider = provider
        self._clock = clock
        self._first_wait = first_wait_seconds
        self._max_wait = max(max_wait_seconds, first_wait_seconds)
        self._wait = 0.0
        self._until = 0.0
        self._error: ProviderRefusesWorkError | None = None
        self._trial = False

    @property
    def refusing(self) -> bool:
        return self._error is not None

    def _remaining(self) -> float:
        return max(0.0, self._until - self._clock())

    def check(self) -> None:
        """Raise the remembered refusal while it holds; let one trial call through once its wait is over."""
        if self._error is None:
            return
        remaining = self._remaining()
        if remaining <= 0 and not self._trial:
            self._trial = True
            logger.info("%s refused new work %.0fs ago; trying once more", self._provider, self._wait)
            return
        raise ProviderRefusesWorkError(
            f"{self._error} (not asking again for {remaining:.0f}s)",
            reason=self._error.reason,
            retry_after_seconds=remaining or self._wait,
        )

    def refused(self, reason: str, message: str) -> ProviderRefusesWorkError:
        """Remember a refusal; the error to raise."""
        self._wait = self._first_wait if self._error is None else min(self._wait * 2, self._max_wait)
        self._until = self._clock() + self._wait
        self._trial = False
        if self._error is None:
            logger.warning("%s refuses new work (%s): %s", self._provider, reason, message)
        self._error = ProviderRefusesWorkError(message, reason=reason, retry_after_seconds=self._wait)
        return ProviderRefusesWorkError(
            f"{message} (not asking again for {self._wait:.0f}s)",
            reason=reason,
            retry_after_seconds=self._wait,
        )

    def accepted(self) -> None:
        """The provider took work: the refusal is over."""
        if self._error is not None:
            logger.info("%s takes new work again", self._provider)
        self._error = None
        self._trial = False
        self._wait = 0.0

    def released(self) -> None:
        """The trial ended without a verdict (a timeout, a 5xx): the next call may be the trial."""
        self._trial = False

    def health_error(self) -> ProviderRefusesWorkError | None:
        """The refusal while its wait runs (the node's ProviderAvailable=False); None once a trial may go."""
        if self._error is None or self._remaining() <= 0:
            return None
        return ProviderRefusesWorkError(
            f"{self._error} (asking again in {self._remaining():.0f}s)",
            reason=self._error.reason,
            retry_after_seconds=self._remaining(),
        )
