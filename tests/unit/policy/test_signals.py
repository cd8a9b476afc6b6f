"""The GPU signals the policy reads besides pods: node health and native PodGroups, adapted to its model."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest

from tests.unit.policy.fixtures import NOW, policy
from vk_provider.kit.kube import KubeApi
from vk_provider.policy import signals
from vk_provider.policy.interconnect import IB_SYMBOL_ERRORS, InterconnectScrape, LinkRate
from vk_provider.policy.model import Gang, History, Observed
from vk_provider.policy.names import UNHEALTHY_TAINT_KEY
from vk_provider.policy.podgroups import NOT_SERVED, PodGroupDemand, PodGroupDemands
from vk_provider.policy.severity import Severity
from vk_provider.policy.signals import GpuHealth, NativePodGroups, NoHealthSignal
from vk_provider.policy.spec import parse_policy
from vk_provider.policy.status import demand_entry, history_from_status

pytestmark = pytest.mark.unit


def node(name: str, *taints: str, allocatable: str = "4") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"taints": [{"key": key, "effect": "NoSchedule"} for key in taints]},
        "status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": allocatable}},
    }


async def test_no_health_signal_means_every_node_healthy() -> None:
    report = await NoHealthSignal().judge(NOW, [node("a")], policy())
    assert report.nodes == {}


async def test_each_node_is_judged_from_its_own_state_without_an_exporter() -> None:
    health = GpuHealth(cast(KubeApi, None))  # no exporter named: the API is never asked
    nodes = [node("short", allocatable="3"), node("fine"), node("was-sick", UNHEALTHY_TAINT_KEY)]
    report = await health.judge(NOW, nodes, policy())
    assert (report.nodes["short"].healthy, report.nodes["short"].reason) == (False, "DevicePluginUnhealthy")
    assert report.nodes["fine"].counts
    # A new leader knows nothing of the past: a node still carrying our taint waits out
    # healthyForSeconds again before it counts.
    assert report.nodes["was-sick"].healthy
    assert not report.nodes["was-sick"].counts
    later = NOW + timedelta(seconds=policy().health.healthy_for_seconds)
    assert (await health.judge(later, nodes, policy())).nodes["was-sick"].counts
    await health.close()


async def test_unschedulable_pod_groups_become_gangs(monkeypatch: pytest.MonkeyPatch) -> None:
    async def unschedulable_pod_groups(api: Any, resource: str) -> PodGroupDemands:
        assert resource == "nvidia.com/gpu"
        return PodGroupDemands(
            [
                PodGroupDemand("train", "pg", min_count=6, gpus=6, since=NOW),
                PodGroupDemand("train", "cpu-only", min_count=2, gpus=0, since=NOW),
            ]
        )

    monkeypatch.setattr(signals, "unschedulable_pod_groups", unschedulable_pod_groups)
    gangs = await NativePodGroups(cast(KubeApi, None)).demand(policy())
    assert gangs == [Gang("PodGroup", "train", "pg", 6, 6)]


async def test_a_cluster_without_pod_groups_gives_no_demand(monkeypatch: pytest.MonkeyPatch) -> None:
    async def unschedulable_pod_groups(api: Any, resource: str) -> PodGroupDemands:
        return PodGroupDemands(unavailable="scheduling.k8s.io/v1beta1 PodGroups are not served")

    monkeypatch.setattr(signals, "unschedulable_pod_groups", unschedulable_pod_groups)
    assert await NativePodGroups(cast(KubeApi, None)).demand(policy()) == []


def test_the_demand_clocks_survive_a_round_trip_through_status() -> None:
    gang = Gang("Pods", "train", "job", 6, 2)
    history = History(shortfall_since={gang.key: NOW}, demand_since={gang.key: NOW})
    entry = demand_entry(Observed(gangs=(gang,)), history)
    assert history_from_status({"demand": entry}) == history
    gone = History(demand_gone_since=NOW)
    assert history_from_status({"demand": demand_entry(Observed(), gone)}) == gone


class VersionApi:
    """`/version` only: what NativePodGroups asks once PodGroups turn out not to be served."""

    def __init__(self, git_version: str) -> None:
        self.git_version = git_version
        self.asked = 0

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        assert path == "/version"
        self.asked += 1
        return {"gitVersion": self.git_version}


async def not_served(api: Any, resource: str) -> PodGroupDemands:
    return PodGroupDemands(unavailable=NOT_SERVED)


async def test_on_a_cluster_older_than_the_api_the_reason_names_the_version_it_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(signals, "unschedulable_pod_groups", not_served)
    api = VersionApi("v1.35.4")
    source = NativePodGroups(cast(KubeApi, api))
    assert await source.demand(policy()) == []
    assert source.unavailable() == (
        "cluster v1.35.4: native PodGroups (scheduling.k8s.io/v1beta1) unavailable (needs 1.37+); "
        "training demand is read from pods and Kueue Workloads only"
    )
    await source.demand(policy())
    assert api.asked == 1  # the version is read once


async def test_on_a_new_enough_cluster_the_reason_is_the_api_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(signals, "unschedulable_pod_groups", not_served)
    source = NativePodGroups(cast(KubeApi, VersionApi("v1.37.2")))
    await source.demand(policy())
    assert source.unavailable() == NOT_SERVED


async def test_pod_groups_that_are_read_leave_nothing_to_say(monkeypatch: pytest.MonkeyPatch) -> None:
    async def served(api: Any, resource: str) -> PodGroupDemands:
        return PodGroupDemands()

    monkeypatch.setattr(signals, "unschedulable_pod_groups", served)
    source = NativePodGroups(cast(KubeApi, None))
    await source.demand(policy())
    assert source.unavailable() is None


async def test_an_interconnect_rate_above_its_threshold_taints_after_it_lasts_and_lifts_after_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rates: dict[str, list[LinkRate]] = {}

    async def scrape_interconnect(api: Any, settings: Any, session: Any) -> InterconnectScrape:
        return InterconnectScrape(samples={"a": list(rates.get("a", []))})

    monkeypatch.setattr(signals, "scrape_interconnect", scrape_interconnect)
    spec = parse_policy(
        {
            "metadata": {"name": "p", "uid": "u", "generation": 1},
            "spec": {
                "offloads": {"selector": {"matchLabels": {"tier": "inference"}}},
                "homePool": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}},
                "health": {
                    "interconnect": {
                        "exporter": {"namespace": "vk", "selector": {"matchLabels": {"app": "ic"}}},
                        "thresholds": {"ibSymbolErrorsPerSecond": 1},
                    },
                    "degradingForSeconds": 30,
                    "healthyForSeconds": 20,
                    "maxNonFatalShare": 1,
                },
            },
        }
    )
    health = GpuHealth(cast(KubeApi, None))
    pool = [node("a"), node("b")]
    rates["a"] = [LinkRate(IB_SYMBOL_ERRORS, "mlx5_0 port 1", 1.0)]  # at the threshold: fine
    assert (await health.judge(NOW, pool, spec)).nodes["a"].rule is None
    rates["a"] = [LinkRate(IB_SYMBOL_ERRORS, "mlx5_0 port 1", 50.0)]
    climbing = (await health.judge(NOW, pool, spec)).nodes["a"]
    assert climbing.healthy
    assert climbing.rule is not None
    assert (climbing.rule.signal, climbing.rule.severity) == ("Interconnect", Severity.DEGRADING)
    assert climbing.rule.detail == "mlx5_0 port 1: 50 symbol errors/s > 1/s (degrading)"
    due = (await health.judge(NOW + timedelta(seconds=30), pool, spec)).nodes["a"]
    assert (due.healthy, due.reason) == (False, "Interconnect")
    rates["a"] = []
    quiet = NOW + timedelta(seconds=40)
    assert not (await health.judge(quiet, pool, spec)).nodes["a"].counts
    assert (await health.judge(quiet + timedelta(seconds=20), pool, spec)).nodes["a"].counts
    await health.close()
