"""Our Kueue AdmissionCheck: reading Workloads, the verdicts, the demand it hands the policy, and the
controller's writes (against a recording stand-in for the apiserver's few calls)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.policy.fixtures import NOW, gang, node, offload, policy, sick
from vk_provider._kube.events import EventRecorder
from vk_provider.kit.kube import KubeApiError
from vk_provider.kit.timestamps import format_timestamp
from vk_provider.policy.admission.checks import APPLY_PATCH, AdmissionChecks, resolve
from vk_provider.policy.admission.names import (
    CONTROLLER_NAME,
    admission_checks_path,
    queues_path,
    workloads_path,
)
from vk_provider.policy.admission.verdict import demand_gangs, judge
from vk_provider.policy.admission.workload import read_workload
from vk_provider.policy.decide import Action, decide
from vk_provider.policy.metrics import PolicyMetrics
from vk_provider.policy.model import Gang, History, Observed
from vk_provider.policy.spec import InvalidPolicy, parse_policy
from vk_provider.policy.waiting import Stage, Wait

pytestmark = pytest.mark.unit

GPU = "nvidia.com/gpu"
CHECK = "gpu-reclaim"


def pod_set(name: str = "main", count: int = 2, gpus: Any = 1, **template: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "c",
        "resources": {"requests": {GPU: gpus} if gpus is not None else {}},
    }
    return {"name": name, "count": count, "template": {"spec": {"containers": [container], **template}}}


def workload(
    name: str = "job-train-1",
    *,
    pod_sets: Any = None,
    state: str | None = "Pending",
    since: Any = NOW,
    quota: bool = True,
    admitted: bool = False,
    finished: bool = False,
    check: str = CHECK,
) -> dict[str, Any]:
    conditions = []
    if quota:
        conditions.append({"type": "QuotaReserved", "status": "True"})
    if admitted:
        conditions.append({"type": "Admitted", "status": "True"})
    if finished:
        conditions.append({"type": "Finished", "status": "True"})
    checks = []
    if state is not None:
        checks.append(
            {"name": check, "state": state, "message": "", "lastTransitionTime": format_timestamp(since)}
        )
    return {
        "metadata": {"name": name, "namespace": "train", "uid": f"uid-{name}"},
        "spec": {"podSets": [pod_set()] if pod_sets is None else pod_sets},
        "status": {"conditions": conditions, "admissionChecks": checks},
    }


def view(**fields: Any) -> Any:
    return read_workload(workload(**fields), GPU)


def observed(*nodes: Any) -> Observed:
    return Observed(nodes=tuple(nodes) or (node("gpu-a", 4), node("gpu-b", 4)))


# --- reading a Workload ---------------------------------------------------------------------------


def test_demand_is_count_times_what_one_pod_requests() -> None:
    read = view(pod_sets=[pod_set("workers", count=3, gpus=2), pod_set("launcher", count=1, gpus=None)])
    assert (read.gpus, read.pod_sets, read.problem) == (6, ("workers", "launcher"), None)
    assert read.quota_reserved
    assert not read.admitted
    assert read.state_of(CHECK) == "Pending"


def test_init_containers_count_as_the_scheduler_counts_them() -> None:
    init = {"name": "warm", "resources": {"requests": {GPU: "4"}}}
    read = view(pod_sets=[pod_set(count=2, gpus=1, initContainers=[init])])
    assert read.gpus == 8  # the init container's 4 is the peak of each pod


@pytest.mark.parametrize(
    ("pod_sets", "words"),
    [
        ([], "spec.podSets is missing or empty"),
        ("main", "spec.podSets is missing or empty"),
        (["main"], "spec.podSets[0] is 'main', not an object"),
        ([{"count": 1, "template": {"spec": {}}}], "has no name"),
        ([{"name": "main", "count": "two", "template": {"spec": {}}}], "count 'two'"),
        ([{"name": "main", "count": -1, "template": {"spec": {}}}], "count -1"),
        ([{"name": "main", "count": 1}], "has no pod template"),
        ([pod_set(gpus="lots")], "'lots', not a quantity"),
        ([pod_set(gpus="500m")], "'500m', not a whole number"),
    ],
)
def test_a_malformed_pod_set_is_a_problem_in_words_not_a_crash(pod_sets: Any, words: str) -> None:
    read = view(pod_sets=pod_sets)
    assert read.problem is not None
    assert words in read.problem
    assert read.gpus == 0


# --- demand handed to the policy ------------------------------------------------------------------


def test_a_pending_workload_with_quota_is_an_immediate_gang_of_all_its_gpus() -> None:
    gangs = demand_gangs([CHECK], [view()])
    assert gangs == [Gang("Workload", "train", "job-train-1", 2, 2, immediate=True)]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"state": "Ready"}, [(2, 0)]),  # let through: holds the reservation while it runs
        ({"state": "Ready", "finished": True}, []),
        ({"state": "Retry"}, []),
        ({"state": "Rejected"}, []),
        ({"quota": False}, []),  # Kueue has not reserved quota: not ours to judge yet
        ({"check": "other-check"}, []),
        ({"pod_sets": [pod_set(gpus=None)]}, []),  # needs no GPU
        ({"pod_sets": [pod_set(gpus="x")]}, []),
    ],
)
def test_which_workloads_are_demand(fields: dict[str, Any], expected: list[tuple[int, int]]) -> None:
    assert [(g.gpus, g.unplaced_gpus) for g in demand_gangs([CHECK], [view(**fields)])] == expected


def test_a_workload_gang_flips_out_at_once_without_waiting_flip_out_after() -> None:
    spec = policy(flip_out_after_seconds=300)
    work = Gang("Workload", "train", "wl", 4, 4, immediate=True)
    state = Observed(gangs=(work,), nodes=(node("gpu-a", 4, used=4),), offloads=(offload("tokens", 4),))
    outcome = decide(NOW, spec, state, History())
    assert [d.action for d in outcome.decisions if d.action is Action.FLIP_OUT] == [Action.FLIP_OUT]
    pods = Observed(gangs=(gang("job", 4),), nodes=state.nodes, offloads=state.offloads)
    assert Action.FLIP_OUT not in [d.action for d in decide(NOW, spec, pods, History()).decisions]


# --- verdicts -------------------------------------------------------------------------------------


def test_ready_with_the_reservation_toleration_and_the_pool_selector_once_free_gpus_cover_it() -> None:
    [verdict] = judge(NOW, policy(), [CHECK], [view()], observed())
    assert verdict.state == "Ready"
    assert verdict.pod_set_updates == (
        {
            "name": "main",
            "tolerations": [
                {
                    "key": "gpu.vk-provider.dev/reserved",
                    "operator": "Equal",
                    "value": "training",
                    "effect": "NoSchedule",
                }
            ],
            "nodeSelector": {"pool": "home-gpu"},
        },
    )


def test_a_pool_chosen_by_expressions_gets_the_toleration_only() -> None:
    raw_policy = {
        "metadata": {"name": "p"},
        "spec": {
            "offloads": {"selector": {}},
            "homePool": {"nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}},
        },
    }
    [verdict] = judge(NOW, parse_policy(raw_policy), [CHECK], [view()], observed())
    assert "nodeSelector" not in verdict.pod_set_updates[0]


def test_pending_while_the_gpus_are_still_held_then_retry_after_the_configured_time() -> None:
    busy = observed(node("gpu-a", 4, used=3), node("gpu-b", 4, used=4))
    spec = policy(admission_retry_after_seconds=120)
    assert judge(NOW, spec, [CHECK], [view(since=NOW - timedelta(seconds=119))], busy) == []
    [verdict] = judge(NOW, spec, [CHECK], [view(since=NOW - timedelta(seconds=120))], busy)
    assert verdict.state == "Retry"
    assert verdict.requeue_after_seconds == 120
    assert "waited 120 s for 2 nvidia.com/gpu; 1 free on healthy home nodes (short 1)" in verdict.message


def test_a_workload_whose_away_side_is_still_starting_waits_past_the_retry_time() -> None:
    # A provider's cold start runs to minutes: a Retry then would drop the quota, the demand would
    # vanish, and the policy would bring the service home with the away side nearly warm.
    busy = observed(node("gpu-a", 4, used=3), node("gpu-b", 4, used=4))
    spec = policy(admission_retry_after_seconds=120)
    late = view(since=NOW - timedelta(seconds=400))
    key = f"Workload:{late.key}"
    for stage in (Stage.WARMING_AWAY, Stage.SHIFTING_TRAFFIC, Stage.PODS_LEAVING):
        [verdict] = judge(NOW, spec, [CHECK], [late], busy, waits={key: Wait(stage, 400, ("serving/llm",))})
        assert verdict.state == "Pending", stage
        assert verdict.message.startswith("waiting for GPUs: "), verdict.message
    # Nothing moving any more (none may move, or the move rolled back): the retry time counts again.
    [verdict] = judge(NOW, spec, [CHECK], [late], busy, waits={key: Wait(Stage.NO_CANDIDATE, 400)})
    assert verdict.state == "Retry"
    assert "not enough inference could move away in time" in verdict.message


def test_more_than_the_usable_pool_is_retried_at_once_naming_the_shortfall_never_rejected() -> None:
    demand = view(pod_sets=[pod_set(count=12, gpus=1)])
    pool = observed(node("gpu-a", 4), node("gpu-b", 4), node("gpu-c", 4, health=sick()))
    [verdict] = judge(NOW, policy(), [CHECK], [demand], pool)
    assert verdict.state == "Retry"
    assert "needs 12 nvidia.com/gpu, more than the 8 of the usable home pool (short 4)" in verdict.message


def test_free_gpus_go_to_the_oldest_waiting_workload_first_and_are_not_given_twice() -> None:
    old = view(name="old", pod_sets=[pod_set(count=3)], since=NOW - timedelta(seconds=10))
    new = view(name="new", pod_sets=[pod_set(count=3)], since=NOW)
    verdicts = judge(NOW, policy(), [CHECK], [new, old], observed(node("gpu-a", 4)))
    assert [(v.workload.name, v.state) for v in verdicts] == [("old", "Ready")]


def test_gpus_promised_to_a_workload_let_through_earlier_are_not_given_again() -> None:
    pool = observed(node("gpu-a", 4), node("gpu-b", 4))
    assert judge(NOW, policy(), [CHECK], [view()], pool, promised=7) == []
    [verdict] = judge(NOW, policy(), [CHECK], [view()], pool, promised=6)
    assert verdict.state == "Ready"


async def test_the_controller_counts_what_a_ready_job_s_unplaced_pods_will_take() -> None:
    ready = workload("job-first", state="Ready", pod_sets=[pod_set(count=6)])
    ready["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "first"}]
    waiting = workload("job-second", pod_sets=[pod_set(count=3)])
    pods_path = "/api/v1/namespaces/train/pods"
    bound = {"spec": {"nodeName": "gpu-a", "containers": [{"resources": {"limits": {GPU: "1"}}}]}}
    unbound = {"spec": {"containers": [{"resources": {"limits": {GPU: "1"}}}]}}
    api = recorder([check_object()], [ready, waiting])
    api.answers[pods_path] = {"items": [bound, bound, unbound, unbound, unbound, unbound]}
    checks = AdmissionChecks(api, EventRecorder(api, host="n"))  # type: ignore[arg-type]
    raw = policy_object("training-first", [CHECK])
    await checks.refresh([raw], NOW)
    api.patches.clear()
    # 8 free as the scheduler sees it, 4 of them about to go to job-first's 4 unplaced pods.
    verdicts = await checks.settle(parse_policy(raw), observed(node("gpu-a", 4), node("gpu-b", 4)), NOW)
    assert [v.state for v in verdicts] == ["Ready"]  # 8 - 4 promised = 4 >= 3
    api.answers[pods_path] = {"items": [unbound] * 6}
    assert await checks.settle(parse_policy(raw), observed(node("gpu-a", 4), node("gpu-b", 4)), NOW) == []


def test_no_gpus_needed_is_ready_at_once_without_updates() -> None:
    [verdict] = judge(
        NOW, policy(), [CHECK], [view(pod_sets=[pod_set(gpus=None)])], observed(node("a", 4, used=4))
    )
    assert (verdict.state, verdict.pod_set_updates) == ("Ready", ())


def test_a_malformed_pod_set_is_rejected_with_the_reason() -> None:
    [verdict] = judge(NOW, policy(), [CHECK], [view(pod_sets=[pod_set(gpus="500m")])], observed())
    assert verdict.state == "Rejected"
    assert "not a whole number" in verdict.message


def test_only_pending_checks_with_quota_are_judged() -> None:
    workloads = [view(state="Ready"), view(state="Retry"), view(quota=False), view(finished=True)]
    assert judge(NOW, policy(), [CHECK], workloads, observed()) == []


# --- which policy serves a check ------------------------------------------------------------------


def check_object(name: str = CHECK, parameters: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"controllerName": CONTROLLER_NAME}
    if parameters is not None:
        spec["parameters"] = parameters
    return {"metadata": {"name": name, "uid": "ac"}, "spec": spec}


def policy_object(name: str, checks: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "offloads": {"selector": {}},
        "homePool": {"nodeSelector": {"matchLabels": {"pool": "home-gpu"}}},
    }
    if checks is not None:
        spec["admissionChecks"] = checks
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": spec}


PARAMS = {"apiGroup": "offload.vk-provider.dev", "kind": "OffloadPolicy"}


@pytest.mark.parametrize(
    ("parameters", "policies", "expected"),
    [
        ({**PARAMS, "name": "p"}, {"p": []}, ("p", "")),
        ({**PARAMS, "name": "nope"}, {"p": []}, (None, "UnknownPolicy")),
        ({"apiGroup": "x", "kind": "Y", "name": "p"}, {"p": []}, (None, "InvalidParameters")),
        (None, {"p": [CHECK], "q": []}, ("p", "")),
        (None, {"p": []}, (None, "UnknownPolicy")),
        (None, {"p": [CHECK], "q": [CHECK]}, (None, "AmbiguousPolicy")),
    ],
)
def test_a_check_names_its_policy_by_parameters_or_by_being_listed(
    parameters: Any, policies: dict[str, list[str]], expected: tuple[str | None, str]
) -> None:
    by_name = {name: policy_object(name, checks) for name, checks in policies.items()}
    served, reason, _ = resolve(check_object(parameters=parameters), by_name)
    assert (served, reason) == expected


def test_the_policy_spec_lists_its_checks_and_refuses_a_bad_list() -> None:
    assert parse_policy(policy_object("p", [CHECK, CHECK])).admission_checks == (CHECK,)
    with pytest.raises(InvalidPolicy, match=r"spec\.admissionChecks must be a list"):
        parse_policy(policy_object("p", [""]))
    assert policy().timing.admission_retry_after_seconds == 300


# --- the controller's writes ----------------------------------------------------------------------


class Recorder:
    """Answers GETs by path and records every PATCH."""

    def __init__(self, answers: Mapping[str, dict[str, Any] | KubeApiError]) -> None:
        self.answers = dict(answers)
        self.patches: list[tuple[str, dict[str, Any], str, Mapping[str, Any]]] = []

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        answer = self.answers[path]
        if isinstance(answer, KubeApiError):
            raise answer
        return answer

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "",
    ) -> dict[str, Any]:
        self.patches.append((path, body, content_type, query or {}))
        return {}


def recorder(
    checks: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    *,
    cluster_queues: list[dict[str, Any]] | None = None,
    local_queues: list[dict[str, Any]] | None = None,
) -> Recorder:
    return Recorder(
        {
            admission_checks_path(): {"items": checks},
            workloads_path(): {"items": workloads},
            queues_path("clusterqueues"): {"items": cluster_queues or []},
            queues_path("localqueues"): {"items": local_queues or []},
        }
    )


async def test_the_controller_keeps_active_and_applies_only_its_own_check_entry() -> None:
    api = recorder([check_object(), check_object("orphan")], [workload()])
    checks = AdmissionChecks(api, EventRecorder(api, host="n"))  # type: ignore[arg-type]
    raw = policy_object("training-first", [CHECK])
    await checks.refresh([raw], NOW)
    active = {path: body["status"]["conditions"][0] for path, body, _, _ in api.patches}
    assert active[admission_checks_path(CHECK, status=True)]["status"] == "True"
    orphan = active[admission_checks_path("orphan", status=True)]
    assert (orphan["status"], orphan["reason"]) == ("False", "UnknownPolicy")

    spec = parse_policy(raw)
    assert [g.name for g in await checks.demand(spec)] == ["job-train-1"]
    api.patches.clear()
    await checks.settle(spec, observed(), NOW)
    [(path, body, content_type, query)] = api.patches
    assert path == workloads_path("train", "job-train-1", status=True)
    assert content_type == APPLY_PATCH
    assert query == {
        "fieldManager": "vk-provider-admission-check",
        "force": "true",
    }
    [entry] = body["status"]["admissionChecks"]
    assert (entry["name"], entry["state"]) == (CHECK, "Ready")
    assert entry["podSetUpdates"]

    api.patches.clear()
    await checks.refresh([raw], NOW)  # unchanged conditions are not written again
    assert api.patches == []


async def test_the_verdicts_written_are_counted_from_zero_per_served_check() -> None:
    api = recorder([check_object()], [workload()])
    registry = CollectorRegistry()
    checks = AdmissionChecks(api, EventRecorder(api, host="n"), metrics=PolicyMetrics(registry))  # type: ignore[arg-type]
    raw = policy_object("training-first", [CHECK])
    await checks.refresh([raw], NOW)

    def count(state: str) -> float | None:
        labels = {"policy": "training-first", "check": CHECK, "state": state}
        return registry.get_sample_value("vk_provider_policy_admission_verdicts_total", labels)

    assert (count("Ready"), count("Retry"), count("Rejected")) == (0, 0, 0)
    await checks.settle(parse_policy(raw), observed(), NOW)
    assert (count("Ready"), count("Retry")) == (1, 0)


async def test_a_cluster_without_kueue_gives_no_checks_and_no_error() -> None:
    api = Recorder({admission_checks_path(): KubeApiError(404, "NotFound", "no kueue")})
    checks = AdmissionChecks(api, EventRecorder(api, host="n"))  # type: ignore[arg-type]
    await checks.refresh([policy_object("p", [CHECK])], NOW)
    assert await checks.demand(parse_policy(policy_object("p", [CHECK]))) == []


async def test_an_invalid_policy_makes_its_check_inactive() -> None:
    api = recorder([check_object()], [])
    checks = AdmissionChecks(api, EventRecorder(api, host="n"))  # type: ignore[arg-type]
    broken = policy_object("p", [CHECK])
    broken["spec"]["homePool"] = {}
    await checks.refresh([broken], NOW)
    [(_, body, _, _)] = api.patches
    assert body["status"]["conditions"][0]["reason"] == "InvalidPolicy"
