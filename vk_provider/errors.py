"""Errors that cross the provider boundary, and how the node treats each.

Providers raise these (and only these) for expected failures; anything else is treated as temporary
and retried, and logged with its traceback because it is probably a bug.
"""

from __future__ import annotations


class ProviderError(Exception):
    """Base of every error a provider raises on purpose. The message is shown to users as is."""


class TemporaryProviderError(ProviderError):
    """Worth retrying: timeouts, 5xx, 429, capacity that may free up."""

    def __init__(self, message: str, *, retry_after_seconds: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class InvalidPodError(ProviderError):
    """The provider cannot run this pod as specified; retrying the same request will not help."""


class NotFoundError(ProviderError):
    """The provider holds nothing for this pod or container."""


class CapacityUnavailableError(TemporaryProviderError):
    """No capacity for this placement right now (a GPU type in a data centre, an instance type): another
    placement the pod allows may have some, and this one may free up later."""


class ProviderUnavailableError(ProviderError):
    """The provider as a whole cannot take work right now (raised by check_health, and by calls the
    provider refuses for its own sake). `reason` is the node's ProviderAvailable condition reason (a
    CamelCase word); empty: the generic ProviderUnavailable."""

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class ProviderRefusesWorkError(ProviderUnavailableError):
    """The provider answers but refuses every new workload until someone acts on the account: an empty
    balance (RunPod's 402), a service quota of 0 (SageMaker's ResourceLimitExceeded). Retrying soon is a
    storm that cannot succeed: the provider waits `retry_after_seconds` before it sends another create."""

    def __init__(self, message: str, *, reason: str, retry_after_seconds: float) -> None:
        super().__init__(message, reason=reason)
        self.retry_after_seconds = retry_after_seconds


class CapabilityMissingError(ProviderError):
    """The provider does not offer this capability (logs, usage, ...)."""


def is_retryable(error: BaseException) -> bool:
    """Everything is retried except a pod the provider has rejected for good."""
    return not isinstance(error, InvalidPodError)
