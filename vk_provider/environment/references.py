"""Values taken from ConfigMaps and Secrets: whole objects (`envFrom`) and single keys (`valueFrom`).

A missing object or key becomes a Warning event whose reason says which it was and whether the
reference was optional (`OptionalConfigMapNotFound`, `MandatorySecretKeyNotFound`, ...). References
are mandatory unless `optional: true`; a mandatory miss raises `MandatoryReferenceError` at once,
an optional one leaves the variable undefined (so an earlier definition of it stands, as in the
kubelet).

Secret values are bytes and the environment is text: they are decoded as UTF-8 with
`surrogateescape`, so bytes that are not UTF-8 survive and `os.fsencode` gives back the exact
original (what Python itself does for `os.environ`). Secret values are never logged or put in
events; only names and keys are.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from vk_provider.environment.model import EnvironmentEvent, MandatoryReferenceError, ReferenceReader

INVALID_NAMES_REASON = "InvalidEnvironmentVariableNames"
# The kubelet's rule for names taken from envFrom keys: letters, digits, `_`, `-` and `.`, not
# starting with a digit, and not `.`, `..` or anything starting with `..` (which read as paths).
_ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*", re.ASCII)


@dataclasses.dataclass(frozen=True, slots=True)
class ObjectKind:
    noun: str
    """How messages name the kind."""
    reason_stem: str
    """The kind's part of the event reasons, between Optional/Mandatory and (Key)NotFound."""
    env_from_noun: str
    """How the kubelet's InvalidEnvironmentVariableNames message names the kind."""


CONFIG_MAP = ObjectKind(noun="configmap", reason_stem="ConfigMap", env_from_noun="configMap")
SECRET = ObjectKind(noun="secret", reason_stem="Secret", env_from_noun="secret")


def is_env_var_name(name: str) -> bool:
    return _ENV_VAR_NAME.fullmatch(name) is not None and name not in {".", ".."} and not name.startswith("..")


def decode_secret_value(value: bytes) -> str:
    return value.decode("utf-8", errors="surrogateescape")


class ReferenceLookup:
    """Reads each referenced object once per container, and keeps the events resolution produces.

    Reading once also means every variable sees the same version of an object, even if it changes
    while the container is being resolved.
    """

    def __init__(self, reader: ReferenceReader, namespace: str, container_name: str) -> None:
        self._reader = reader
        self.namespace = namespace
        self.container_name = container_name
        self._read: dict[tuple[ObjectKind, str], Mapping[str, str] | None] = {}
        self.events: list[EnvironmentEvent] = []

    async def data(self, kind: ObjectKind, name: str) -> Mapping[str, str] | None:
        """The object's data as text, or None when it does not exist."""
        if (kind, name) not in self._read:
            self._read[kind, name] = await self._fetch(kind, name)
        return self._read[kind, name]

    async def _fetch(self, kind: ObjectKind, name: str) -> Mapping[str, str] | None:
        if kind is CONFIG_MAP:
            return await self._reader.config_map(self.namespace, name)
        secret = await self._reader.secret(self.namespace, name)
        return None if secret is None else {key: decode_secret_value(value) for key, value in secret.items()}

    def missing(self, kind: ObjectKind, *, optional: bool, key_missing: bool, message: str) -> None:
        """Records an optional miss; raises for a mandatory one."""
        necessity = "Optional" if optional else "Mandatory"
        what = "KeyNotFound" if key_missing else "NotFound"
        event = EnvironmentEvent("Warning", f"{necessity}{kind.reason_stem}{what}", message)
        if not optional:
            raise MandatoryReferenceError(event, earlier_events=tuple(self.events))
        self.events.append(event)

    def warn(self, reason: str, message: str) -> None:
        self.events.append(EnvironmentEvent("Warning", reason, message))


async def env_from_variables(source: Mapping[str, Any], lookup: ReferenceLookup) -> list[tuple[str, str]]:
    """One `envFrom` entry's variables, in key order, without the keys that are not valid names."""
    kind, reference = _env_from_reference(source)
    if reference is None:
        return []
    name = str(reference.get("name") or "")
    data = await lookup.data(kind, name)
    if data is None:
        message = f'{kind.noun} "{name}" not found (envFrom of container "{lookup.container_name}")'
        lookup.missing(kind, optional=_is_optional(reference), key_missing=False, message=message)
        return []
    prefix = str(source.get("prefix") or "")
    named = [(prefix + key, data[key]) for key in sorted(data)]
    invalid = [variable for variable, _ in named if not is_env_var_name(variable)]
    if invalid:
        lookup.warn(
            INVALID_NAMES_REASON,
            f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom {kind.env_from_noun} "
            f"{lookup.namespace}/{name} were skipped since they are considered invalid environment "
            "variable names.",
        )
    return [(variable, value) for variable, value in named if is_env_var_name(variable)]


def _env_from_reference(source: Mapping[str, Any]) -> tuple[ObjectKind, Mapping[str, Any] | None]:
    if source.get("configMapRef") is not None:
        return CONFIG_MAP, source["configMapRef"]
    return SECRET, source.get("secretRef")


async def key_reference_value(
    kind: ObjectKind, selector: Mapping[str, Any], variable: str, lookup: ReferenceLookup
) -> str | None:
    """A `configMapKeyRef` or `secretKeyRef` value, or None when an optional reference misses."""
    name = str(selector.get("name") or "")
    key = str(selector.get("key") or "")
    optional = _is_optional(selector)
    user = f'variable "{variable}" of container "{lookup.container_name}"'
    data = await lookup.data(kind, name)
    if data is None:
        message = f'{kind.noun} "{name}" not found (key "{key}" for {user})'
        lookup.missing(kind, optional=optional, key_missing=False, message=message)
        return None
    if key not in data:
        message = f'key "{key}" not found in {kind.noun} "{name}" ({user})'
        lookup.missing(kind, optional=optional, key_missing=True, message=message)
        return None
    return data[key]


def _is_optional(reference: Mapping[str, Any]) -> bool:
    return reference.get("optional") is True
