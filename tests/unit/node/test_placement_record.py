"""Where a pod was placed, and at what price, is recorded in its one status write, announced once, and
charged for; never a metadata write of its own.

Driven like test_pod_updates: the reconciler directly, an in-memory provider that reports a placement,
and a recording stand-in for the KubeApi wrapper.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.unit.node.test_pod_updates import CachedPods, RecordingApi, make_reconciler, pod
from vk_provider._kube.events import EventRecorder
from vk_provider.kit.placement import CHOSEN_CONDITION, chosen_annotation, recorded_placement
from vk_provider.kit.placement.annotations import CHOSEN_ANNOTATION
from vk_provider.kit.placement.cost import CostMeter
from vk_provider.node import podstatus
from vk_provider.node.costs import PodCosts
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.node.pods import _with_recorded_placement
from vk_provider.provider import ContainerSpec, Placement, PodRef, PodRequest, PodState, ProviderContext
from vk_providers.mock import MockProvider

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PLACEMENT = Placement(provider="runpod", price_per_hour=3.6, gpu_type="H100-80GB", gpu_count=1)


class PlacedMock(MockProvider):
    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        state = await super().get_pod_state(ref)
        return None if state is None else dataclasses.replace(state, placement=PLACEMENT)


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drained(events: EventRecorder) -> list[str]:
    """The reasons of the events queued since the last call (the recorder posts nothing here)."""
    reasons = []
    while not events._queue.empty():
        reasons.append(events._queue.get_nowait().reason)
    return reasons


def chosen_messages(api: RecordingApi) -> list[str]:
    """The placement records written, in status patches."""
    return [
        condition["message"]
        for _, body in api.patches
        for condition in (body.get("status") or {}).get("conditions", [])
        if condition["type"] == CHOSEN_CONDITION
    ]


def watched_back(cached: dict[str, Any], api: RecordingApi, version: str) -> dict[str, Any]:
    """The pod as the watch brings it after the node's last status patch."""
    after = copy.deepcopy(cached)
    after["status"] = podstatus.merged(after.get("status") or {}, api.patches[-1][1]["status"])
    after["metadata"]["resourceVersion"] = version
    return after


async def test_the_placement_rides_in_the_one_status_write_is_announced_once_and_charged(
    tmp_path: Path,
) -> None:
    api = RecordingApi()
    events = EventRecorder(api, host="n")  # type: ignore[arg-type]
    metrics = DaemonMetrics()
    pods = CachedPods()
    provider = PlacedMock(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    reconciler = make_reconciler(api, provider, pods, events=events, metrics=metrics)
    clock = ManualClock()
    reconciler._costs = PodCosts(metrics, CostMeter(clock))  # a clock the test moves
    pods.objects["u1"] = {**pod(), "metadata": {**pod()["metadata"], "resourceVersion": "1"}}
    await reconciler.reconcile("u1")
    assert [path for path, _ in api.patches] == ["/api/v1/namespaces/ns/pods/web/status"]
    (written,) = chosen_messages(api)
    assert json.loads(written) == {
        "provider": "runpod",
        "pricePerHour": 3.6,
        "gpuType": "H100-80GB",
        "gpuCount": 1,
    }
    assert [reason for reason in drained(events) if reason == "Placed"] == ["Placed"]

    await reconciler.reconcile("u1")  # the provider's push, before the watch brings the write back
    assert len(api.patches) == 1
    assert "Placed" not in drained(events)

    pods.objects["u1"] = watched_back(pods.objects["u1"], api, "2")
    clock.now = 1800.0  # half an hour running at $3.60/h
    await reconciler.reconcile("u1")
    assert len(api.patches) == 1  # already written: not again, and no second event
    assert "Placed" not in drained(events)
    exposition = metrics.exposition().decode()
    assert 'vk_provider_pod_cost_usd_total{namespace="ns",pod="web",provider="runpod"} 1.8' in exposition


def test_the_record_is_read_from_the_status_condition_and_else_from_an_older_nodes_annotation() -> None:
    recorded = chosen_annotation(PLACEMENT)
    in_status = {
        **pod(),
        "status": {"conditions": [{"type": CHOSEN_CONDITION, "status": "True", "message": recorded}]},
    }
    assert recorded_placement(in_status) == PLACEMENT
    older = pod()
    older["metadata"]["annotations"][CHOSEN_ANNOTATION] = recorded
    assert recorded_placement(older) == PLACEMENT
    assert recorded_placement(pod()) is None
    unreadable = {**pod(), "status": {"conditions": [{"type": CHOSEN_CONDITION, "message": "{"}]}}
    assert recorded_placement(unreadable) is None


def test_a_placement_an_older_nodes_annotation_records_is_not_written_again() -> None:
    older = pod()
    older["metadata"]["annotations"][CHOSEN_ANNOTATION] = chosen_annotation(PLACEMENT)
    state = PodState(PodRef("ns", "web", "u1"), "Running", placement=PLACEMENT)
    status = podstatus.pod_status(older, state, host_ip="10.0.0.1", now=NOW)
    assert CHOSEN_CONDITION not in [condition["type"] for condition in status["conditions"]]
    moved = dataclasses.replace(PLACEMENT, price_per_hour=2.0)
    status = podstatus.pod_status(
        older, dataclasses.replace(state, placement=moved), host_ip="10.0.0.1", now=NOW
    )
    (chosen,) = [condition for condition in status["conditions"] if condition["type"] == CHOSEN_CONDITION]
    assert recorded_placement({**older, "metadata": {}, "status": {"conditions": [chosen]}}) == moved


def test_the_provider_is_handed_the_recorded_placement_as_the_annotation_it_reads() -> None:
    recorded = chosen_annotation(PLACEMENT)
    placed = {
        **pod(),
        "status": {"conditions": [{"type": CHOSEN_CONDITION, "status": "True", "message": recorded}]},
    }
    request = PodRequest(PodRef("ns", "web", "u1"), "n", (ContainerSpec(name="app", image="img:1"),))
    assert _with_recorded_placement(request, placed).annotations == {CHOSEN_ANNOTATION: recorded}
    assert _with_recorded_placement(request, pod()) is request
