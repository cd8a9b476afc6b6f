"""Reading a remote provider's settings: typed values with errors that name the provider and the key,
and the call-policy settings every remote provider shares (timeouts, retries, circuit breaker).

Each provider keeps its own settings dataclass (its fields are its documentation); what they have in
common is read here once, so a key means the same thing, with the same bounds, on every provider.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vk_provider.kit.resilience.breaker import CircuitBreaker
from vk_provider.kit.resilience.policy import CallPolicy

logger = logging.getLogger(__name__)


class ConfigValues:
    """The values of one provider's settings mapping, checked as they are read."""

    def __init__(self, provider: str, config: Mapping[str, Any]) -> None:
        self.provider = provider
        self.config = config

    def warn_unknown(self, settings_type: type) -> None:
        """A warning, not an error: the node's section may carry keys meant for others."""
        known = {field.name for field in dataclasses.fields(settings_type)}
        unknown = sorted(set(self.config) - known)
        if unknown:
            logger.warning(
                "ignoring unknown %s provider settings %s (known: %s)", self.provider, unknown, sorted(known)
            )

    def _invalid(self, key: str, expected: str, value: Any) -> ValueError:
        return ValueError(f"{self.provider} provider: {key} must be {expected}, not {value!r}")

    def seconds(self, key: str, default: float, *, positive: bool = False) -> float:
        value = self.config.get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or value < 0
            or (positive and value == 0)
        ):
            raise self._invalid(key, f"a number of seconds {'> 0' if positive else '>= 0'}", value)
        return float(value)

    def integer(self, key: str, default: int, *, minimum: int, maximum: int | None = None) -> int:
        value = self.config.get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < minimum
            or (maximum is not None and value > maximum)
        ):
            bound = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
            raise self._invalid(key, f"an integer {bound}", value)
        return value

    def optional_path(self, key: str) -> Path | None:
        value = self.config.get(key)
        return None if value is None or value == "" else Path(str(value))

    def capacity(self, key: str = "capacity") -> dict[str, str]:
        value = self.config.get(key, {})
        if not isinstance(value, Mapping):
            raise self._invalid(key, "a mapping like {'nvidia.com/gpu': '8'}", value)
        return {str(name): str(quantity) for name, quantity in value.items()}


CALL_SETTINGS = (
    "call_timeout_seconds",
    "max_attempts",
    "backoff_initial_seconds",
    "backoff_max_seconds",
    "max_retry_after_seconds",
    "breaker_failure_threshold",
    "breaker_open_seconds",
    "health_timeout_seconds",
)
"""The settings every remote provider's dataclass declares, with these names."""


def call_settings(values: ConfigValues, defaults: Any) -> dict[str, Any]:
    """The shared call-policy settings, read with the provider's own defaults (keyword arguments)."""
    return {
        "call_timeout_seconds": values.seconds(
            "call_timeout_seconds", defaults.call_timeout_seconds, positive=True
        ),
        "max_attempts": values.integer("max_attempts", defaults.max_attempts, minimum=1),
        "backoff_initial_seconds": values.seconds(
            "backoff_initial_seconds", defaults.backoff_initial_seconds
        ),
        "backoff_max_seconds": values.seconds("backoff_max_seconds", defaults.backoff_max_seconds),
        "max_retry_after_seconds": values.seconds(
            "max_retry_after_seconds", defaults.max_retry_after_seconds
        ),
        "breaker_failure_threshold": values.integer(
            "breaker_failure_threshold", defaults.breaker_failure_threshold, minimum=1
        ),
        "breaker_open_seconds": values.seconds(
            "breaker_open_seconds", defaults.breaker_open_seconds, positive=True
        ),
        "health_timeout_seconds": values.seconds(
            "health_timeout_seconds", defaults.health_timeout_seconds, positive=True
        ),
    }


def call_policy_of(settings: Any) -> CallPolicy:
    """The retry and timeout policy of a provider's settings, which declare `CALL_SETTINGS`."""
    return CallPolicy(
        timeout_seconds=settings.call_timeout_seconds,
        max_attempts=settings.max_attempts,
        initial_backoff_seconds=settings.backoff_initial_seconds,
        max_backoff_seconds=settings.backoff_max_seconds,
        max_retry_after_seconds=settings.max_retry_after_seconds,
    )


def breaker_of(name: str, settings: Any, clock: Callable[[], float]) -> CircuitBreaker:
    """The circuit breaker of a provider whose settings declare `CALL_SETTINGS`."""
    return CircuitBreaker(
        name,
        failure_threshold=settings.breaker_failure_threshold,
        open_seconds=settings.breaker_open_seconds,
        clock=clock,
    )
