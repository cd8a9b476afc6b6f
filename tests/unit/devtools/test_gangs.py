"""The demo's training is one gang, and what the demo reads of it: the PodGroup's state, binding times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from vk_devtools.devcluster import gangs, traffic

CREATED = datetime(2026, 12, 6, 10, 0, 0, tzinfo=UTC)


def pod(name: str, bound: str | None) -> dict[str, Any]:
    """A pod bound at `bound` (an RFC 3339 time), or pending."""
    if bound is None:
        return {
            "metadata": {"name": name},
            "spec": {},
            "status": {
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
            },
        }
    condition = {"type": "PodScheduled", "status": "True", "lastTransitionTime": bound}
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": "local-gpu"},
        "status": {"conditions": [condition]},
    }


def group(status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    condition = {"type": "PodGroupInitiallyScheduled", "status": status, "reason": reason, "message": message}
    return {"metadata": {"name": "pretrain"}, "status": {"conditions": [condition]}}


def test_the_example_training_is_a_podgroup_of_all_its_pods_created_before_its_job() -> None:
    podgroup, job = traffic.load_manifests(traffic.TRAINING_JOB)
    assert (podgroup["apiVersion"], podgroup["kind"]) == ("scheduling.k8s.io/v1beta1", "PodGroup")
    assert job["kind"] == "Job"
    template = job["spec"]["template"]["spec"]
    assert template["schedulingGroup"] == {"podGroupName": podgroup["metadata"]["name"]}
    # All or nothing: the gang is every pod the Job runs at once, and named as the Job so that the
    # policy counts its pods and its PodGroup as one gang.
    assert podgroup["spec"]["schedulingPolicy"]["gang"]["minCount"] == job["spec"]["parallelism"] == 8
    assert podgroup["metadata"]["name"] == job["metadata"]["name"]


def test_a_gang_waits_while_its_podgroup_is_unschedulable_and_is_admitted_once_scheduled() -> None:
    waiting = group("False", "Unschedulable", "minCount (8) cannot be satisfied")
    assert gangs.waiting(waiting) == "minCount (8) cannot be satisfied"
    assert not gangs.admitted(waiting)
    scheduled = group("True", "Scheduled")
    assert gangs.waiting(scheduled) is None
    assert gangs.admitted(scheduled)
    assert gangs.waiting({"metadata": {"name": "pretrain"}}) is None  # not yet looked at by the scheduler
    assert not gangs.admitted({"metadata": {"name": "pretrain"}})


def test_binding_times_count_bound_pods_in_seconds_after_the_jobs_creation() -> None:
    pods = [pod("a", "2026-12-06T10:00:14Z"), pod("b", None), pod("c", "2026-12-06T10:00:13Z")]
    bound = gangs.bindings(pods, CREATED)
    assert bound.seconds == (13, 14)
    assert bound.describe() == (
        "2 pods bound 13-14 s after the Job's creation (spread 1 s; PodScheduled times, whole seconds)"
    )
    assert gangs.bindings([pod("a", "2026-12-06T10:00:36Z")], CREATED).describe() == (
        "1 pods bound 36 s after the Job's creation (spread 0 s; PodScheduled times, whole seconds)"
    )
    assert gangs.bindings([pod("b", None)], CREATED).describe() == "no pod bound"
