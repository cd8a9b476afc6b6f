"""The health check every remote provider runs: one probe call, judged against the breaker.

One failed probe does not make a provider unavailable: the breaker counts failures across all calls
and opens after enough of them in a row, and only then (or when the provider refuses the credentials
or the account, which no retry mends) is the node's `ProviderAvailable` condition set to False.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from vk_provider.errors import ProviderError, ProviderUnavailableError, TemporaryProviderError
from vk_provider.kit.resilience.breaker import CircuitBreaker
from vk_provider.kit.resilience.policy import ResilientCaller

logger = logging.getLogger(__name__)


async def probe_health(
    caller: ResilientCaller,
    breaker: CircuitBreaker,
    probe: Callable[[], Awaitable[Any]],
    *,
    provider: str,
    timeout_seconds: float,
) -> None:
    """Run `probe` once (no retry) within `timeout_seconds`; ProviderUnavailableError when the breaker
    is open, or the probe fails for a reason other than a temporary one."""
    breaker.raise_if_open()
    try:
        await caller.call("health probe", probe, retry=False, timeout_seconds=timeout_seconds)
    except ProviderUnavailableError:
        raise
    except TemporaryProviderError as error:
        status = breaker.status()
        if not status.available:
            raise ProviderUnavailableError(status.describe()) from None
        logger.info("%s health probe failed (%s); %s", provider, error, status.describe())
    except ProviderError as error:
        raise ProviderUnavailableError(str(error)) from None
