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
from xdist.scheduler import LoadScopeScheduling

from vk_devtools.devcluster import cluster

TIERS = ("unit", "integration")
SHARED_PLANE_VARIABLE = "VK_PROVIDER_SHARED_TEST_PLANE"

SERIAL_GROUPS: dict[str, str] = {
    "tests/integration/test_policy.py": "policy",
    "tests/integration/test_policy_signals.py": "policy",
    "tests/integration/test_offload_cli_policy.py": "policy",
    "tests/integration/test_kueue.py": "policy",
    "tests/integration/test_unhealthy_home.py": "policy",
    "tests/integration/test_gpu_health_severity.py": "policy",
    "tests/integration/test_policy_warm_up.py": "policy",
    "tests/integration/test_warm_away.py": "policy",
    "tests/integration/test_scale.py": "policy",
    "tests/integration/test_dev_cluster.py": "dev-cluster",
    "tests/integration/test_serving_certificate_fallback.py": "dev-cluster",
    "tests/integration/test_autoscaled_spill_over.py": "dev-cluster",
    "tests/integration/test_kubernetes_provider.py": "remote-plane",
    "tests/integration/test_exec_kubernetes.py": "remote-plane",
    "tests/integration/test_envoy_gateway.py": "envoy-gateway",
    "tests/integration/test_manifests.py": "manifests",
    "tests/integration/test_chart.py": "manifests",
    "tests/integration/test_chart_uninstall.py": "manifests",
    "tests/integration/test_namespaced_node.py": "manifests",
    "tests/integration/test_image.py": "image",
    "tests/integration/test_release.py": "image",
    "tests/integration/test_release_install.py": "image",
    "tests/integration/test_in_cluster_stack.py": "in-cluster-stack",
    "tests/integration/test_older_kubernetes.py": "older-kubernetes",
}
"""Test modules whose tests run on one xdist worker, one after another, by group (why: the group
constants in tests/integration/conftest.py). Each such module also carries its group's
`xdist_group` mark; collection checks the two agree. The scheduler below reads this table, not the
marks: pytest 9 derives a test's node id from a private structure that pytest-xdist 3.8's loadgroup
no longer renames, so `--dist loadgroup` alone silently spreads a group over every worker."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = next((part for part in Path(item.path).parts if part in TIERS), None)
        if tier is None:
            raise pytest.UsageError(f"{item.nodeid} is outside tests/unit and tests/integration")
        item.add_marker(getattr(pytest.mark, tier))
        _check_serial_group(item)
    # The scheduler hands out the serial groups first (largest first), then single tests in
    # collection order: integration tests before unit tests, so the quick unit tests fill the end.
    items.sort(key=lambda item: 0 if item.get_closest_marker("integration") is not None else 1)


def _check_serial_group(item: pytest.Item) -> None:
    marks = {str(mark.args[0]) for mark in item.iter_markers("xdist_group") if mark.args}
    listed = SERIAL_GROUPS.get(_module_of(item.nodeid))
    if marks != ({listed} if listed else set()):
        raise pytest.UsageError(
            f"{item.nodeid}: xdist_group marks {sorted(marks)} but SERIAL_GROUPS in tests/conftest.py "
            f"says {listed!r}; keep the two in step"
        )


def _module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class SerialGroupScheduling(LoadScopeScheduling):
    """pytest-xdist's scope scheduling with SERIAL_GROUPS as the scopes: a group's tests go to one
    worker; every other test is a scope of its own, so it goes wherever a worker is free."""

    def _split_scope(self, nodeid: str) -> str:
        return SERIAL_GROUPS.get(_module_of(nodeid), nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> SerialGroupScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    return SerialGroupScheduling(config, log)


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
