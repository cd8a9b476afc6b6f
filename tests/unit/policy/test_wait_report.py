"""How long training waits and for what: the stages, the status, the metrics and the Kueue message."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.policy.fixtures import LONG_AGO, NOW, gang, mine, node, offload, policy
from tests.unit.test_kueue_admission import CHECK, GPU, policy_object, recorder, view, workload
from vk_provider._kube.events import EventRecorder
from vk_provider.policy.admission.checks import AdmissionChecks, cluster_queue_checks
from vk_provider.policy.admission.verdict import judge
from vk_provider.policy.admission.workload import read_workload
from vk_provider.policy.metrics import PolicyMetrics
from vk_provider.policy.model import Gang, History, Observed
from vk_provider.policy.spec import parse_policy
from vk_provider.policy.status import CLOCK_REFRESH_SECONDS, demand_entry, needs_write
from vk_provider.policy.waiting import Stage, Wait, by_stage, waits

pytestmark = pytest.mark.unit

FULL = (node("a", used=4), node("b", used=4))
SEEN = History(
    shortfall_since={"Pods:train/job": NOW - timedelta(seconds=5)},
    demand_since={"Pods:train/job": NOW - timedelta(seconds=42)},
)
DUE = History(shortfall_since={"Pods:train/job": LONG_AGO}, demand_since={"Pods:train/job": LONG_AGO})
PREPARING = "WaitingForReplicas"


def moved(phase: str, **fields: Any) -> Any:
    fields.setdefault("home_gpus_held", 0)
    return offload("llm", 4, placement="away", phase=phase, **mine(**fields))


@pytest.mark.parametrize(
    ("offloads", "nodes", "history", "stage"),
    [
        ((moved("Preparing", progress_reason=PREPARING),), FULL, DUE, Stage.WARMING_AWAY),
        ((moved("Shifting"),), FULL, DUE, Stage.SHIFTING_TRAFFIC),
        ((moved("Paused"),), FULL, DUE, Stage.SHIFTING_TRAFFIC),
        ((moved("Finalizing"),), FULL, DUE, Stage.PODS_LEAVING),
        ((moved("Succeeded", home_gpus_held=4),), FULL, DUE, Stage.PODS_LEAVING),
        ((moved("Succeeded"),), (node("a", used=0), node("b", used=4)), DUE, Stage.SCHEDULING),
        ((offload("other", 4),), FULL, SEEN, Stage.CONFIRMING),
        ((offload("off", 4, auto=False),), FULL, DUE, Stage.NO_CANDIDATE),
    ],
)
def test_the_stage_a_gang_waits_at(offloads: Any, nodes: Any, history: History, stage: Stage) -> None:
    observed = Observed(gangs=(gang("job", 4),), nodes=nodes, offloads=offloads)
    found = waits(NOW, policy(), observed, history)
    assert found["Pods:train/job"].stage is stage


def test_the_earliest_stage_of_several_moves_is_what_the_gang_waits_on() -> None:
    warming = dataclasses.replace(moved("Preparing", progress_message="1 of 2 away replicas ready"), name="a")
    shifting = dataclasses.replace(moved("Shifting"), name="b")
    observed = Observed(gangs=(gang("job", 8),), nodes=FULL, offloads=(shifting, warming))
    wait = waits(NOW, policy(), observed, DUE)["Pods:train/job"]
    assert (wait.stage, wait.offloads) == (Stage.WARMING_AWAY, ("ns/a",))
    assert wait.message() == "waiting for GPUs: warming the away side of ns/a (1 of 2 away replicas ready)"


def test_an_offload_this_pass_moved_away_is_what_the_gang_waits_on_not_no_candidate() -> None:
    # Observed before the flip: still home, not yet flipped by anyone. The pass's flip is what counts.
    observed = Observed(gangs=(gang("job", 4),), nodes=FULL, offloads=(offload("llm", 4),))
    assert waits(NOW, policy(), observed, DUE)["Pods:train/job"].stage is Stage.NO_CANDIDATE
    wait = waits(NOW, policy(), observed, DUE, flipped_out={"ns/llm"})["Pods:train/job"]
    assert (wait.stage, wait.offloads) == (Stage.WARMING_AWAY, ("ns/llm",))


def test_only_moves_of_this_policy_count_and_placed_gangs_do_not_wait() -> None:
    theirs = offload("llm", 4, placement="away", phase="Preparing", flipped_by="policy/other")
    observed = Observed(gangs=(gang("job", 4), gang("placed", 0, gpus=4)), nodes=FULL, offloads=(theirs,))
    found = waits(NOW, policy(), observed, DUE)
    assert set(found) == {"Pods:train/job"}
    assert found["Pods:train/job"].stage is Stage.NO_CANDIDATE


def test_the_status_reports_seconds_waited_stage_and_offloads() -> None:
    observed = Observed(gangs=(gang("job", 4),), nodes=FULL, offloads=(moved("Shifting"),))
    found = waits(NOW, policy(), observed, SEEN)
    [entry] = demand_entry(observed, SEEN, found)["gangs"]
    assert (entry["waitingSeconds"], entry["waitingFor"], entry["waitingOn"]) == (
        42,
        "ShiftingTraffic",
        ["ns/llm"],
    )
    [quiet] = demand_entry(observed, SEEN)["gangs"]
    assert "waitingFor" not in quiet


def test_the_wait_metrics_histogram_and_gangs_per_stage() -> None:
    registry = CollectorRegistry()
    metrics = PolicyMetrics(registry)
    metrics.waited("p", 25.0)
    found = {
        "a": Wait(Stage.WARMING_AWAY, 3),
        "b": Wait(Stage.WARMING_AWAY, 9),
        "c": Wait(Stage.SCHEDULING, 1),
    }
    metrics.waiting("p", by_stage(found))

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"policy": "p", **labels})

    assert sample("vk_provider_policy_training_wait_seconds_count") == 1
    assert sample("vk_provider_policy_training_wait_seconds_bucket", le="30.0") == 1
    assert sample("vk_provider_policy_training_wait_seconds_bucket", le="20.0") == 0
    assert sample("vk_provider_policy_training_waiting_gangs", stage="WarmingAway") == 2
    assert sample("vk_provider_policy_training_waiting_gangs", stage="Scheduling") == 1
    assert sample("vk_provider_policy_training_waiting_gangs", stage="NoCandidate") == 0


def test_the_kueue_check_message_names_the_stage_and_is_written_only_when_it_changes() -> None:
    waiting = view()  # 2 GPUs, Pending at our check since NOW
    observed = Observed(nodes=FULL)
    wait = Wait(Stage.WARMING_AWAY, 10, ("serving/llm",), "0 of 1 away replicas ready")
    [verdict] = judge(NOW, policy(), [CHECK], [waiting], observed, waits={"Workload:train/job-train-1": wait})
    assert verdict.state == "Pending"
    assert (
        verdict.message
        == "waiting for GPUs: warming the away side of serving/llm (0 of 1 away replicas ready)"
    )
    told = workload()
    told["status"]["admissionChecks"][0]["message"] = verdict.message
    same = {"Workload:train/job-train-1": wait}
    assert judge(NOW, policy(), [CHECK], [read_workload(told, GPU)], observed, waits=same) == []


async def test_a_pending_message_keeps_its_transition_time_and_posts_no_event() -> None:
    started = NOW - timedelta(seconds=90)
    api = recorder(
        [{"metadata": {"name": CHECK}, "spec": {"controllerName": "offload.vk-provider.dev/gpu-pressure"}}],
        [workload(since=started)],
    )
    events = EventRecorder(api, host="n")  # type: ignore[arg-type]
    checks = AdmissionChecks(api, events)  # type: ignore[arg-type]
    raw = policy_object("training-first", [CHECK])
    await checks.refresh([raw], NOW)
    api.patches.clear()
    wait = Wait(Stage.SHIFTING_TRAFFIC, 90, ("serving/llm",))
    await checks.settle(
        parse_policy(raw), Observed(nodes=FULL), NOW, waits={"Workload:train/job-train-1": wait}
    )
    [(_, body, _, _)] = api.patches
    [entry] = body["status"]["admissionChecks"]
    assert entry["state"] == "Pending"
    assert entry["message"] == "waiting for GPUs: shifting traffic off serving/llm"
    assert entry["lastTransitionTime"] == "2026-12-03T11:58:30Z"  # judge's Retry clock keeps counting


async def test_a_workload_queued_for_a_cluster_queue_with_our_check_is_foreseen_demand() -> None:
    queued = workload("queued", quota=False, state=None)
    queued["spec"]["queueName"] = "team"
    elsewhere = workload("elsewhere", quota=False, state=None)
    elsewhere["spec"]["queueName"] = "other"
    api = recorder(
        [{"metadata": {"name": CHECK}, "spec": {"controllerName": "offload.vk-provider.dev/gpu-pressure"}}],
        [queued, elsewhere],
        cluster_queues=[
            {
                "metadata": {"name": "gpus"},
                "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]}},
            },
            {"metadata": {"name": "cpus"}, "spec": {}},
        ],
        local_queues=[
            {"metadata": {"name": "team", "namespace": "train"}, "spec": {"clusterQueue": "gpus"}},
            {"metadata": {"name": "other", "namespace": "train"}, "spec": {"clusterQueue": "cpus"}},
        ],
    )
    checks = AdmissionChecks(api, EventRecorder(api, host="n"))  # type: ignore[arg-type]
    raw = policy_object("training-first", [CHECK])
    await checks.refresh([raw], NOW)
    spec = parse_policy(raw)
    assert checks.queued(spec) == [Gang("Workload", "train", "queued", 2, 0, foreseen_gpus=2)]
    assert await checks.demand(spec) == []  # not at the check yet: no demand, no flip


def test_a_cluster_queue_lists_its_checks_either_way() -> None:
    assert cluster_queue_checks({"spec": {"admissionChecks": ["a"]}}) == {"a"}
    strategy = {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "b"}, {"onFlavors": []}]}}}
    assert cluster_queue_checks(strategy) == {"b"}


def test_the_message_while_home_pods_leave_names_the_offload_in_plain_words() -> None:
    wait = Wait(Stage.PODS_LEAVING, 3.0, ("default/tokens",))
    assert wait.message() == "waiting for GPUs: the home pods of default/tokens are leaving"


def test_a_wait_clock_alone_rewrites_the_status_at_most_every_half_minute() -> None:
    def body(waited: int, *, gpus: int = 4) -> dict[str, Any]:
        gangs = [{"name": "job", "gpus": gpus, "waitingSeconds": waited, "waitingFor": "ShiftingTraffic"}]
        return {"demand": {"gpus": gpus, "gangs": gangs}, "conditions": []}

    assert needs_write(None, body(0), seconds_since_written=0)
    assert not needs_write(body(2), body(2), seconds_since_written=300)
    assert not needs_write(body(2), body(4), seconds_since_written=2)  # only the clock moved
    assert not needs_write(body(2), body(30), seconds_since_written=CLOCK_REFRESH_SECONDS - 1)
    assert needs_write(body(2), body(32), seconds_since_written=CLOCK_REFRESH_SECONDS)
    assert needs_write(body(2, gpus=4), body(4, gpus=8), seconds_since_written=2)  # something else changed
