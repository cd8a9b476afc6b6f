"""From bound to Running a pod costs one status patch, with everything the node publishes of it, and no
metadata write; a reconcile before the watch brings that write back writes nothing more.

Driven like test_pod_updates: the reconciler directly, the mock provider (Running at once), and a
stand-in for the KubeApi wrapper that answers a patch with the resourceVersion it made.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.unit.node.test_pod_updates import CachedPods, RecordingApi, make_reconciler, pod
from vk_provider.node import podstatus
from vk_provider.node.pods import _caught_up, _Written
from vk_provider.offload.names import OFFLOAD_LABEL, TRAFFIC_ADDRESS_CONDITION
from vk_provider.provider import ContainerState, ContainerStateKind, PodRef, PodState, ProviderContext
from vk_providers.mock import MockProvider

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 3, 16, 0, tzinfo=UTC)


class VersioningApi(RecordingApi):
    """Answers each patch with the next resourceVersion, as etcd numbers them."""

    def __init__(self, first_version: int) -> None:
        super().__init__()
        self.version = first_version

    async def patch(self, path: str, body: Any, *, content_type: str = "") -> dict[str, Any]:
        await super().patch(path, body, content_type=content_type)
        self.version += 1
        return {"metadata": {"resourceVersion": str(self.version)}}


def bound(version: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    the_pod = pod()
    the_pod["metadata"]["resourceVersion"] = version
    the_pod["metadata"]["labels"].update(labels or {})
    return the_pod


def as_written(cached: dict[str, Any], api: RecordingApi, version: str) -> dict[str, Any]:
    """The pod as the watch brings it after the node's last status patch."""
    after = copy.deepcopy(cached)
    after["status"] = podstatus.merged(after.get("status") or {}, api.patches[-1][1]["status"])
    after["metadata"]["resourceVersion"] = version
    return after


async def test_bound_to_running_is_one_status_patch_and_nothing_until_the_watch_brings_it_back(
    tmp_path: Path,
) -> None:
    api = VersioningApi(first_version=10)
    pods = CachedPods()
    reconciler = make_reconciler(api, MockProvider(ProviderContext("n", {}, "127.0.0.1", tmp_path)), pods)
    pods.objects["u1"] = bound("10")
    await reconciler.reconcile("u1")

    [(path, body)] = api.patches
    assert path == "/api/v1/namespaces/ns/pods/web/status"
    status = body["status"]
    assert status["phase"] == "Running"
    assert status["podIP"].startswith("10.200.")
    assert status["startTime"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }  # no traffic address: no Offload routes to this pod
    [container] = status["containerStatuses"]
    assert (container["name"], container["ready"], "running" in container["state"]) == ("app", True, True)

    await reconciler.reconcile("u1")  # the provider's push of the state, before the watch has the write
    pods.objects["u1"]["metadata"]["resourceVersion"] = "9"  # an older event still on its way
    await reconciler.reconcile("u1")
    assert len(api.patches) == 1

    pods.objects["u1"] = as_written(bound("10"), api, "11")
    await reconciler.reconcile("u1")
    assert len(api.patches) == 1
    assert reconciler._written == {}  # forgotten once the cache shows the write


async def test_an_offload_pod_publishes_its_address_in_the_same_single_patch(tmp_path: Path) -> None:
    api = VersioningApi(first_version=10)
    pods = CachedPods()
    reconciler = make_reconciler(api, MockProvider(ProviderContext("n", {}, "127.0.0.1", tmp_path)), pods)
    pods.objects["u1"] = bound("10", labels={OFFLOAD_LABEL: "web"})
    await reconciler.reconcile("u1")
    await reconciler.reconcile("u1")
    [(_, body)] = api.patches
    published = {c["type"]: c for c in body["status"]["conditions"]}
    assert published[TRAFFIC_ADDRESS_CONDITION]["message"] == f"http://{body['status']['podIP']}:8080"


def test_the_cache_has_caught_up_at_the_written_version_or_later() -> None:
    written = _Written(over="10", version="12", status={})
    assert not _caught_up("10", written)
    assert not _caught_up("11", written)  # a change from before the write, still on its way
    assert _caught_up("12", written)
    assert _caught_up("13", written)
    unnumbered = _Written(over="a", version="", status={})
    assert not _caught_up("a", unnumbered)
    assert _caught_up("b", unnumbered)


def test_a_condition_turning_true_drops_its_reason_in_the_patch_so_the_merge_keeps_none() -> None:
    """The strategic merge merges a condition field by field: a reason left out would stay on Ready=True
    and make the status look wrong, and be written again, on every pass."""
    the_pod = pod()
    state = PodState(PodRef("ns", "web", "u1"), "Pending")
    pending = podstatus.pod_status(the_pod, state, host_ip="10.0.0.1", now=NOW)
    assert conditions(pending)["Ready"]["reason"] == "ContainersNotReady"
    running_state = PodState(
        PodRef("ns", "web", "u1"),
        "Running",
        containers=(ContainerState("app", "img:1", ContainerStateKind.RUNNING, ready=True, started=True),),
    )
    stored = podstatus.merged({}, pending)
    running = podstatus.pod_status({**the_pod, "status": stored}, running_state, host_ip="10.0.0.1", now=NOW)
    assert conditions(running)["Ready"]["reason"] is None  # deletes the stored one
    after = podstatus.merged(stored, running)
    assert "reason" not in conditions(after)["Ready"]
    assert not podstatus.differs(after, running)
    again = podstatus.pod_status({**the_pod, "status": after}, running_state, host_ip="10.0.0.1", now=NOW)
    assert "reason" not in conditions(again)["Ready"]  # nothing to delete any more
    assert not podstatus.differs(after, again)


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {condition["type"]: condition for condition in status["conditions"]}
