"""Where a pod was placed, and at what price, is written on it once, announced once, and charged for.

Driven like test_pod_updates: the reconciler directly, an in-memory provider that reports a placement,
and a recording stand-in for the KubeApi wrapper.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

from tests.unit.node.test_pod_updates import CachedPods, RecordingApi, make_reconciler, pod
from vk_provider._kube.events import EventRecorder
from vk_provider.kit.placement.annotations import CHOSEN_ANNOTATION
from vk_provider.kit.placement.cost import CostMeter
from vk_provider.node.costs import PodCosts
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.provider import Placement, PodRef, PodState, ProviderContext
from vk_providers.mock import MockProvider

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


def chosen_patches(api: RecordingApi) -> list[str]:
    return [
        body["metadata"]["annotations"][CHOSEN_ANNOTATION]
        for _, body in api.patches
        if CHOSEN_ANNOTATION in (body.get("metadata") or {}).get("annotations", {})
    ]


async def test_the_placement_is_annotated_announced_and_charged_while_running(tmp_path: Path) -> None:
    api = RecordingApi()
    events = EventRecorder(api, host="n")  # type: ignore[arg-type]
    metrics = DaemonMetrics()
    pods = CachedPods()
    provider = PlacedMock(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    reconciler = make_reconciler(api, provider, pods, events=events, metrics=metrics)
    clock = ManualClock()
    reconciler._costs = PodCosts(metrics, CostMeter(clock))  # a clock the test moves
    pods.objects["u1"] = pod()
    await reconciler.reconcile("u1")
    (written,) = chosen_patches(api)
    assert json.loads(written) == {
        "provider": "runpod",
        "pricePerHour": 3.6,
        "gpuType": "H100-80GB",
        "gpuCount": 1,
    }
    assert [reason for reason in drained(events) if reason == "Placed"] == ["Placed"]

    annotated = copy.deepcopy(pods.objects["u1"])
    annotated["metadata"]["annotations"][CHOSEN_ANNOTATION] = written
    pods.objects["u1"] = annotated
    clock.now = 1800.0  # half an hour running at $3.60/h
    await reconciler.reconcile("u1")
    assert len(chosen_patches(api)) == 1  # already written: not again, and no second event
    assert "Placed" not in drained(events)
    exposition = metrics.exposition().decode()
    assert 'vk_provider_pod_cost_usd_total{namespace="ns",pod="web",provider="runpod"} 1.8' in exposition
