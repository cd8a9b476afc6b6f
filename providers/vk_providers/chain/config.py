"""The chain provider's settings, read once from its section of the node configuration.

A wrong value fails when the daemon starts, with a message naming the key (and the member).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)

MEMBER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""Member names appear in comma-separated annotations, events and metric labels: DNS labels."""


@dataclasses.dataclass(frozen=True, slots=True)
class MemberSettings:
    name: str
    """How pods, events and the `chosen` annotation name the member (unique in the chain)."""
    provider: str
    """The member's provider: a name of the `vk_provider.providers` entry-point group."""
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The member's own settings, as that provider reads them."""


@dataclasses.dataclass(frozen=True, slots=True)
class ChainSettings:
    members: tuple[MemberSettings, ...]
    """In the node's order: the order of trial without a `providers` annotation, and the last price
    tie-break."""
    catalog_timeout_seconds: float = 20.0
    """How long one member's GPU catalog may take; a member that does not answer offers nothing."""
    health_timeout_seconds: float = 8.0
    """How long one member's health check may take (under the node's own 10 s): longer is a failure."""
    max_offers_per_create: int = 6
    """At most this many offers are tried in one create; the node's retry then starts again."""


def parse_settings(config: Mapping[str, Any]) -> ChainSettings:
    known = {field.name for field in dataclasses.fields(ChainSettings)}
    unknown = sorted(set(config) - known)
    if unknown:
        logger.warning("ignoring unknown chain provider settings %s (known: %s)", unknown, sorted(known))
    defaults = ChainSettings(members=())
    return ChainSettings(
        members=_members(config.get("members")),
        catalog_timeout_seconds=_seconds(config, "catalog_timeout_seconds", defaults.catalog_timeout_seconds),
        health_timeout_seconds=_seconds(config, "health_timeout_seconds", defaults.health_timeout_seconds),
        max_offers_per_create=_count(config, "max_offers_per_create", defaults.max_offers_per_create),
    )


def _members(value: Any) -> tuple[MemberSettings, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError(
            "chain provider: members must be a non-empty list like "
            f"[{{name: runpod, config: {{...}}}}, {{name: burst, provider: mock}}], not {value!r}"
        )
    members: list[MemberSettings] = []
    for index, entry in enumerate(value):
        where = f"chain provider: members[{index}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where} must be a mapping with a name, not {entry!r}")
        extra = sorted(set(entry) - {"name", "provider", "config"})
        if extra:
            raise ValueError(f"{where} has unknown keys {extra} (known: config, name, provider)")
        name = entry.get("name")
        if not isinstance(name, str) or not MEMBER_NAME.fullmatch(name):
            raise ValueError(
                f"{where}: name must be lower-case letters, digits and '-' (at most 63), not {name!r}"
            )
        if any(member.name == name for member in members):
            raise ValueError(f"{where}: the name {name!r} is used twice")
        provider = entry.get("provider", name)
        if not isinstance(provider, str) or not provider:
            raise ValueError(f"{where} ({name}): provider must be a provider's name, not {provider!r}")
        member_config = entry.get("config", {})
        if member_config is None:
            member_config = {}
        if not isinstance(member_config, Mapping):
            raise ValueError(f"{where} ({name}): config must be a mapping, not {member_config!r}")
        members.append(MemberSettings(name, provider, dict(member_config)))
    return tuple(members)


def _seconds(config: Mapping[str, Any], key: str, default: float) -> float:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"chain provider: {key} must be a number of seconds > 0, not {value!r}")
    return float(value)


def _count(config: Mapping[str, Any], key: str, default: int) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"chain provider: {key} must be a whole number >= 1, not {value!r}")
    return value
