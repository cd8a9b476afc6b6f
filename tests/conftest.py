"""Marks every test with its tier, from the folder it lives in, so `pytest -m unit` needs no plane."""

from __future__ import annotations

from pathlib import Path

import pytest

TIERS = ("unit", "integration")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = next((part for part in Path(item.path).parts if part in TIERS), None)
        if tier is None:
            raise pytest.UsageError(f"{item.nodeid} is outside tests/unit and tests/integration")
        item.add_marker(getattr(pytest.mark, tier))
