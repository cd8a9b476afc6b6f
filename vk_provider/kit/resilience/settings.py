"""Reading a remote provider's settings: typed values with errors that name the provider and the key,
and the call settings every remote provider shares (timeouts, retries, circuit breaker, health probe).

Each provider keeps its own settings dataclass (its fields are its documentation) with one field of the
shared `CallSettings`, read here once, so a key means the same thing, with the same bounds, on every
provider.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vk_provider.kit.resilience.breaker import CircuitBreaker
from vk_provider.kit.resilience.policy import CallPolicy

logger = logging.getLogger(__name__)


def setting_keys(settings_type: type) -> list[str]:
    """The keys of a settings dataclass's section, nested settings dataclasses flattened."""
    keys: list[str] = []
    for field in dataclasses.fields(settings_type):
        nested = field.default_factory
        if isinstance(nested, type) and dataclasses.is_dataclass(nested):
            keys.extend(setting_keys(nested))
        else:
            keys.append(field.name)
    return keys


class ConfigValues:
    """The values of one provider's settings mapping, checked as they are read."""

    def __init__(self, provider: str, config: Mapping[str, Any]) -> None:
        self.provider = provider
        self.config = config

    def warn_unknown(self, settings_type: type) -> None:
        """A warning, not an error: the node's section may carry keys meant for others.

        The keys are the fields of `settings_type`; a field made by a settings dataclass (`CallSettings`)
        stands for that one's fields, which sit flat in the same section."""
        known = set(setting_keys(settings_type))
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

    def prices_per_hour(self, key: str, example: str) -> dict[str, float]:
        """A mapping of names to USD per hour, each a finite number >= 0 (0: free); `example` shows one."""
        value = self.config.get(key, {})
        if not isinstance(value, Mapping):
            raise self._invalid(key, f"a mapping of USD per hour like {example}", value)
        prices: dict[str, float] = {}
        for name, price in value.items():
            number = price if isinstance(price, int | float) and not isinstance(price, bool) else None
            if number is None or not math.isfinite(number) or number < 0:
                raise self._invalid(f"{key}[{name!r}]", "a number of USD per hour, 0 or more", price)
            prices[str(name)] = float(number)
        return prices


@dataclasses.dataclass(frozen=True, slots=True)
class CallSettings:
    """How a remote provider calls its API: each attempt's timeout, retries and their backoff, the circuit
    breaker and the health probe. A provider's settings hold one (`calls`); its keys sit flat in the
    provider's section, the same keys on every provider (`read_call_settings`)."""

    call_timeout_seconds: float = 30.0
    """Each attempt's limit, from sending the request to having the answer."""
    max_attempts: int = 4
    backoff_initial_seconds: float = 0.5
    backoff_max_seconds: float = 8.0
    max_retry_after_seconds: float = 30.0
    """The longest Retry-After waited out within one call; longer ones are handed back to the node."""
    breaker_failure_threshold: int = 5
    """Failures in a row that open the breaker."""
    breaker_open_seconds: float = 30.0
    health_timeout_seconds: float = 5.0
    """The health probe's limit: under the node's own 10 s, so a hang counts as a failed probe."""

    @property
    def health_probe_timeout_seconds(self) -> float:
        """What the health probe may take: the shorter of the health and the call timeouts."""
        return min(self.health_timeout_seconds, self.call_timeout_seconds)

    def call_policy(self) -> CallPolicy:
        """The retry and timeout policy; ValueError when the values contradict each other."""
        return CallPolicy(
            timeout_seconds=self.call_timeout_seconds,
            max_attempts=self.max_attempts,
            initial_backoff_seconds=self.backoff_initial_seconds,
            max_backoff_seconds=self.backoff_max_seconds,
            max_retry_after_seconds=self.max_retry_after_seconds,
        )

    def breaker(self, name: str, clock: Callable[[], float]) -> CircuitBreaker:
        """A circuit breaker for the provider called `name`, on `clock` (monotonic seconds)."""
        return CircuitBreaker(
            name,
            failure_threshold=self.breaker_failure_threshold,
            open_seconds=self.breaker_open_seconds,
            clock=clock,
        )


def read_call_settings(values: ConfigValues) -> CallSettings:
    """The call settings of a provider's section, checked one by one and together (the backoff bounds):
    a wrong value is a ValueError that names the provider and the key."""
    defaults = CallSettings()
    settings = CallSettings(
        call_timeout_seconds=values.seconds(
            "call_timeout_seconds", defaults.call_timeout_seconds, positive=True
        ),
        max_attempts=values.integer("max_attempts", defaults.max_attempts, minimum=1),
        backoff_initial_seconds=values.seconds("backoff_initial_seconds", defaults.backoff_initial_seconds),
        backoff_max_seconds=values.seconds("backoff_max_seconds", defaults.backoff_max_seconds),
        max_retry_after_seconds=values.seconds("max_retry_after_seconds", defaults.max_retry_after_seconds),
        breaker_failure_threshold=values.integer(
            "breaker_failure_threshold", defaults.breaker_failure_threshold, minimum=1
        ),
        breaker_open_seconds=values.seconds(
            "breaker_open_seconds", defaults.breaker_open_seconds, positive=True
        ),
        health_timeout_seconds=values.seconds(
            "health_timeout_seconds", defaults.health_timeout_seconds, positive=True
        ),
    )
    try:
        settings.call_policy()
    except ValueError as error:
        raise ValueError(f"{values.provider} provider: {error}") from None
    return settings
