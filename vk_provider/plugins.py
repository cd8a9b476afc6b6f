"""Find providers by name in the `vk_provider.providers` entry-point group and build them.

A node runs the provider its configuration names as `build_for_node` makes it: the provider itself,
unless the node wrapper named `placement` (an entry point of the `vk_provider.node_wrappers` group,
`NodeWrapper`) hands back another provider in its place. That is how a provider that publishes a GPU
catalog runs as the only member of a `chain`, which reads the pods' placement annotations: the rule and
the wrapping are the chain's (`vk_providers.chain.wrap_for_node`); this module only asks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from vk_provider.provider import ENTRY_POINT_GROUP, PodLifecycle, ProviderContext

logger = logging.getLogger(__name__)

NODE_WRAPPER_GROUP = "vk_provider.node_wrappers"
PLACEMENT_WRAPPER = "placement"
"""The node wrapper `build_for_node` consults: the one that makes the placement annotations count."""

NodeWrapper = Callable[[str, ProviderContext, PodLifecycle], PodLifecycle]
"""(the provider's name, the node's context for it, the provider built) -> what the node runs: the same
provider, or one that wraps it. The entry points of `NODE_WRAPPER_GROUP` name such functions."""


class UnknownProviderError(LookupError):
    pass


def available() -> list[str]:
    return sorted(entry.name for entry in entry_points(group=ENTRY_POINT_GROUP))


def _entry(group: str, name: str) -> EntryPoint | None:
    return next((entry for entry in entry_points(group=group) if entry.name == name), None)


def _checked(provider: Any, name: str, source: str) -> PodLifecycle:
    if not isinstance(provider, PodLifecycle):
        raise TypeError(f"provider {name!r} ({source}) does not implement PodLifecycle")
    return provider


def build(name: str, context: ProviderContext) -> PodLifecycle:
    entry = _entry(ENTRY_POINT_GROUP, name)
    if entry is None:
        raise UnknownProviderError(
            f"no provider named {name!r}; installed: {', '.join(available()) or 'none'}"
        )
    return _checked(entry.load()(context), name, entry.value)


def build_for_node(name: str, context: ProviderContext) -> PodLifecycle:
    """The node's provider, as the `placement` node wrapper (when one is installed) has it run."""
    provider = build(name, context)
    wrapper = _entry(NODE_WRAPPER_GROUP, PLACEMENT_WRAPPER)
    if wrapper is None:
        logger.warning(
            "no %r node wrapper is installed (%s): provider %s runs as it is, and no one reads the pods' "
            "placement annotations",
            PLACEMENT_WRAPPER,
            NODE_WRAPPER_GROUP,
            name,
        )
        return provider
    wrap: NodeWrapper = wrapper.load()
    return _checked(wrap(name, context, provider), name, wrapper.value)
