"""The policy loop carrying a warm-up out: written once, refreshed silently, said when it starts."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, cast

import pytest

from tests.unit.policy.fixtures import NOW
from vk_provider._kube.events import EventRecorder, InvolvedObject
from vk_provider.kit.kube import KubeApi, KubeApiError, resource_path
from vk_provider.offload.names import WARM_UNTIL_ANNOTATION, offload_path, offloads_path
from vk_provider.policy.controller import PolicyController
from vk_provider.policy.names import policies_path
from vk_provider.policy.signals import NoHealthSignal, NoPodGroups

pytestmark = pytest.mark.unit
GPU = "nvidia.com/gpu"
POLICY = {
    "metadata": {"name": "training-first", "uid": "u1", "generation": 1},
    "spec": {
        "offloads": {"selector": {"matchLabels": {"tier": "inference"}}},
        "homePool": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}},
        "warmUp": {"holdSeconds": 600},
    },
}


def gpu_pod(name: str, *, node: str | None, labels: Mapping[str, str]) -> dict[str, Any]:
    conditions = [] if node else [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    spec: dict[str, Any] = {
        "priority": 100000 if "batch.kubernetes.io/job-name" in labels else 0,
        "containers": [{"name": "c", "resources": {"limits": {GPU: "1"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": "ns" if node else "train", "labels": dict(labels)},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending", "conditions": conditions},
    }


class Cluster:
    """One pool node (2 GPUs) held by `chat`'s two home pods, one training pod that cannot fit, and
    the apiserver calls one policy pass makes."""

    def __init__(self) -> None:
        self.offload: dict[str, Any] = {
            "metadata": {
                "name": "chat",
                "namespace": "ns",
                "uid": "o1",
                "resourceVersion": "1",
                "annotations": {},
            },
            "spec": {"placement": "home", "home": {"deployment": "chat"}},
            "status": {"phase": "Idle"},
        }
        chat = {"app": "chat"}
        self.answers: dict[str, Any] = {
            policies_path(): {"items": [copy.deepcopy(POLICY)]},
            resource_path("v1", "nodes"): {
                "items": [
                    {
                        "metadata": {"name": "gpu-0", "labels": {"pool": "gpu"}},
                        "spec": {},
                        "status": {"capacity": {GPU: "2"}, "allocatable": {GPU: "2"}},
                    }
                ]
            },
            resource_path("v1", "pods"): {
                "items": [
                    gpu_pod("chat-0", node="gpu-0", labels=chat),
                    gpu_pod("chat-1", node="gpu-0", labels=chat),
                    gpu_pod("train-0", node=None, labels={"batch.kubernetes.io/job-name": "train"}),
                ]
            },
            resource_path("apps/v1", "deployments", namespace="ns", name="chat"): {
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": chat},
                    "template": {"spec": {"containers": [{"resources": {"limits": {GPU: "1"}}}]}},
                }
            },
            resource_path("batch/v1", "jobs"): {"items": []},
        }
        self.patches: list[dict[str, Any]] = []

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        if path == offloads_path():
            return {"items": [self.offload]}
        if path == offload_path("ns", "chat"):
            return self.offload
        if path in self.answers:
            return cast(dict[str, Any], self.answers[path])
        raise KubeApiError(404, "NotFound", path)  # no Kueue, no PodGroups

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        if path == offload_path("ns", "chat"):
            self.patches.append(body)
            self.offload["metadata"]["annotations"].update(body["metadata"]["annotations"])
        return {}


@dataclasses.dataclass
class Said:
    kind: str
    reason: str
    message: str


class Events:
    def __init__(self) -> None:
        self.said: list[Said] = []

    def record(self, involved: InvolvedObject, type: str, reason: str, message: str) -> None:
        self.said.append(Said(involved.kind, reason, message))


async def test_a_warm_up_is_said_when_it_starts_and_refreshed_silently_at_half_its_hold() -> None:
    cluster, events = Cluster(), Events()
    clock = [NOW]
    loop = PolicyController(
        cast(KubeApi, cluster),
        cast(EventRecorder, events),
        health=NoHealthSignal(),
        podgroups=NoPodGroups(),
        clock=lambda: clock[0],
    )

    def warm_ups() -> list[tuple[str, str]]:
        return [(said.kind, said.reason) for said in events.said if said.reason == "WarmUpRequested"]

    async def pass_at(moment: datetime) -> None:
        clock[0] = moment
        await loop.pass_once()

    await pass_at(NOW)
    assert [p["metadata"]["annotations"][WARM_UNTIL_ANNOTATION] for p in cluster.patches] == [
        "2026-12-03T12:10:00Z"
    ]
    assert sorted(warm_ups()) == [("Offload", "WarmUpRequested"), ("OffloadPolicy", "WarmUpRequested")]
    assert cluster.offload["spec"]["placement"] == "home"

    await pass_at(NOW + timedelta(seconds=10))  # 590 s left: nothing to write, nothing to say
    assert len(cluster.patches) == 1
    assert len(warm_ups()) == 2

    # Flips wait 30 s by default: a longer wait keeps this a warm-up story. Past half the hold: rewritten.
    cluster.answers[policies_path()]["items"][0]["spec"]["timing"] = {
        "flipOutAfterSeconds": 900,
        "flipBackAfterSeconds": 900,
    }
    await pass_at(NOW + timedelta(seconds=301))
    assert [p["metadata"]["annotations"][WARM_UNTIL_ANNOTATION] for p in cluster.patches][
        -1
    ] == "2026-12-03T12:15:01Z"
    assert len(warm_ups()) == 2  # the same warm-up going on: no new Event
