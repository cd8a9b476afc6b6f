"""Pods retried as the node retries them, on a manual clock: what a provider's refusals cost in calls."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence

from vk_provider.errors import ProviderError
from vk_provider.node.pods import retry_delay
from vk_provider.node.settings import NodeSettings
from vk_provider.provider import PodRequest
from vk_provider.runtime.queueing import Backoff


async def retry_as_the_node_does(
    create: Callable[[PodRequest], Awaitable[object]],
    requests: Sequence[PodRequest],
    set_clock: Callable[[float], None],
    *,
    seconds: float,
) -> None:
    """Create each pod until it succeeds or `seconds` pass, retried with the node's default backoff and
    never before the provider's own wait; `set_clock(t)` moves the manual clock to `t` seconds in."""
    defaults = {field.name: field.default for field in dataclasses.fields(NodeSettings)}
    backoff = Backoff(
        initial_seconds=float(defaults["retry_initial_seconds"]),
        max_seconds=float(defaults["retry_max_seconds"]),
    )
    due = dict.fromkeys(range(len(requests)), 0.0)
    while due and (index := min(due, key=due.__getitem__)) is not None and due[index] <= seconds:
        set_clock(due[index])
        try:
            await create(requests[index])
        except ProviderError as error:
            due[index] += retry_delay(backoff.next_delay(str(index)), error)
        else:
            del due[index]
