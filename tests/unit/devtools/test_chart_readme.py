"""The chart's README is what its generator writes from the schema and the defaults, and the schema
describes every value (a value without a description would be a bare row)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from vk_devtools import chartreadme


def test_the_checked_in_readme_is_what_the_generator_writes() -> None:
    assert chartreadme.README.read_text() == chartreadme.render(), (
        f"charts/vk-provider/README.md is out of date: run `{chartreadme.COMMAND}` (from the "
        "virtual environment, e.g. .venv/bin/python -m vk_devtools.chartreadme) and commit it"
    )


def test_every_schema_property_has_a_description() -> None:
    schema = json.loads((chartreadme.CHART / "values.schema.json").read_text())
    assert chartreadme.undescribed(schema) == []


def test_a_changed_description_or_default_changes_the_readme(tmp_path: Path) -> None:
    for name in ("values.schema.json", "values.yaml"):
        (tmp_path / name).write_text((chartreadme.CHART / name).read_text())
    before = chartreadme.render(tmp_path)
    values = tmp_path / "values.yaml"
    defaults = yaml.safe_load(values.read_text())
    defaults["router"]["replicas"] = 3
    values.write_text(yaml.safe_dump(defaults))
    schema = tmp_path / "values.schema.json"
    schema.write_text(schema.read_text().replace("How often candidates try.", "How often they try."))
    after = chartreadme.render(tmp_path)
    assert "| `router.replicas` | integer | `3` |" in after
    assert "How often they try." in after
    assert after != before


def test_undescribed_finds_properties_at_any_depth() -> None:
    schema = {
        "properties": {
            "a": {"description": "x", "properties": {"b": {}}},
            "c": {"description": "y", "items": {"properties": {"d": {"description": ""}}}},
        }
    }
    assert chartreadme.undescribed(schema) == ["a.b", "c[].d"]
