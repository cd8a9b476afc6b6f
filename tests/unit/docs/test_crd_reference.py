"""The CRDs explain themselves: every field has a description (what `kubectl explain` prints), the
chart installs the same files, the listing's columns name real fields, and docs/reference/crds.md is
what its generator writes from them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from vk_devtools.reference import crds
from vk_provider.offload.spec import DATA_PLANES

ROOT = Path(__file__).parents[3]
MANIFESTS = ROOT / "manifests" / "crds"
CHART = ROOT / "charts" / "vk-provider" / "crds"


OURS = crds.read_crds(MANIFESTS)
BOTH_COPIES = [(directory, crd) for directory in (MANIFESTS, CHART) for crd in crds.read_crds(directory)]


def _only_version(crd: crds.CrdFile) -> Mapping[str, Any]:
    (version,) = crds.versions(crd.definition)
    return version


@pytest.mark.parametrize(
    ("directory", "crd"), BOTH_COPIES, ids=[f"{d.relative_to(ROOT)}/{c.name}" for d, c in BOTH_COPIES]
)
def test_every_field_has_a_description(directory: Path, crd: crds.CrdFile) -> None:
    missing = {
        version["name"]: crds.undescribed(crds.schema_of(version))
        for version in crds.versions(crd.definition)
    }
    named = "; ".join(f"{version}: {', '.join(paths)}" for version, paths in missing.items() if paths)
    assert not named, f"{directory.relative_to(ROOT)}/{crd.name} has fields without a description: {named}"


def test_the_chart_installs_the_manifests_crds() -> None:
    names = [crd.name for crd in OURS]
    assert sorted(crd.name for crd in crds.read_crds(CHART)) == sorted(names)
    for name in names:
        assert (CHART / name).read_text() == (MANIFESTS / name).read_text(), (
            f"charts/vk-provider/crds/{name} differs from manifests/crds/{name}: "
            f"cp manifests/crds/{name} charts/vk-provider/crds/"
        )


def test_the_committed_page_is_what_the_generator_writes() -> None:
    assert crds.PAGE.read_text() == crds.render(), (
        f"docs/reference/crds.md is out of date: run `{crds.COMMAND}` (from the virtual environment, "
        "e.g. .venv/bin/python -m vk_devtools.reference.crds --write) and commit it"
    )


def test_undescribed_names_every_bare_path_at_any_depth() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "description": "described",
                "properties": {
                    "size": {"type": "integer"},
                    "rules": {
                        "type": "array",
                        "description": "described",
                        "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                    },
                    "hosts": {"type": "array", "description": "described", "items": {"type": "string"}},
                },
            }
        },
    }
    assert crds.undescribed(schema) == [crds.ROOT_PATH, "spec.size", "spec.rules[]", "spec.rules[].name"]


@pytest.mark.parametrize("crd", OURS, ids=lambda crd: crd.name)
def test_metadata_holds_only_what_the_apiserver_allows(crd: crds.CrdFile) -> None:
    """A description (or anything else) on the top-level metadata gets the whole CRD refused: "must not
    specify anything other than name and generateName"."""
    metadata = dict(crds.schema_of(_only_version(crd))["properties"]["metadata"])
    assert set(metadata.pop("properties", {})) <= {"name", "generateName"}
    assert metadata == {"type": "object"}


def test_undescribed_leaves_out_the_top_level_metadata_alone() -> None:
    schema = {
        "description": "described",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": {"description": "described", "properties": {"metadata": {"type": "object"}}},
        },
    }
    assert crds.undescribed(schema) == ["metadata.name", "spec.metadata"]


def test_every_crd_is_in_the_vk_provider_category() -> None:
    for crd in OURS:
        assert "vk-provider" in crd.definition["spec"]["names"].get("categories", []), crd.name


def _field(schema: Mapping[str, Any], json_path: str) -> Mapping[str, Any] | None:
    """The schema a printer column's JSONPath reads (a filter `[?(...)]` picks an item), or None when
    the schema has no such field; a free-form object takes any path below it."""
    steps = re.sub(r"\[\?\(.*?\)\]", ".[]", json_path).strip(".").split(".")
    for step in steps:
        if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
            return schema
        found = schema.get("items") if step == "[]" else (schema.get("properties") or {}).get(step)
        if not isinstance(found, Mapping):
            return None
        schema = found
    return schema


def test_offload_lists_ready_with_its_reason_and_the_data_plane() -> None:
    (offload,) = (crd for crd in OURS if crd.name == "offload.yaml")
    version = _only_version(offload)
    columns = {column["name"]: column for column in version["additionalPrinterColumns"]}
    ready, reason, plane = columns["Ready"], columns["Reason"], columns["Data plane"]
    assert ready["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert reason["jsonPath"] == '.status.conditions[?(@.type=="Ready")].reason'
    # Shown without -o wide: a RouteConflict must be seen in a plain `kubectl get ofl`.
    assert [column.get("priority", 0) for column in (ready, reason, plane)] == [0, 0, 0]
    data_plane = _field(crds.schema_of(version), plane["jsonPath"])
    assert data_plane is not None
    assert data_plane["enum"] == list(DATA_PLANES)


@pytest.mark.parametrize("crd", OURS, ids=lambda crd: crd.name)
def test_every_printer_column_reads_a_field_of_the_schema(crd: crds.CrdFile) -> None:
    version = _only_version(crd)
    schema = crds.schema_of(version)
    for column in version.get("additionalPrinterColumns") or ():
        if column["jsonPath"] != ".metadata.creationTimestamp":  # the apiserver's, in every object
            assert _field(schema, column["jsonPath"]) is not None, f"{column['name']}: {column['jsonPath']}"


SMALL_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.dev"},
    "spec": {
        "group": "example.dev",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"], "categories": ["demo"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1}
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "description": "A widget.",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "description": "What it is.",
                                "properties": {
                                    "size": {
                                        "type": "integer",
                                        "format": "int32",
                                        "minimum": 1,
                                        "maximum": 10,
                                        "default": 3,
                                        "description": "How big | how wide.",
                                    },
                                    "shape": {
                                        "type": "string",
                                        "enum": ["round", "square"],
                                        "description": "Its outline, see <shapes>.",
                                    },
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


def test_the_page_shows_each_field_with_its_type_default_and_bounds(tmp_path: Path) -> None:
    (tmp_path / "widget.yaml").write_text(yaml.safe_dump(SMALL_CRD))
    (tmp_path / "kustomization.yaml").write_text("resources: [widget.yaml]\n")
    page = crds.render(tmp_path)
    assert "| `spec.size` | `integer (int32)` | `3` | required; 1..10 | How big \\| how wide. |" in page
    assert (
        "| `spec.shape` | `string` |  | one of `round`, `square` | Its outline, see &lt;shapes&gt;. |" in page
    )
    assert "| Size | integer | `.spec.size` | wide |" in page
    assert "| Short names | `wd` |" in page
    assert "| Categories | `demo` |" in page
    assert page == crds.render(tmp_path)


def test_check_names_the_command_and_write_makes_the_page_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "crds.md"
    page.write_text("# stale\n")
    monkeypatch.setattr(crds, "PAGE", page)
    assert crds.main(["--check"]) == 1
    message = capsys.readouterr().err
    assert crds.COMMAND in message
    assert message.count("\n") == 1
    assert crds.main(["--write"]) == 0
    assert crds.main(["--check"]) == 0
    assert page.read_text() == crds.render()


def test_an_unreadable_crd_is_one_line_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.yaml").write_text("kind: [unclosed\n")
    monkeypatch.setattr(crds, "CRDS", tmp_path)
    assert crds.main(["--check"]) == 1
    message = capsys.readouterr().err
    assert "broken.yaml" in message
    assert message.count("\n") == 1
