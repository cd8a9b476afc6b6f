"""docs/reference/labels.md: every label, annotation, taint, finalizer and status-condition key the
project reads or writes, from `vk_provider.catalogue.keys` (which a test holds to the code)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from vk_devtools.reference import pages, rendering
from vk_provider.catalogue.keys import KEYS, Key

MODULE = "vk_devtools.reference.labels"

KINDS = (
    ("label", "Labels"),
    ("annotation", "Annotations"),
    ("taint", "Taints"),
    ("finalizer", "Finalizers"),
    ("pod condition", "Pod status conditions"),
    ("extended resource", "Extended resources"),
    ("tag", "Tags at a provider"),
)
"""The page's sections, in order; every kind in the catalogue must be one of them."""


def _row(key: Key) -> tuple[str, ...]:
    value = ", ".join(f"`{part.strip()}`" for part in key.value.split(",")) if key.value else ""
    return (f"`{key.key}`", key.on, value, key.written_by, key.read_by, key.meaning)


def render() -> str:
    unknown = sorted({key.kind for key in KEYS} - {kind for kind, _ in KINDS})
    if unknown:
        raise ValueError(f"keys of a kind the page has no section for: {', '.join(unknown)}")
    lines = [
        "# Labels, annotations and taints",
        "",
        rendering.generated_note(MODULE, "vk_provider/catalogue/keys.py"),
        "",
        "Every key the project reads or writes on Kubernetes objects (and the tags it puts on what it "
        "creates at a provider), with the objects that carry it, who writes it, who reads it and what it "
        "means. `<...>` is a part that varies.",
        "",
    ]
    for kind, title in KINDS:
        keys = sorted((key for key in KEYS if key.kind == kind), key=lambda key: (key.key, key.on))
        if keys:
            lines += [f"## {title}", ""]
            header = ("Key", "On", "Value", "Written by", "Read by", "Meaning")
            lines += [*rendering.table(header, [_row(key) for key in keys]), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    return pages.main_of(MODULE, argv)


if __name__ == "__main__":
    sys.exit(main())
