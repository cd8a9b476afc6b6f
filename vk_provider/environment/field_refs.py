"""`valueFrom.fieldRef`: a pod's own fields as variables (the downward API).

Supported paths, as in the kubelet: `metadata.name`, `metadata.namespace`, `metadata.uid`,
`metadata.labels`, `metadata.annotations`, `metadata.labels['KEY']`, `metadata.annotations['KEY']`,
`spec.nodeName` (and its old alias `spec.host`), `spec.serviceAccountName`, `status.podIP`,
`status.podIPs`, `status.hostIP`, `status.hostIPs`. Anything else raises `SelectorError`.

The IPs are not read from the pod, whose status does not have them yet when the container is
being prepared: they are the addresses the caller says the pod and its node will have. The virtual
node has one address of each, so the plural paths equal the singular ones.

Whole label and annotation maps render as the kubelet renders them: one `key="value"` line per
entry, sorted by key, values quoted as Go's `%q` quotes them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from vk_provider.environment.model import SelectorError

_MAP_PATHS = frozenset({"metadata.labels", "metadata.annotations"})
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)
_LONGEST_SUBDOMAIN = 253
_LONGEST_NAME_PART = 63
_GO_ESCAPES = {
    "\a": r"\a",
    "\b": r"\b",
    "\f": r"\f",
    "\n": r"\n",
    "\r": r"\r",
    "\t": r"\t",
    "\v": r"\v",
    '"': r"\"",
    "\\": r"\\",
}


@dataclasses.dataclass(frozen=True, slots=True)
class PodFields:
    """The pod, and the addresses it will have, which its status may not show yet."""

    pod: Mapping[str, Any]
    pod_ip: str
    host_ip: str

    def metadata(self, field: str) -> Any:
        return (self.pod.get("metadata") or {}).get(field)

    def spec(self, field: str) -> Any:
        return (self.pod.get("spec") or {}).get(field)


_PLAIN_PATHS: dict[str, Callable[[PodFields], str]] = {
    "metadata.name": lambda fields: str(fields.metadata("name") or ""),
    "metadata.namespace": lambda fields: str(fields.metadata("namespace") or ""),
    "metadata.uid": lambda fields: str(fields.metadata("uid") or ""),
    "metadata.labels": lambda fields: format_map(fields.metadata("labels") or {}),
    "metadata.annotations": lambda fields: format_map(fields.metadata("annotations") or {}),
    "spec.nodeName": lambda fields: str(fields.spec("nodeName") or ""),
    "spec.host": lambda fields: str(fields.spec("nodeName") or ""),
    "spec.serviceAccountName": lambda fields: str(fields.spec("serviceAccountName") or ""),
    "status.podIP": lambda fields: fields.pod_ip,
    "status.podIPs": lambda fields: fields.pod_ip,
    "status.hostIP": lambda fields: fields.host_ip,
    "status.hostIPs": lambda fields: fields.host_ip,
}


def field_ref_value(selector: Mapping[str, Any], fields: PodFields) -> str:
    """The value a `fieldRef` selector points at."""
    api_version = selector.get("apiVersion") or "v1"
    if api_version != "v1":
        raise SelectorError(f'unsupported fieldRef apiVersion "{api_version}" (only "v1" is)')
    path = str(selector.get("fieldPath") or "")
    subscripted = split_subscript(path)
    if subscripted is not None:
        return _map_entry(fields, path, *subscripted)
    if path not in _PLAIN_PATHS:
        raise SelectorError(f'unsupported fieldPath "{path}"')
    return _PLAIN_PATHS[path](fields)


def split_subscript(path: str) -> tuple[str, str] | None:
    """`("metadata.labels", "app")` for `metadata.labels['app']`; None for a path without one."""
    if not path.endswith("']"):
        return None
    base, opener, key = path.removesuffix("']").partition("['")
    return (base, key) if opener and base else None


def _map_entry(fields: PodFields, path: str, map_path: str, key: str) -> str:
    if map_path not in _MAP_PATHS:
        raise SelectorError(f'fieldPath "{path}" does not support a subscript')
    # The kubelet checks annotation keys in lower case, since annotations allow upper-case prefixes.
    checked_key = key.lower() if map_path == "metadata.annotations" else key
    if not is_qualified_name(checked_key):
        raise SelectorError(f'invalid key subscript in fieldPath "{path}": not a qualified name')
    entries = fields.metadata(map_path.removeprefix("metadata.")) or {}
    return str(entries.get(key, ""))


def is_qualified_name(name: str) -> bool:
    """A label or annotation key: `[DNS-subdomain prefix/]name`, the name at most 63 characters."""
    prefix, slash, local = name.rpartition("/")
    if slash and not (
        len(prefix) <= _LONGEST_SUBDOMAIN and "/" not in prefix and _DNS_SUBDOMAIN.fullmatch(prefix)
    ):
        return False
    return len(local) <= _LONGEST_NAME_PART and _QUALIFIED_NAME_PART.fullmatch(local) is not None


def format_map(entries: Mapping[str, Any]) -> str:
    """`key="value"` lines sorted by key, no trailing newline (the kubelet's rendering)."""
    return "\n".join(f"{key}={go_quote(str(entries[key]))}" for key in sorted(entries))


def go_quote(text: str) -> str:
    """`text` in double quotes with Go's `%q` escapes, so values match the kubelet's byte for byte."""
    return '"' + "".join(_go_quoted_character(character) for character in text) + '"'


def _go_quoted_character(character: str) -> str:
    code = ord(character)
    if character in _GO_ESCAPES:
        return _GO_ESCAPES[character]
    if 0xD800 <= code <= 0xDFFF:
        # A lone surrogate can only come from a `\ud800` JSON escape, which Go decodes as U+FFFD.
        return "\ufffd"
    if character.isprintable():
        return character
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
