"""The contract's error kinds as gRPC statuses, both ways (the table is in `v1/provider.proto`).

A plugin raises the contract's errors and its server sends the matching status; the `grpc` provider
turns the status back into the same error, so the node retries, fails pods and marks the provider
unavailable exactly as it does for an in-process provider.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import grpc

from vk_provider.errors import (
    CapabilityMissingError,
    InvalidPodError,
    NotFoundError,
    ProviderError,
    ProviderUnavailableError,
    TemporaryProviderError,
)

RETRY_AFTER_KEY = "retry-after-seconds"
"""Trailing metadata of a temporary failure: how long to wait before trying again (decimal seconds)."""

Metadata = tuple[tuple[str, str], ...]


_CODES: Sequence[tuple[type[ProviderError], grpc.StatusCode]] = (
    (InvalidPodError, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (CapabilityMissingError, grpc.StatusCode.UNIMPLEMENTED),
    (ProviderUnavailableError, grpc.StatusCode.UNAVAILABLE),
    (TemporaryProviderError, grpc.StatusCode.UNAVAILABLE),
)


def status_of(error: BaseException) -> tuple[grpc.StatusCode, str, Metadata]:
    """What a plugin's server answers for an error its provider raised."""
    if not isinstance(error, ProviderError):
        return grpc.StatusCode.INTERNAL, f"the plugin failed: {type(error).__name__}: {error}", ()
    code = next((code for kind, code in _CODES if isinstance(error, kind)), grpc.StatusCode.UNKNOWN)
    metadata: Metadata = ()
    if isinstance(error, TemporaryProviderError):
        after = error.retry_after_seconds
        if after is not None and math.isfinite(after):
            metadata = ((RETRY_AFTER_KEY, f"{after:g}"),)
    return code, str(error), metadata


def error_of(
    code: grpc.StatusCode, details: str, metadata: Metadata, *, call: str, health_check: bool = False
) -> ProviderError:
    """The contract's error for a status the plugin (or the transport) answered `call` with."""
    message = details or f"the plugin answered {call} with {code.name}"
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION):
        return InvalidPodError(message)
    if code is grpc.StatusCode.NOT_FOUND:
        return NotFoundError(message)
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return CapabilityMissingError(f"the plugin does not implement {call}: {message}")
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        message = f"the plugin did not answer {call} in time"
    if health_check:
        return ProviderUnavailableError(message)
    return TemporaryProviderError(message, retry_after_seconds=_retry_after(metadata))


def _retry_after(metadata: Metadata) -> float | None:
    for key, value in metadata:
        if key == RETRY_AFTER_KEY:
            try:
                seconds = float(value)
            except ValueError:
                return None
            return seconds if math.isfinite(seconds) and seconds >= 0 else None
    return None
