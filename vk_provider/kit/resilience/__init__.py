"""Resilience shared by every provider that calls a remote API: retries, timeouts, a circuit breaker.

- `http`: what a failed HTTP call looks like (`ApiStatusError`, with the status, the provider's own
  message and its `Retry-After`), read from an aiohttp response;
- `breaker`: a `CircuitBreaker` per provider (closed, open, half-open with one trial call) whose
  `status()` the provider's health check reports, which drives the node's `ProviderAvailable`
  condition;
- `policy`: `ResilientCaller`, the one way to make a provider call: a timeout on every attempt;
  tenacity retries with capped, jittered exponential backoff on timeouts, connection failures, 408, 429
  and 5xx, waiting at least as long as `Retry-After` asks; no retry of other 4xx; a bounded number of
  attempts; and the outcome mapped onto the contract's errors (`vk_provider.errors`);
- `settings`: `CallSettings`, the timeouts, retries, breaker and health probe every remote provider's
  settings hold, read from the same keys by `read_call_settings`; `health.probe_health` is the health
  check they share.
"""

from __future__ import annotations

from vk_provider.kit.resilience.breaker import (
    BreakerOpenError,
    BreakerPermit,
    BreakerState,
    BreakerStatus,
    CircuitBreaker,
)
from vk_provider.kit.resilience.http import ApiStatusError, error_from_response, parse_retry_after
from vk_provider.kit.resilience.policy import (
    AccountError,
    CallPolicy,
    ResilientCaller,
    StatusMapper,
    default_status_error,
    is_transient,
)

__all__ = [
    "AccountError",
    "ApiStatusError",
    "BreakerOpenError",
    "BreakerPermit",
    "BreakerState",
    "BreakerStatus",
    "CallPolicy",
    "CircuitBreaker",
    "ResilientCaller",
    "StatusMapper",
    "default_status_error",
    "error_from_response",
    "is_transient",
    "parse_retry_after",
]
