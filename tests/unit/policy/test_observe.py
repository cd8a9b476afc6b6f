"""Reducing pods, nodes and Offloads as the apiserver returns them to what the decision reads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.policy.fixtures import NOW, policy
from vk_provider.kit.quantity import parse_quantity
from vk_provider.policy import observe
from vk_provider.policy import pods as pods_module
from vk_provider.policy.model import Gang
from vk_provider.policy.pods import gang_name, pod_gpus, template_gpus
from vk_provider.policy.signals import NoHealthSignal, NoPodGroups

pytestmark = pytest.mark.unit
GPU = "nvidia.com/gpu"


def pod(
    name: str, *, gpus: int = 1, node: str | None = None, priority: int = 100000, **extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "c", "resources": {"limits": {GPU: str(gpus)}}}],
        **extra.pop("spec", {}),
    }
    if node:
        spec["nodeName"] = node
    conditions = [] if node else [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return {
        "metadata": {"name": name, "namespace": "train", "labels": extra.pop("labels", {})},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending", "conditions": conditions},
    }


def test_gangs_sum_bound_and_unplaced_training_pods_by_job() -> None:
    job = {"batch.kubernetes.io/job-name": "pretrain"}
    pods = [
        pod("a", node="gpu-0", labels=job),
        pod("b", node="gpu-0", labels=job),
        pod("c", labels=job),
        pod("d", gpus=2, labels=job),
        pod("inference", node="gpu-0", priority=0),
        pod("elsewhere", node="cloud", labels={"batch.kubernetes.io/job-name": "other"}),
        pod("lone"),
    ]
    gangs = observe._gangs(policy(), pods, {"gpu-0"})
    assert sorted(gangs, key=lambda g: g.name) == [
        Gang("Pods", "train", "pod/lone", 1, 1),
        Gang("Pods", "train", "pretrain", 5, 3),
    ]


def test_gang_names_by_pod_group_job_or_label() -> None:
    member = pod("p", spec={"schedulingGroup": {"podGroupName": "pg"}}, labels={"team": "t1"})
    assert gang_name(member, "podGroup", None) == "pg"
    assert gang_name(member, "label", "team") == "t1"
    assert gang_name(member, "job", None) == "pod/p"


def test_a_pod_group_gang_is_counted_once_with_its_pods() -> None:
    pods = [Gang("Pods", "train", "pg", 6, 2)]
    groups = [Gang("PodGroup", "train", "pg", 6, 6), Gang("PodGroup", "train", "other", 4, 4)]
    merged = observe._merged(pods, groups)
    assert {(g.kind, g.name, g.unplaced_gpus) for g in merged} == {
        ("PodGroup", "pg", 6),
        ("PodGroup", "other", 4),
    }


def test_a_gang_its_pods_and_its_pod_group_see_alike_is_named_by_the_pod_group() -> None:
    # A Job whose pods join a PodGroup named after it (manifests/examples/training-job.yaml): all its
    # pods wait, so both see every GPU unplaced; the PodGroup names it, and counts it once.
    merged = observe._merged(
        [Gang("Pods", "train", "pretrain", 8, 8)], [Gang("PodGroup", "train", "pretrain", 8, 8)]
    )
    assert [(g.kind, g.name, g.unplaced_gpus) for g in merged] == [("PodGroup", "pretrain", 8)]
    # More unplaced pods than its PodGroup has seen (a PodGroup not yet looked at again) still win.
    merged = observe._merged(
        [Gang("Pods", "train", "pretrain", 8, 8)], [Gang("PodGroup", "train", "pretrain", 8, 6)]
    )
    assert [(g.kind, g.unplaced_gpus) for g in merged] == [("Pods", 8)]


def test_template_gpus_take_the_larger_of_containers_and_an_init_container() -> None:
    spec = {
        "containers": [{"resources": {"requests": {GPU: "1"}}}, {"resources": {"limits": {GPU: "2"}}}],
        "initContainers": [{"resources": {"limits": {GPU: "4"}}}],
    }
    assert template_gpus(spec, GPU) == 4
    assert template_gpus({"containers": [{}]}, GPU) == 0


def test_a_pool_node_knows_its_taints_who_put_them_and_what_blocks_it() -> None:
    node = {
        "metadata": {
            "name": "gpu-0",
            "annotations": {
                "offload.vk-provider.dev/policy-taints": json.dumps(["gpu.vk-provider.dev/reserved"])
            },
        },
        "spec": {
            "taints": [
                {"key": "gpu.vk-provider.dev/reserved", "effect": "NoSchedule"},
                {"key": "soft", "effect": "PreferNoSchedule"},
            ]
        },
        "status": {"allocatable": {GPU: "4"}, "capacity": {GPU: "4"}},
    }
    seen = observe._pool_node(policy(), node, [pod("a", node="gpu-0", gpus=3)], None)
    assert (seen.allocatable, seen.used, seen.free) == (4, 3, 1)
    assert seen.taints == frozenset({"gpu.vk-provider.dev/reserved"})
    assert seen.policy_taints == frozenset({"gpu.vk-provider.dev/reserved"})
    assert not seen.blocked
    cordoned = observe._pool_node(policy(), {**node, "spec": {"unschedulable": True}}, [], None)
    assert cordoned.blocked


def test_pool_problems_say_what_is_wrong() -> None:
    empty = observe._pool_problems(policy(), [])
    assert [p.reason for p in empty] == ["NoHomeNodes"]
    no_key = [{"metadata": {"name": "n"}, "status": {"capacity": {"example.com/fpga": "1"}}}]
    (unknown,) = observe._pool_problems(policy(), no_key)
    assert unknown.reason == "UnknownResource"
    assert "example.com/fpga" in unknown.message
    zero = [{"metadata": {"name": "n"}, "status": {"capacity": {GPU: "0"}}}]
    assert [p.reason for p in observe._pool_problems(policy(), zero)] == ["NoHomeGpus"]


def test_an_offload_view_reads_its_annotations_and_home_gpus() -> None:
    offload = {
        "metadata": {
            "name": "chat",
            "namespace": "ns",
            "annotations": {
                "offload.vk-provider.dev/flip-order": "7",
                "offload.vk-provider.dev/auto": "off",
                "offload.vk-provider.dev/hold-until": "soon-ish",
                "offload.vk-provider.dev/policy-flips": json.dumps(["2026-12-03T10:00:00Z"]),
            },
        },
        "spec": {"placement": "away", "home": {"deployment": "chat"}},
        "status": {"phase": "Succeeded", "homeReplicas": 4, "migrationStartedAt": "2026-12-03T10:00:01Z"},
    }
    deployment = {
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "chat"}},
            "template": {"spec": {"containers": [{"resources": {"limits": {GPU: "1"}}}]}},
        }
    }
    view = observe._offload_view(policy(), offload, deployment, [], {"gpu-0"}, unhealthy=set())
    assert (view.home_gpus, view.home_gpus_held, view.order, view.auto) == (4, 0, 7, False)
    assert view.hold_next_flip  # a hold it cannot read is still a person's hold
    assert len(view.policy_flips) == 1
    assert view.last_change is not None
    assert view.last_change.second == 1


class CountedPod(dict[str, Any]):
    """A pod that counts how often a pass reads its fields."""

    reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        CountedPod.reads += 1
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        CountedPod.reads += 1
        return super().__getitem__(key)


class ListingApi:
    """Answers the policy's GETs from fixed lists, by path."""

    def __init__(self, nodes: int, offloads: int, pods: int) -> None:
        self.answers: dict[str, Any] = {
            "/api/v1/nodes": [
                {
                    "metadata": {"name": f"gpu-{index}", "labels": {"pool": "home-gpu"}},
                    "status": {"capacity": {GPU: "8"}, "allocatable": {GPU: "8"}},
                }
                for index in range(nodes)
            ],
            "/api/v1/pods": [
                CountedPod(pod(f"p{index}", node=f"gpu-{index % max(nodes, 1)}")) for index in range(pods)
            ],
            "/apis/offload.vk-provider.dev/v1alpha1/offloads": [
                {
                    "metadata": {"name": f"llm-{index}", "namespace": "train", "uid": f"u{index}"},
                    "spec": {"home": {"deployment": f"llm-{index}"}},
                }
                for index in range(offloads)
            ],
            "/apis/batch/v1/jobs": [],
        }

    async def get(self, path: str, *, query: Any = None) -> dict[str, Any]:
        if path in self.answers:
            return {"items": self.answers[path]}
        name = path.rsplit("/", 1)[1]  # a home Deployment
        selector = {"matchLabels": {"app": name}}
        return {"metadata": {"name": name}, "spec": {"replicas": 1, "selector": selector, "template": {}}}


async def test_a_pass_reads_each_pod_a_bounded_number_of_times_whatever_the_nodes_and_offloads() -> None:
    async def reads_per_pod(nodes: int, offloads: int, pods: int) -> float:
        CountedPod.reads = 0
        await observe.observe(
            ListingApi(nodes, offloads, pods),  # type: ignore[arg-type]
            policy(),
            NOW,
            health=NoHealthSignal(),
            podgroups=NoPodGroups(),
        )
        return CountedPod.reads / pods

    small = await reads_per_pod(nodes=2, offloads=2, pods=200)
    large = await reads_per_pod(nodes=50, offloads=50, pods=200)
    # Scanned per node and per Offload, a pod was read some 2 x (nodes + offloads) times: 200 here.
    assert large <= small * 1.2, (small, large)


def test_a_pass_parses_each_spelling_of_a_quantity_once_and_none_for_pods_without_gpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[str] = []
    real = parse_quantity

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(pods_module, "parse_quantity", counting)
    pods_module._parsed.cache_clear()
    cpu_only = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]}
    assert [pod_gpus({"spec": cpu_only}, GPU) for _ in range(100)] == [0] * 100
    assert [pod_gpus(pod(f"p{index}", gpus=2), GPU) for index in range(100)] == [2] * 100
    assert parsed == ["2"]
