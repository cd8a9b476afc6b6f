"""Find providers by name in the `vk_provider.providers` entry-point group and build them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from vk_provider.provider import ENTRY_POINT_GROUP, PodLifecycle, ProviderContext, SupportsGpuCatalog

CHAIN = "chain"
"""The provider that reads the placement annotations (`vk_provider.kit.placement`)."""


class UnknownProviderError(LookupError):
    pass


def available() -> list[str]:
    return sorted(entry.name for entry in entry_points(group=ENTRY_POINT_GROUP))


def _factory(name: str) -> tuple[Callable[..., Any], str]:
    matches = [entry for entry in entry_points(group=ENTRY_POINT_GROUP) if entry.name == name]
    if not matches:
        raise UnknownProviderError(
            f"no provider named {name!r}; installed: {', '.join(available()) or 'none'}"
        )
    return matches[0].load(), matches[0].value


def _checked(provider: Any, name: str, source: str) -> PodLifecycle:
    if not isinstance(provider, PodLifecycle):
        raise TypeError(f"provider {name!r} ({source}) does not implement PodLifecycle")
    return provider


def build(name: str, context: ProviderContext) -> PodLifecycle:
    factory, source = _factory(name)
    return _checked(factory(context), name, source)


def build_for_node(name: str, context: ProviderContext) -> PodLifecycle:
    """The node's provider. One that publishes a GPU catalog runs as the only member of a `chain`.

    The chain is where the placement annotations (GPU types, count, price cap, regions) are read and
    matched against catalogs: without it, a node with one provider would ignore them silently. The
    member is the provider built here, with the node's own context (state folder included), so the
    wrapping changes nothing else; the chain answers for it, and names it by the provider's name.
    """
    provider = build(name, context)
    if name == CHAIN or not isinstance(provider, SupportsGpuCatalog):
        return provider
    chain, source = _factory(CHAIN)
    config = {"members": [{"name": name, "provider": name}]}
    wrapped = chain(dataclasses.replace(context, config=config), build=lambda _name, _context: provider)
    return _checked(wrapped, CHAIN, source)
