"""`-o wide|name|json|yaml`: the forms `list`, `status`, `policy list` and `policy status` print in,
as `kubectl get` names them.

`name` is `<kind>.<group>/<name>`, exactly what `kubectl get offloads -o name` prints, so its lines
can be handed to kubectl (`kubectl offload list -o name | xargs kubectl describe`); `wide` is the
table with more columns; `json` and `yaml` the objects as the apiserver returned them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vk_provider.offload.names import GROUP
from vk_provider.offloadcli import rendering

OUTPUTS = ("wide", "name", "json", "yaml")
DOCUMENTS = ("json", "yaml")
OUTPUT_HELP = (
    "wide: the table with more columns; name: <kind>.<group>/<name> lines, as kubectl prints them; "
    "json, yaml: the object(s) as stored"
)

RawObject = Mapping[str, Any]
Table = Callable[[Sequence[RawObject], bool], str]
"""Draws objects as a table: (the objects, whether wide) -> the table with its header."""


@dataclass(frozen=True)
class Kind:
    """What a command prints objects of: their kind (for `-o name`) and how they are drawn as a table."""

    kind: str
    table: Table


def object_name(kind: str, document: RawObject) -> str:
    """`offload.offload.vk-provider.dev/chat`: kubectl's `-o name` form."""
    return f"{kind.lower()}.{GROUP}/{(document.get('metadata') or {}).get('name', rendering.NONE)}"


def render_listing(listed: RawObject, output: str | None, kind: Kind) -> str:
    """A listed collection in `output` (None: the table); json and yaml print the whole List."""
    items: Sequence[RawObject] = listed.get("items") or []
    if output in DOCUMENTS:
        return rendering.render_document(listed, output)
    if output == "name":
        return "\n".join(object_name(kind.kind, item) for item in items)
    return kind.table(items, output == "wide")


def render_one(document: RawObject, output: str, kind: Kind, *, repeat: bool) -> str:
    """One object (again, when `repeat`, as `--watch` prints each change): a repeat in YAML is a new
    document of the stream (`---`) and a repeated wide row comes without its header, as with
    `kubectl get --watch`."""
    if output in DOCUMENTS:
        text = rendering.render_document(document, output)
        return f"---\n{text}" if output == "yaml" and repeat else text
    if output == "name":
        return object_name(kind.kind, document)
    table = kind.table([document], output == "wide")
    return table.split("\n", 1)[1] if repeat else table
