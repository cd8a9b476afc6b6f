"""The seams to the GPU signals: without the modules, no signal; with them, their judgement, adapted."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pytest

from tests.unit.policy.fixtures import NOW, policy
from vk_provider.policy.model import Gang, History, Observed
from vk_provider.policy.signals import ModuleHealth, ModulePodGroups, NoHealthSignal
from vk_provider.policy.status import demand_entry, history_from_status

pytestmark = pytest.mark.unit


@dataclasses.dataclass(frozen=True)
class State:
    healthy: bool
    counts: bool
    since: datetime
    reason: str | None
    detail: str


class Memory:
    """A stand-in for health.HealthMemory with its calls recorded."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.judged: list[tuple[str, bool]] = []
        self.kept: list[str] = []

    def judge(
        self,
        now: datetime,
        node: Mapping[str, Any],
        samples: Sequence[Any] | None,
        *,
        previously_unhealthy: bool,
    ) -> State:
        name = node["metadata"]["name"]
        self.judged.append((name, previously_unhealthy))
        hot = name == "hot"
        return State(
            not hot,
            not hot and not previously_unhealthy,
            now,
            "Temperature" if hot else None,
            "85 C" if hot else "",
        )

    def retain(self, names: Any) -> None:
        self.kept = list(names)


class Settings:
    exporter = None
    taint_key = "gpu.vk-provider.dev/unhealthy"

    @classmethod
    def from_spec(cls, raw: Mapping[str, Any], *, resource: str) -> Settings:
        if raw.get("broken"):
            raise ValueError("spec.health.broken is not a field")
        return cls()


HEALTH = types.SimpleNamespace(HealthSettings=Settings, HealthMemory=Memory)


def node(name: str, *taints: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"taints": [{"key": key, "effect": "NoSchedule"} for key in taints]},
    }


async def test_no_health_module_means_every_node_healthy() -> None:
    report = await NoHealthSignal().judge(NOW, [node("a")], policy())
    assert report.nodes == {}


async def test_the_health_module_s_judgement_is_adapted_per_node() -> None:
    health = ModuleHealth(None, HEALTH, None)  # type: ignore[arg-type]
    nodes = [node("hot"), node("cool"), node("was-sick", "gpu.vk-provider.dev/unhealthy")]
    report = await health.judge(NOW, nodes, policy())
    assert (report.nodes["hot"].healthy, report.nodes["hot"].reason) == (False, "Temperature")
    assert report.nodes["cool"].counts
    assert not report.nodes["was-sick"].counts  # a new leader waits out healthyForSeconds again
    await health.close()


async def test_a_health_spec_the_module_refuses_is_an_error_not_a_crash() -> None:
    health = ModuleHealth(None, HEALTH, None)  # type: ignore[arg-type]
    report = await health.judge(NOW, [node("a")], dataclasses.replace(policy(), raw_health={"broken": True}))
    assert report.errors == {"spec.health": "spec.health.broken is not a field"}


async def test_a_module_that_does_not_match_is_no_signal() -> None:
    health = ModuleHealth(None, types.SimpleNamespace(), None)  # type: ignore[arg-type]
    assert (await health.judge(NOW, [node("a")], policy())).nodes == {}


async def test_unschedulable_pod_groups_become_gangs() -> None:
    demand = types.SimpleNamespace(namespace="train", name="pg", gpus=6)

    async def unschedulable_pod_groups(api: Any, resource: str) -> list[Any]:
        assert resource == "nvidia.com/gpu"
        return [demand]

    module = types.SimpleNamespace(unschedulable_pod_groups=unschedulable_pod_groups)
    gangs = await ModulePodGroups(None, module).demand(policy())  # type: ignore[arg-type]
    assert gangs == [Gang("PodGroup", "train", "pg", 6, 6)]
    assert await ModulePodGroups(None, types.SimpleNamespace()).demand(policy()) == []  # type: ignore[arg-type]


def test_the_demand_clocks_survive_a_round_trip_through_status() -> None:
    gang = Gang("Pods", "train", "job", 6, 2)
    history = History(shortfall_since={gang.key: NOW}, demand_since={gang.key: NOW})
    entry = demand_entry(Observed(gangs=(gang,)), history)
    assert history_from_status({"demand": entry}) == history
    gone = History(demand_gone_since=NOW)
    assert history_from_status({"demand": demand_entry(Observed(), gone)}) == gone
