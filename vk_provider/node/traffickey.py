"""The key the node seals its pods' traffic addresses with (`vk_provider.kit.traffic_signature`).

Read from the traffic key Secret once per takeover, before any pod is reconciled: a pod published
without a seal would get no traffic, so the node stays NotReady until it holds the key, saying why in
its log and in a Warning Event on its Node (RBAC missing, a Secret without a usable key), and asking
again with backoff. A missing Secret is created with a fresh random key; when several nodes start at
once the first creation wins and the others read it. A rotated key reaches the node at its next
takeover (a restart); the router accepts the previous key meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import aiohttp

from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.kube import KubeApi, KubeApiError, resource_path
from vk_provider.kit.traffic_signature import SecretLocation, TrafficKey, keys_of, secret_body

logger = logging.getLogger(__name__)

KEY_UNAVAILABLE_REASON = "TrafficKeyUnavailable"
"""The Warning Event on the Node while it cannot read (or create) the traffic key."""


async def current_key(api: KubeApi, location: SecretLocation) -> TrafficKey:
    """The Secret's current key, the Secret created first if it is missing."""
    path = resource_path("v1", "secrets", namespace=location.namespace, name=location.name)
    try:
        secret = await api.get(path)
    except KubeApiError as error:
        if not error.not_found:
            raise
        try:
            secret = await api.create(
                resource_path("v1", "secrets", namespace=location.namespace),
                secret_body(location, TrafficKey.generate()),
            )
            logger.info("created the traffic key Secret %s", location)
        except KubeApiError as create_error:
            if not create_error.conflict:
                raise
            secret = await api.get(path)  # another node created it in between: use theirs
    return keys_of(secret)[0]


async def wait_for_key(
    api: KubeApi,
    location: SecretLocation,
    *,
    report: Callable[[str], None],
    initial_seconds: float,
    max_seconds: float,
) -> TrafficKey:
    """`current_key`, asked again with backoff until it answers; `report` gets each failure's
    message the first time it is seen (an Event per cause, not one per attempt)."""
    failures = 0
    reported: set[str] = set()
    while True:
        try:
            return await current_key(api, location)
        except (KubeApiError, ValueError, aiohttp.ClientError, TimeoutError) as error:
            failures += 1
            message = (
                f"cannot read the traffic key Secret {location} ({error}); pods are not published "
                "until it can, since the router would send an unsealed address nothing"
            )
            if message not in reported:
                reported.add(message)
                report(message)
            delay = jittered_backoff_seconds(
                failures, initial_seconds=initial_seconds, max_seconds=max_seconds
            )
            logger.warning("%s; again in %.1fs", message, delay)
            await asyncio.sleep(delay)
