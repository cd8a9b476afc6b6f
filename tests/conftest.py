"""Marks every test with its tier, from the folder it lives in, so `pytest -m unit` needs no plane;
orders the run for pytest-xdist; and owns the one control plane the xdist workers share.

Under `-n N` the controlling process names a folder for the run's plane (SHARED_PLANE_VARIABLE, which
the workers inherit); the first worker that needs a plane starts it there (tests/integration/conftest.py)
and the controlling process stops it when the run ends, whatever happened to the workers.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from vk_devtools.devcluster import cluster

TIERS = ("unit", "integration")
SHARED_PLANE_VARIABLE = "VK_PROVIDER_SHARED_TEST_PLANE"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = next((part for part in Path(item.path).parts if part in TIERS), None)
        if tier is None:
            raise pytest.UsageError(f"{item.nodeid} is outside tests/unit and tests/integration")
        item.add_marker(getattr(pytest.mark, tier))
    # xdist hands out work in collection order: the long serial groups first, so that one worker
    # starts on them at once while the others share everything else; the unit tests last, to fill gaps.
    items.sort(key=_start_order)


def _start_order(item: pytest.Item) -> int:
    if item.get_closest_marker("xdist_group") is not None:
        return 0
    return 1 if item.get_closest_marker("integration") is not None else 2


def _is_xdist_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


def pytest_configure(config: pytest.Config) -> None:
    if _is_xdist_controller(config) and SHARED_PLANE_VARIABLE not in os.environ:
        os.environ[SHARED_PLANE_VARIABLE] = tempfile.mkdtemp(prefix="vk-provider-test-plane-")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _is_xdist_controller(session.config):
        return
    directory = Path(os.environ.get(SHARED_PLANE_VARIABLE, ""))
    if not directory.name or not directory.is_dir():
        return
    if cluster.ClusterState.load(directory) is not None:
        cluster.down(directory)
    if exitstatus == 0:
        shutil.rmtree(directory, ignore_errors=True)
        for lock in directory.parent.glob(f"{directory.name}.*lock"):
            lock.unlink(missing_ok=True)
    else:
        print(f"\nthe shared control plane's folder (logs, data): {directory}", file=sys.stderr)
