"""The node admits pods as a kubelet does, and its money ceilings, before anything reaches the provider.

The decisions (`vk_provider.node.admission`) are pure and tested directly; the reconciler is then driven
with an in-memory provider and recording stand-ins (as test_pod_updates), to see what a refusal writes,
that nothing is created, and that concurrent workers and restarts cannot change a decision.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.unit.node.test_pod_updates import CachedPods, NoReferences, RecordingApi
from vk_provider.kit.placement import (
    CHOSEN_ANNOTATION,
    GPU_COUNT_ANNOTATION,
    GPU_TYPES_ANNOTATION,
    MAX_PRICE_ANNOTATION,
)
from vk_provider.node import nodeobject, podstatus
from vk_provider.node.admission import Admissions, Ceilings, capped, check_resources, pod_requests
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.node.pods import PodReconciler
from vk_provider.node.settings import NodeSettings, SettingsError, load_settings
from vk_provider.provider import (
    ContainerState,
    ContainerStateKind,
    ContainerTermination,
    PodRef,
    PodRequest,
    PodState,
    ProviderContext,
)
from vk_provider.runtime.queueing import KeyedQueue
from vk_providers.mock import MockProvider

pytestmark = pytest.mark.unit

GPU = "nvidia.com/gpu"
NODE = {"cpu": "4", "memory": "16Gi", "pods": "10", GPU: "8"}


def pod(
    uid: str,
    *,
    requests: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "img:1"}
    if requests is not None:
        container["resources"] = {"requests": dict(requests)}
    return {
        "metadata": {
            "name": f"pod-{uid}",
            "namespace": "ns",
            "uid": uid,
            "annotations": dict(annotations or {}),
        },
        "spec": {"nodeName": "n", "enableServiceLinks": False, "containers": [container], **spec},
        "status": status or {},
    }


def admissions(ceilings: Ceilings | None = None, allocatable: Mapping[str, str] = NODE) -> Admissions:
    return Admissions(node_name="n", allocatable=allocatable, ceilings=ceilings or Ceilings())


# -- the kubelet's resource check -------------------------------------------------------------------


def test_a_pod_asking_for_more_gpus_than_the_node_has_is_out_of_them_in_the_kubelets_words() -> None:
    refusal = admissions().decide(big := pod("a", requests={GPU: "100000"}), [big])
    assert refusal is not None
    assert refusal.reason == "OutOfnvidia.com/gpu"
    assert refusal.message == (
        "Node didn't have enough resource: nvidia.com/gpu, requested: 100000, used: 0, capacity: 8"
    )
    assert refusal.status_message == "Pod was rejected: " + refusal.message


def test_cpu_counts_in_millicores_and_what_admitted_pods_use_is_subtracted() -> None:
    running = pod(
        "a", requests={"cpu": "3"}, status={"phase": "Running", "startTime": "2026-12-03T10:00:00Z"}
    )
    refusal = check_resources(pod("b", requests={"cpu": "1500m"}), [running], NODE)
    assert refusal is not None
    assert refusal.reason == "OutOfcpu"
    assert refusal.message.endswith("cpu, requested: 1500, used: 3000, capacity: 4000")
    assert check_resources(pod("c", requests={"cpu": "1"}), [running], NODE) is None


def test_the_pod_count_is_a_resource_too() -> None:
    admitted = [pod("a"), pod("b")]
    refusal = check_resources(pod("c"), admitted, {"pods": "2"})
    assert refusal is not None
    assert refusal.reason == "OutOfpods"
    assert refusal.message.endswith("pods, requested: 1, used: 2, capacity: 2")


def test_what_the_node_does_not_advertise_is_not_checked_as_unknown_extended_resources() -> None:
    assert check_resources(pod("a", requests={"example.com/fpga": "3", GPU: "2"}), [], {"cpu": "1"}) is None
    assert check_resources(pod("b", requests={"cpu": "2"}), [], {GPU: "8"}) is None


def test_requests_are_the_kubelets_sum_of_containers_or_the_largest_init_container_with_sidecars() -> None:
    spec_pod = pod("a", requests={"cpu": "1"})
    spec_pod["spec"]["containers"].append({"name": "two", "resources": {"limits": {"cpu": "500m", GPU: "1"}}})
    spec_pod["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
        {"name": "setup", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}},
    ]
    spec_pod["spec"]["overhead"] = {"cpu": "100m"}
    requests = pod_requests(spec_pod)
    # containers 1.5 + sidecar 0.25 = 1.75 < setup 3 + the sidecar before it 0.25; then the overhead.
    assert requests["cpu"] == Fraction(3) + Fraction(1, 4) + Fraction(1, 10)
    assert requests["memory"] == 2**30
    assert requests[GPU] == 1  # a limit without a request requests the limit
    assert requests["pods"] == 1


# -- what counts as admitted, and stable decisions -------------------------------------------------------


def test_terminal_pods_and_pods_not_yet_admitted_use_nothing_and_acknowledged_ones_do() -> None:
    four = {GPU: "4"}
    done = pod("done", requests=four, status={"phase": "Failed", "startTime": "2026-12-03T10:00:00Z"})
    waiting = pod("waiting", requests=four)  # bound, but not judged yet: the kubelet does not count it
    earlier = pod("earlier", requests=four, status={"phase": "Pending", "startTime": "2026-12-03T10:00:00Z"})
    candidate = pod("new", requests={GPU: "5"})
    refusal = admissions().decide(candidate, [done, waiting, earlier, candidate])
    assert refusal is not None
    assert refusal.message.endswith("requested: 5, used: 4, capacity: 8")


def test_a_decision_is_never_taken_back_and_a_pod_the_provider_holds_is_never_judged() -> None:
    judge = admissions()
    first, second = pod("a", requests={GPU: "6"}), pod("b", requests={GPU: "6"})
    bound = [first, second]
    assert judge.decide(first, bound) is None
    refusal = judge.decide(second, bound)
    assert refusal is not None
    assert judge.decide(first, bound) is None  # asked again: still admitted, though the room is gone
    assert judge.decide(second, bound) == refusal  # and still refused, the same way
    adopted = pod("c", requests={GPU: "100000"})
    assert judge.decide(adopted, [*bound, adopted], held={"c"}) is None


def test_a_restarted_node_counts_what_was_acknowledged_before_and_does_not_judge_it_again() -> None:
    acknowledged = pod(
        "a", requests={GPU: "6"}, status={"phase": "Pending", "startTime": "2026-12-03T10:00:00Z"}
    )
    after_restart = admissions()
    assert after_restart.decide(acknowledged, [acknowledged]) is None
    newcomer = pod("b", requests={GPU: "6"})
    assert after_restart.decide(newcomer, [acknowledged, newcomer]) is not None


def test_concurrent_decisions_never_admit_two_pods_into_the_same_room() -> None:
    judge = admissions()
    pods = [pod(str(index), requests={GPU: "4"}) for index in range(5)]
    verdicts = [judge.decide(candidate, pods) for candidate in pods]
    assert sum(verdict is None for verdict in verdicts) == 2


# -- ceilings where money is at stake -------------------------------------------------------------


def test_the_pod_ceiling_refuses_the_pod_beyond_it() -> None:
    judge = admissions(Ceilings(max_pods=2))
    pods = [pod(str(index)) for index in range(3)]
    assert judge.decide(pods[0], pods) is None
    assert judge.decide(pods[1], pods) is None
    refusal = judge.decide(pods[2], pods)
    assert refusal is not None
    assert refusal.reason == "OutOfBudget"
    assert "at most 2 pods at its provider (max_provider_pods), and 2 run there" in refusal.message


def quoting(prices: Mapping[str, float]) -> Any:
    """A provider's prices by pod UID, counting how often it is asked."""

    def quote(raw: Mapping[str, Any]) -> float | None:
        quote.asked += 1  # type: ignore[attr-defined]
        return prices.get(raw["metadata"]["uid"])

    quote.asked = 0  # type: ignore[attr-defined]
    return quote


def test_the_spend_ceiling_counts_known_prices_then_recorded_ones_then_caps_then_the_providers() -> None:
    judge = Admissions(
        node_name="n",
        allocatable=NODE,
        ceilings=Ceilings(max_spend_per_hour=10.0),
        quote=quoting({"quoted": 1.0, "capped": 9.0}),  # a cap of the pod's own counts before its quote
    )
    placed = pod("placed")  # the node's own record: $3/h
    recorded = pod("recorded", annotations={CHOSEN_ANNOTATION: '{"provider":"runpod","pricePerHour":2.5}'})
    capped = pod("capped", annotations={MAX_PRICE_ANNOTATION: "2"})
    quoted = pod("quoted")
    bound = [placed, recorded, capped, quoted]
    prices = {"placed": 3.0}
    for each in bound:
        assert judge.decide(each, bound, prices=prices) is None  # 3 + 2.5 + 2 + 1 = 8.5
    too_dear = pod("dear", annotations={MAX_PRICE_ANNOTATION: "1.60"})
    refusal = judge.decide(too_dear, [*bound, too_dear], prices=prices)
    assert refusal is not None
    assert refusal.reason == "OutOfBudget"
    assert refusal.check == "spend-ceiling"
    assert "$10.00/h" in refusal.message
    assert "$8.50/h already" in refusal.message
    assert "$1.60/h" in refusal.message
    fits = pod("fits", annotations={MAX_PRICE_ANNOTATION: "1.5"})
    assert judge.decide(fits, [*bound, fits], prices=prices) is None


def test_a_pod_the_provider_prices_is_refused_when_its_price_would_pass_the_ceiling() -> None:
    judge = Admissions(
        node_name="n",
        allocatable=NODE,
        ceilings=Ceilings(max_spend_per_hour=2.0),
        quote=quoting({"first": 1.408, "second": 1.408}),
    )
    first, second = pod("first"), pod("second")
    assert judge.decide(first, [first, second]) is None
    refusal = judge.decide(second, [first, second])
    assert refusal is not None
    assert refusal.reason == "OutOfBudget"
    assert "its pods cost $1.41/h already, and this pod may cost $1.41/h" in refusal.message


def test_a_pod_of_unknown_price_is_refused_under_a_spend_ceiling_with_the_fixes_named() -> None:
    judge = admissions(Ceilings(max_spend_per_hour=5.0))
    unknown = pod("unknown")
    refusal = judge.decide(unknown, [unknown])  # nothing is spent yet: still refused
    assert refusal is not None
    assert (refusal.reason, refusal.check) == ("OutOfBudget", "spend-ceiling")
    for fix in (MAX_PRICE_ANNOTATION, "instance_prices", "gpu_prices_usd_per_hour", "allow_unpriced_pods"):
        assert fix in refusal.message
    # Without a spend ceiling, a price is nobody's business.
    assert admissions(Ceilings(max_pods=5)).decide(unknown, [unknown]) is None


def test_with_unpriced_pods_allowed_one_is_refused_once_the_known_spend_reaches_the_ceiling() -> None:
    judge = admissions(Ceilings(max_spend_per_hour=5.0, allow_unpriced_pods=True))
    placed = pod("placed")
    assert judge.decide(placed, [placed]) is None
    later = pod("later")
    refusal = judge.decide(later, [placed, later], prices={"placed": 5.0})
    assert refusal is not None
    assert "not known before it is placed" in refusal.message


def test_the_providers_price_of_a_pod_is_asked_again_only_when_the_pod_changed() -> None:
    quote = quoting({})
    judge = Admissions(
        node_name="n", allocatable=NODE, ceilings=Ceilings(max_spend_per_hour=50.0), quote=quote
    )
    quote_of = judge._quote_of
    seen = pod("a")
    seen["metadata"]["resourceVersion"] = "7"
    quote_of(seen)
    quote_of(seen)
    assert quote.asked == 1
    seen["metadata"]["resourceVersion"] = "8"  # e.g. another instance type annotated
    quote_of(seen)
    assert quote.asked == 2
    judge.forget("a")
    quote_of(seen)
    assert quote.asked == 3


def test_a_pod_placed_by_price_is_placed_within_what_is_left_under_the_spend_ceiling() -> None:
    judge = admissions(Ceilings(max_spend_per_hour=10.0))
    placed = pod("placed")
    by_price = pod("by-price", annotations={GPU_TYPES_ANNOTATION: "H100-80GB"})  # no cap of its own
    bound = [placed, by_price]
    assert judge.decide(placed, bound, prices={"placed": 7.0}) is None
    assert judge.decide(by_price, bound, prices={"placed": 7.0}) is None
    assert judge.price_cap("by-price") == pytest.approx(3.0)
    request = PodRequest(PodRef("ns", "pod-by-price", "by-price"), "n", (), annotations={"keep": "me"})
    assert capped(request, judge.price_cap("by-price")).annotations == {
        "keep": "me",
        MAX_PRICE_ANNOTATION: "3.000000",
    }
    assert capped(request, None) is request
    # Until its placement records a price, it counts at its cap: nothing is left for another.
    later = pod("later", annotations={GPU_TYPES_ANNOTATION: "A100-80GB"})
    assert judge.decide(later, [*bound, later], prices={"placed": 7.0}) is not None
    # A cheaper cap of its own is kept as it is.
    judge = admissions(Ceilings(max_spend_per_hour=10.0))
    modest = pod("modest", annotations={MAX_PRICE_ANNOTATION: "1.5"})
    assert judge.decide(modest, [modest]) is None
    assert judge.price_cap("modest") is None


async def test_the_provider_receives_the_lowered_cap(tmp_path: Path) -> None:
    created: list[PodRequest] = []

    class Recording(MockProvider):
        async def create_pod(self, pod: PodRequest) -> None:
            created.append(pod)
            await super().create_pod(pod)

    pods = CachedPods()
    provider = Recording(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    reconciler, _ = reconciler_for(tmp_path, pods, provider=provider, max_spend_per_hour=4.0)
    pods.objects["a"] = pod("a", annotations={GPU_COUNT_ANNOTATION: "1"})
    await reconciler.reconcile("a")
    (request,) = created
    assert request.annotations[MAX_PRICE_ANNOTATION] == "4.000000"


# -- placement annotations ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "words"),
    [
        ({GPU_COUNT_ANNOTATION: "lots"}, "must be a whole number of GPUs from 1 to 64, not 'lots'"),
        ({MAX_PRICE_ANNOTATION: "-1"}, "must be a positive number of US dollars"),
        (
            {"placement.vk-provider.dev/gpu-typ": "H100"},
            "placement.vk-provider.dev/gpu-typ is not a placement",
        ),
        ({"placement.vk-provider.dev/regions": " , "}, "must list at least one name"),
    ],
)
def test_an_invalid_placement_annotation_is_refused_with_the_annotation_named(
    annotations: dict[str, str], words: str
) -> None:
    candidate = pod("a", annotations=annotations)
    refusal = admissions().decide(candidate, [candidate])
    assert refusal is not None
    assert refusal.reason == "InvalidPlacement"
    assert words in refusal.message


def test_valid_placement_annotations_and_the_nodes_own_record_pass() -> None:
    candidate = pod(
        "a",
        annotations={
            GPU_COUNT_ANNOTATION: "2",
            MAX_PRICE_ANNOTATION: "4.50",
            CHOSEN_ANNOTATION: "{}",
            "placement.vk-provider.dev/providers": "runpod",
        },
    )
    assert admissions().decide(candidate, [candidate]) is None


# -- settings --------------------------------------------------------------------------------------


def test_the_ceilings_are_settings_off_by_default() -> None:
    assert NodeSettings().max_provider_pods is None
    assert NodeSettings().max_spend_per_hour is None
    assert NodeSettings().allow_unpriced_pods is False
    allowed = load_settings(config_file=None, environ={}, flags={"allow_unpriced_pods": "true"})
    assert allowed.allow_unpriced_pods is True
    settings = load_settings(
        config_file=None,
        environ={"VK_PROVIDER_MAX_SPEND_PER_HOUR": "12.5"},
        flags={"max_provider_pods": "20"},
    )
    assert (settings.max_provider_pods, settings.max_spend_per_hour) == (20, 12.5)
    with pytest.raises(SettingsError, match="max_spend_per_hour"):
        load_settings(config_file=None, environ={}, flags={"max_spend_per_hour": "-3"})
    with pytest.raises(SettingsError, match="max_provider_pods"):
        load_settings(config_file=None, environ={}, flags={"max_provider_pods": "0"})


# -- the reconciler: what a refusal writes, and what it does not create --------------------------------


class RecordingEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str, str]] = []

    def record(self, involved: Any, type: str, reason: str, message: str) -> None:
        self.recorded.append((involved.name, type, reason, message))


class DeletingApi(RecordingApi):
    def __init__(self) -> None:
        super().__init__()
        self.deletes: list[str] = []

    async def delete(self, path: str, body: Any = None) -> dict[str, Any]:
        self.deletes.append(path)
        return {}


def reconciler_for(
    tmp_path: Path,
    pods: CachedPods,
    *,
    api: RecordingApi | None = None,
    events: RecordingEvents | None = None,
    metrics: DaemonMetrics | None = None,
    provider: MockProvider | None = None,
    **settings: Any,
) -> tuple[PodReconciler, MockProvider]:
    provider = provider or MockProvider(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    reconciler = PodReconciler(
        api=api or RecordingApi(),  # type: ignore[arg-type]
        settings=NodeSettings(node_name="n", **settings),
        provider=provider,
        pods=pods,  # type: ignore[arg-type]
        reader=NoReferences(),
        events=events or RecordingEvents(),  # type: ignore[arg-type]
        queue=KeyedQueue(),
        node_allocatable=NODE,
        metrics=metrics or DaemonMetrics(),
    )
    return reconciler, provider


def status_patches(api: RecordingApi) -> list[dict[str, Any]]:
    return [body["status"] for path, body in api.patches if path.endswith("/status")]


async def test_a_refused_pod_is_failed_with_the_reason_an_event_and_a_metric_and_nothing_is_created(
    tmp_path: Path,
) -> None:
    api, events, metrics, pods = RecordingApi(), RecordingEvents(), DaemonMetrics(), CachedPods()
    reconciler, provider = reconciler_for(tmp_path, pods, api=api, events=events, metrics=metrics)
    pods.objects["a"] = pod("a", requests={GPU: "100000"})
    assert await reconciler.reconcile("a") is None
    assert await provider.list_pods() == []
    (status,) = status_patches(api)
    assert status["phase"] == "Failed"
    assert status["reason"] == "OutOfnvidia.com/gpu"
    assert status["message"].startswith("Pod was rejected: Node didn't have enough resource: nvidia.com/gpu")
    (container,) = status["containerStatuses"]
    assert container["state"]["waiting"]["reason"] == "OutOfnvidia.com/gpu"  # not ContainerCreating
    assert events.recorded == [
        ("pod-a", "Warning", "OutOfnvidia.com/gpu", status["message"][len("Pod was rejected: ") :])
    ]
    await reconciler.reconcile("a")  # before the watch shows it Failed: the same decision, no second event
    assert len(events.recorded) == 1
    assert await provider.list_pods() == []
    exposition = metrics.exposition().decode()
    assert (
        'vk_provider_pod_admission_refusals_total{check="resources",reason="OutOfnvidia.com/gpu"} 1.0'
        in exposition
    )


async def test_concurrent_workers_admit_only_what_fits(tmp_path: Path) -> None:
    pods = CachedPods()
    reconciler, provider = reconciler_for(tmp_path, pods)
    for index in range(5):
        pods.objects[str(index)] = pod(str(index), requests={GPU: "3"})
    await asyncio.gather(*(reconciler.reconcile(str(index)) for index in range(5)))
    assert len(await provider.list_pods()) == 2


async def test_an_adopted_pod_is_never_refused_after_a_restart(tmp_path: Path) -> None:
    pods = CachedPods()
    before, provider = reconciler_for(tmp_path, pods, max_provider_pods=1)
    pods.objects["a"] = pod("a", requests={GPU: "8"})
    await before.reconcile("a")
    pods.objects["b"] = pod("b", requests={GPU: "8"})  # bound while the node was down; not acknowledged
    api = RecordingApi()
    after, _ = reconciler_for(tmp_path, pods, api=api, provider=provider, max_provider_pods=1)
    assert await after.adopt() == 1
    await after.reconcile("b")
    await after.reconcile("a")
    phases = {
        path.split("/")[-2]: body["status"]["phase"] for path, body in api.patches if path.endswith("/status")
    }
    assert phases == {"pod-b": "Failed", "pod-a": "Running"}
    assert [state.ref.uid for state in await provider.list_pods()] == ["a"]


async def test_the_spend_ceiling_refuses_a_pod_whose_cap_would_pass_it(tmp_path: Path) -> None:
    api, pods = RecordingApi(), CachedPods()
    reconciler, provider = reconciler_for(tmp_path, pods, api=api, max_spend_per_hour=10.0)
    pods.objects["a"] = pod("a", annotations={MAX_PRICE_ANNOTATION: "6"})
    pods.objects["b"] = pod("b", annotations={MAX_PRICE_ANNOTATION: "6"})
    await reconciler.reconcile("a")
    await reconciler.reconcile("b")
    assert [state.ref.uid for state in await provider.list_pods()] == ["a"]
    assert status_patches(api)[-1]["reason"] == "OutOfBudget"


async def test_a_forced_deletion_does_not_warn_of_an_overrun_grace_period(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api, pods = DeletingApi(), CachedPods()
    reconciler, provider = reconciler_for(tmp_path, pods, api=api)
    pods.objects["a"] = pod("a")
    await reconciler.reconcile("a")
    deleted = pod("a")
    deleted["metadata"]["deletionTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    deleted["metadata"]["deletionGracePeriodSeconds"] = 0
    pods.objects["a"] = deleted
    with caplog.at_level(logging.WARNING):
        await reconciler.reconcile("a")
    assert not [record for record in caplog.records if "grace period" in record.getMessage()]
    assert await provider.list_pods() == []
    assert api.deletes


async def test_a_workload_that_overruns_its_grace_period_is_still_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Stubborn(MockProvider):
        async def delete_pod(self, ref: Any, *, grace_period_seconds: float) -> None:
            if grace_period_seconds == 0:
                await super().delete_pod(ref, grace_period_seconds=0)

    api, pods = DeletingApi(), CachedPods()
    provider = Stubborn(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    reconciler, _ = reconciler_for(tmp_path, pods, api=api, provider=provider)
    pods.objects["a"] = pod("a")
    await reconciler.reconcile("a")
    deleted = pod("a")
    deleted["metadata"]["deletionTimestamp"] = (datetime.now(UTC) + timedelta(seconds=30)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    deleted["metadata"]["deletionGracePeriodSeconds"] = 30
    pods.objects["a"] = deleted
    assert await reconciler.reconcile("a")  # asked with 30 s: waits
    deleted["metadata"]["deletionTimestamp"] = (datetime.now(UTC) - timedelta(seconds=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    with caplog.at_level(logging.WARNING):
        await reconciler.reconcile("a")
    assert [
        record for record in caplog.records if "did not stop within its grace period" in record.getMessage()
    ]
    assert await provider.list_pods() == []


# -- the container states of a terminal pod ----------------------------------------------------------


def test_a_pod_that_failed_before_it_ran_shows_its_reason_on_its_containers_not_container_creating() -> None:
    never = pod("a", restartPolicy="Never")
    never["spec"]["initContainers"] = [{"name": "setup", "image": "img:1"}]
    status = podstatus.provider_failed_status(
        never, "no capacity", host_ip="127.0.0.1", now=datetime.now(UTC)
    )
    assert status["phase"] == "Failed"
    for container in (*status["containerStatuses"], *status["initContainerStatuses"]):
        assert container["state"] == {"waiting": {"reason": "ProviderFailed", "message": "no capacity"}}


def test_a_pod_that_may_still_run_shows_its_containers_being_created() -> None:
    status = podstatus.provider_failed_status(
        pod("a"), "try later", host_ip="127.0.0.1", now=datetime.now(UTC)
    )
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}


def test_a_terminal_pod_keeps_what_the_provider_says_of_a_container_that_ran() -> None:
    ended = ContainerState(
        "app",
        "img:1",
        ContainerStateKind.TERMINATED,
        termination=ContainerTermination(exit_code=1, reason="Error"),
    )
    state = PodState(PodRef("ns", "pod-a", "a"), "Failed", containers=(ended,), reason="Evicted")
    status = podstatus.pod_status(pod("a"), state, host_ip="127.0.0.1", now=datetime.now(UTC))
    assert status["containerStatuses"][0]["state"]["terminated"]["reason"] == "Error"


def test_the_pod_ceiling_is_the_nodes_allocatable_pods_so_the_scheduler_sends_no_more() -> None:
    resources = {"cpu": "8", "pods": "110"}
    assert nodeobject.allocatable(NodeSettings(), resources) == resources
    assert nodeobject.allocatable(NodeSettings(max_provider_pods=3), resources) == {"cpu": "8", "pods": "3"}
    assert nodeobject.allocatable(NodeSettings(max_provider_pods=500), resources)["pods"] == "110"
    assert nodeobject.allocatable(NodeSettings(max_provider_pods=4), {"cpu": "8"})["pods"] == "4"
    status = nodeobject.status(
        NodeSettings(max_provider_pods=3, capacity=resources),
        nodeobject.Health(ready=True),
        datetime.now(UTC),
        provider_capacity={},
    )
    assert (status["capacity"]["pods"], status["allocatable"]["pods"]) == ("110", "3")
