"""What the warm-up reads and writes: declared gang sizes, an Offload's warm-up and migration stage,
and the annotations written on a fresh read, as a flip would be."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, cast

import pytest

from tests.unit.policy.fixtures import NOW, policy
from tests.unit.policy.test_observe import pod
from vk_provider.kit.kube import KubeApi, KubeApiError
from vk_provider.policy import actuate, observe
from vk_provider.policy.podgroups import PodGroupDemand

pytestmark = pytest.mark.unit
GPU = "nvidia.com/gpu"


def job(name: str, *, parallelism: int = 4, gpus: int = 2, **spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "resources": {"limits": {GPU: str(gpus)}}}]}}
    status = spec.pop("status", {})
    return {
        "metadata": {"name": name, "namespace": "train"},
        "spec": {"parallelism": parallelism, "template": template, **spec},
        "status": status,
    }


@pytest.mark.parametrize(
    ("the_job", "foreseen"),
    [
        (job("train"), 6),  # 4 pods x 2 GPUs, one pod (2) seen
        (job("train", completions=2, status={"succeeded": 1}), 0),  # one left to run: it is there
        (job("train", suspend=True), 0),  # Kueue holds it: its Workload is the sign
        (job("other"), 0),  # another Job's size says nothing of this gang
    ],
)
def test_a_job_s_pods_not_yet_created_are_foreseen(the_job: dict[str, Any], foreseen: int) -> None:
    gangs = observe._gangs(
        policy(), [pod("p0", gpus=2, labels={"batch.kubernetes.io/job-name": "train"})], set()
    )
    [declared] = observe.with_declared_jobs(gangs, [the_job], policy())
    assert (declared.gpus, declared.unplaced_gpus, declared.foreseen_gpus) == (2, 2, foreseen)


def test_a_pod_group_short_of_min_count_foresees_its_missing_members() -> None:
    group = PodGroupDemand("train", "g", min_count=4, gpus=2, since=None, pods=1, unplaced=1)
    assert group.missing_gpus == 6
    full = PodGroupDemand("train", "g", min_count=4, gpus=8, since=None, pods=4, unplaced=4)
    assert full.missing_gpus == 0


def test_an_offload_view_reads_its_warm_up_and_its_migration_stage() -> None:
    offload: dict[str, Any] = {
        "metadata": {
            "name": "chat",
            "namespace": "ns",
            "annotations": {
                "offload.vk-provider.dev/warm-until": "2026-12-03T12:10:00Z",
                "offload.vk-provider.dev/warmed-by": "policy/training-first",
            },
        },
        "spec": {"placement": "away"},
        "status": {
            "phase": "Preparing",
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "Serving"},
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "WaitingForReplicas",
                    "message": "0 of 1 away replicas ready (of 1 wanted)",
                },
            ],
        },
    }
    view = observe._offload_view(policy(), offload, None, [], set(), unhealthy=set())
    assert view.warm_until == NOW + timedelta(minutes=10)
    assert view.warmed_by == "policy/training-first"
    assert (view.progress_reason, view.progress_message) == (
        "WaitingForReplicas",
        "0 of 1 away replicas ready (of 1 wanted)",
    )
    offload["metadata"]["annotations"]["offload.vk-provider.dev/warm-until"] = "tonight"
    offload["status"]["conditions"][1]["status"] = "False"
    unread = observe._offload_view(policy(), offload, None, [], set(), unhealthy=set())
    assert (unread.warm_until, unread.progress_reason, unread.progress_message) == (None, None, "")


class OneOffload:
    """The apiserver for one Offload: GET returns it, a merge PATCH applies (annotations merged)."""

    def __init__(self, annotations: Mapping[str, str], placement: str = "home") -> None:
        self.offload: dict[str, Any] = {
            "metadata": {
                "name": "chat",
                "namespace": "ns",
                "resourceVersion": "7",
                "annotations": dict(annotations),
            },
            "spec": {"placement": placement},
        }
        self.patches: list[dict[str, Any]] = []

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.offload

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        body = kwargs["body"]
        if body["metadata"]["resourceVersion"] != self.offload["metadata"]["resourceVersion"]:
            raise KubeApiError(409, "Conflict", "changed")
        self.patches.append(body)
        self.offload["metadata"]["annotations"].update(body["metadata"]["annotations"])
        return self.offload


async def test_a_warm_up_writes_both_annotations_with_the_read_s_resource_version() -> None:
    api = OneOffload({})
    until = NOW + timedelta(minutes=10)
    await actuate.set_warm_until(api, "ns", "chat", until, policy="training-first", now=NOW)  # type: ignore[arg-type]
    [patch] = api.patches
    assert patch["metadata"] == {
        "annotations": {
            "offload.vk-provider.dev/warm-until": "2026-12-03T12:10:00Z",
            "offload.vk-provider.dev/warmed-by": "policy/training-first",
        },
        "resourceVersion": "7",
    }
    assert "spec" not in patch  # a warm-up never moves anything


@pytest.mark.parametrize(
    ("annotations", "placement", "why"),
    [
        ({"offload.vk-provider.dev/hold-until": "next-flip"}, "home", "a person holds it"),
        ({"offload.vk-provider.dev/auto": "off"}, "home", "automatic flips are off"),
        ({}, "away", "its placement is now away"),
        ({"offload.vk-provider.dev/warm-until": "2026-12-03T13:00:00Z"}, "home", "a later warm-until"),
    ],
)
async def test_a_warm_up_follows_the_rules_of_a_flip(
    annotations: dict[str, str], placement: str, why: str
) -> None:
    api = OneOffload(annotations, placement)
    with pytest.raises(actuate.Refused, match=why):
        await actuate.set_warm_until(
            cast(KubeApi, api), "ns", "chat", NOW + timedelta(minutes=10), policy="training-first", now=NOW
        )
    assert api.patches == []
