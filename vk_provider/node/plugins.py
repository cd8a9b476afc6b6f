"""Find providers by name in the `vk_provider.providers` entry-point group and build them."""

from __future__ import annotations

from importlib.metadata import entry_points

from vk_provider.provider import ENTRY_POINT_GROUP, PodLifecycle, ProviderContext


class UnknownProviderError(LookupError):
    pass


def available() -> list[str]:
    return sorted(entry.name for entry in entry_points(group=ENTRY_POINT_GROUP))


def build(name: str, context: ProviderContext) -> PodLifecycle:
    matches = [entry for entry in entry_points(group=ENTRY_POINT_GROUP) if entry.name == name]
    if not matches:
        raise UnknownProviderError(
            f"no provider named {name!r}; installed: {', '.join(available()) or 'none'}"
        )
    factory = matches[0].load()
    provider = factory(context)
    if not isinstance(provider, PodLifecycle):
        raise TypeError(f"provider {name!r} ({matches[0].value}) does not implement PodLifecycle")
    return provider
