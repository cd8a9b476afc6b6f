"""Build the node's provider; while it cannot be built, say why on the Node and try again.

A provider refuses to be built when its settings are wrong or its credentials cannot be read (a Secret
named in the chart's `existingSecret` that does not exist is mounted as optional: its files are simply
absent). Exiting would put the pod in a crash loop whose reason only its previous log shows; instead
the leader registers the Node NotReady, with ProviderAvailable=False, reason `CredentialsMissing` or
`ProviderConfigError` and the provider's own message (which names the setting or the file), posts a
Warning Event on the Node, and builds again with backoff: a Secret created later, or a fixed ConfigMap
(which rolls the pods), is taken up without anyone restarting anything.

An unknown provider name is not retried: `run_node` refuses it before anything starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from vk_provider import plugins
from vk_provider._kube.events import EventRecorder, InvolvedObject
from vk_provider.errors import ProviderError
from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.credentials import MissingSecretError
from vk_provider.kit.kube import KubeApi, KubeApiError, resource_path
from vk_provider.node import nodeobject
from vk_provider.node.settings import NodeSettings
from vk_provider.provider import PodLifecycle, ProviderContext

logger = logging.getLogger(__name__)

CREDENTIALS_MISSING = "CredentialsMissing"
CONFIG_ERROR = "ProviderConfigError"

BUILD_ERRORS = (ValueError, OSError, LookupError, ProviderError)
"""What a provider's constructor raises for bad settings or unreadable credentials. Anything else is a
bug in the provider and ends the daemon loudly, as before."""

MAX_RETRY_SECONDS = 20.0
"""Each attempt re-reports the Node's status, whose Ready heartbeat must stay fresher than the node
monitor's grace period (40 s by default), or the Node turns Unknown and loses the reason."""

Builder = Callable[[str, ProviderContext], PodLifecycle]


def reason_for(error: BaseException) -> str:
    """CredentialsMissing when a secret or a file could not be read, anywhere in the error's chain
    (providers often re-raise a MissingSecretError as a ValueError naming themselves)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, MissingSecretError | FileNotFoundError | PermissionError):
            return CREDENTIALS_MISSING
        seen = seen.__cause__ or seen.__context__
    return CONFIG_ERROR


def describe(reason: str, error: BaseException) -> str:
    message = str(error) or type(error).__name__
    if reason == CREDENTIALS_MISSING:
        message += (
            " (is the Secret the node mounts created, with that key? A Secret named in the chart's "
            "existingSecret is optional: when it is missing, its files are too)"
        )
    return message


async def report(api: KubeApi, settings: NodeSettings, health: nodeobject.Health) -> str:
    """Create the Node, or patch its status, to say `health`; returns the Node's uid."""
    path = resource_path("v1", "nodes", name=settings.node_name)
    now = datetime.now(UTC)
    try:
        current: dict[str, Any] = await api.get(path)
    except KubeApiError as error:
        if not error.not_found:
            raise
        created = await api.create(
            resource_path("v1", "nodes"), nodeobject.new_node(settings, health, now, {})
        )
        return str(created["metadata"]["uid"])
    previous = (current.get("status") or {}).get("conditions") or []
    status = nodeobject.status(settings, health, now, provider_capacity={}, previous_conditions=previous)
    await api.patch(path + "/status", {"status": status})
    return str(current["metadata"]["uid"])


async def build_provider(
    settings: NodeSettings,
    api: KubeApi,
    context: ProviderContext,
    *,
    build: Builder | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> PodLifecycle:
    """The provider, once it can be built; until then the Node and an Event say why. `build`: for
    tests; None looks `plugins.build_for_node` up at the call, so patching that still works."""
    build = build or plugins.build_for_node
    events = EventRecorder(api, host=settings.node_name)
    posting = asyncio.create_task(events.run(), name="provider start events")
    failures = 0
    try:
        while True:
            try:
                return build(settings.provider, context)
            except plugins.UnknownProviderError:
                raise
            except BUILD_ERRORS as error:
                failures += 1
                reason = reason_for(error)
                message = describe(reason, error)
                health = nodeobject.Health(
                    ready=False, provider_available=False, provider_message=message, provider_reason=reason
                )
                try:
                    uid = await report(api, settings, health)
                except (KubeApiError, OSError, TimeoutError) as api_error:
                    logger.warning("node %s: cannot report on the Node (%s)", settings.node_name, api_error)
                else:
                    involved = InvolvedObject("Node", settings.node_name, "", uid)
                    events.record(involved, "Warning", reason, message)
                delay = jittered_backoff_seconds(
                    failures,
                    initial_seconds=settings.retry_initial_seconds,
                    max_seconds=min(settings.retry_max_seconds, MAX_RETRY_SECONDS),
                )
                logger.error(
                    "node %s: provider %s cannot start (%s): %s; trying again in %.1fs",
                    settings.node_name,
                    settings.provider,
                    reason,
                    message,
                    delay,
                )
                await sleep(delay)
    finally:
        # The waits between attempts let each Event out; one still queued when a build finally works
        # is dropped, as it no longer holds.
        posting.cancel()
        await asyncio.gather(posting, return_exceptions=True)
