"""Gang demand from native PodGroups, read from listings as the apiserver returns them (a stub)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from vk_provider.kit.kube import KubeApi, KubeApiError
from vk_provider.policy.podgroups import PodGroupDemand, pod_gpu_request, unschedulable_pod_groups

pytestmark = pytest.mark.unit

GPU = "nvidia.com/gpu"


class Listings:
    """Answers GETs by path; an exception value is raised."""

    def __init__(self, answers: Mapping[str, dict[str, Any] | KubeApiError]) -> None:
        self.answers = answers
        self.paths: list[str] = []

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self.paths.append(path)
        answer = self.answers[path]
        if isinstance(answer, KubeApiError):
            raise answer
        return answer


def group(name: str, namespace: str, *, min_count: int, condition: dict[str, str] | None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
        "status": {"conditions": [condition] if condition else []},
    }


UNSCHEDULABLE = {
    "type": "PodGroupInitiallyScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "minCount (6) cannot be satisfied: 4 scheduled, 1 remaining",
    "lastTransitionTime": "2026-12-03T16:07:59Z",
}
SCHEDULED = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}
SCHEDULER_ERROR = {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "SchedulerError"}


def pod(
    name: str, group_name: str | None, *, gpus: str = "1", node: str | None = None, phase: str = "Pending"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"limits": {GPU: gpus}}}]}
    if group_name:
        spec["schedulingGroup"] = {"podGroupName": group_name}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}


async def test_an_unschedulable_gang_demands_the_gpus_of_its_unplaced_pods() -> None:
    pods = [pod(f"m{i}", "gang") for i in range(6)]
    pods += [
        pod("placed", "gang", node="gpu-a", phase="Running"),
        pod("done", "gang", phase="Succeeded"),
        pod("two", "gang", gpus="2"),
        pod("stranger", None, gpus="4"),
        pod("other-gang", "other", gpus="4"),
    ]
    api = Listings(
        {
            "/apis/scheduling.k8s.io/v1beta1/podgroups": {
                "items": [
                    group("gang", "train", min_count=6, condition=UNSCHEDULABLE),
                    group("other", "train", min_count=2, condition=SCHEDULED),
                    group("broken", "train", min_count=2, condition=SCHEDULER_ERROR),
                    group("new", "train", min_count=2, condition=None),
                ]
            },
            "/api/v1/namespaces/train/pods": {"items": pods},
        }
    )
    demands = await unschedulable_pod_groups(cast(KubeApi, api), GPU)
    assert demands.unavailable is None
    assert demands == [
        PodGroupDemand(
            namespace="train",
            name="gang",
            min_count=6,
            gpus=8,
            since=datetime(2026, 12, 3, 16, 7, 59, tzinfo=UTC),
            pods=8,
            unplaced=7,
            message=UNSCHEDULABLE["message"],
        )
    ]


async def test_no_podgroups_api_is_no_demand_and_a_reason() -> None:
    not_found = KubeApiError(404, "NotFound", "the server could not find the requested resource")
    api = Listings({"/apis/scheduling.k8s.io/v1beta1/podgroups": not_found})
    demands = await unschedulable_pod_groups(cast(KubeApi, api), GPU)
    assert demands == []
    assert demands.unavailable is not None
    assert "GenericWorkload" in demands.unavailable


async def test_forbidden_is_no_demand_and_a_reason() -> None:
    forbidden = KubeApiError(
        403, "Forbidden", 'podgroups.scheduling.k8s.io is forbidden: User "x" cannot list'
    )
    api = Listings({"/apis/scheduling.k8s.io/v1beta1/namespaces/train/podgroups": forbidden})
    demands = await unschedulable_pod_groups(cast(KubeApi, api), GPU, namespace="train")
    assert demands == []
    assert "forbidden" in str(demands.unavailable)


async def test_other_api_errors_raise() -> None:
    api = Listings({"/apis/scheduling.k8s.io/v1beta1/podgroups": KubeApiError(500, "InternalError", "etcd")})
    with pytest.raises(KubeApiError):
        await unschedulable_pod_groups(cast(KubeApi, api), GPU)


def test_pod_gpu_request_counts_as_the_scheduler_does() -> None:
    def containers(*requests: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"name": f"c{i}", "resources": request} for i, request in enumerate(requests)]

    assert (
        pod_gpu_request(
            {"spec": {"containers": containers({"requests": {GPU: "2"}}, {"limits": {GPU: "1"}})}}, GPU
        )
        == 3
    )
    assert pod_gpu_request({"spec": {"containers": containers({"requests": {"cpu": "1"}})}}, GPU) == 0
    init_heavier = {
        "containers": containers({"limits": {GPU: "1"}}),
        "initContainers": containers({"limits": {GPU: "4"}}),
    }
    assert pod_gpu_request({"spec": init_heavier}, GPU) == 4
    with_sidecar = {
        "containers": containers({"limits": {GPU: "1"}}),
        "initContainers": [{"name": "s", "restartPolicy": "Always", "resources": {"limits": {GPU: "1"}}}],
    }
    assert pod_gpu_request({"spec": with_sidecar}, GPU) == 2
    assert pod_gpu_request({"spec": {"containers": containers({"limits": {GPU: "banana"}})}}, GPU) == 0
