"""The blast-radius cap on non-fatal taints: the slots, who gets them, and the pool as GpuHealth sees it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest

from tests.unit.policy.fixtures import NOW
from vk_provider.kit.kube import KubeApi
from vk_provider.policy.healthcap import apply_cap, slots_for
from vk_provider.policy.names import UNHEALTHY_TAINT_KEY
from vk_provider.policy.signals import GpuHealth
from vk_provider.policy.spec import PolicySpec, parse_policy

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("share", "nodes", "slots"),
    [
        (0.2, 4, 0),
        (0.2, 5, 1),
        (0.2, 9, 1),
        (0.2, 10, 2),
        (0.25, 4, 1),
        (0.29, 100, 29),
        (0, 50, 0),
        (1, 3, 3),
    ],
)
def test_the_slots_are_the_share_of_the_pool_rounded_down(share: float, nodes: int, slots: int) -> None:
    assert slots_for(share, nodes) == slots


def test_the_longest_lasting_get_the_free_slots_then_by_name() -> None:
    candidates = {
        "gpu-c": NOW - timedelta(minutes=30),
        "gpu-a": NOW - timedelta(minutes=10),
        "gpu-b": NOW - timedelta(minutes=10),
        "gpu-d": NOW - timedelta(minutes=40),
    }
    outcome = apply_cap(candidates, [], share=0.5, pool_nodes=4)
    assert outcome.granted == ("gpu-d", "gpu-c")
    assert outcome.held_back == ("gpu-a", "gpu-b")
    assert outcome.reached
    # The same answer whatever order the nodes come in.
    shuffled = dict(reversed(list(candidates.items())))
    assert apply_cap(shuffled, [], share=0.5, pool_nodes=4) == outcome


def test_nodes_already_held_take_their_slots_first() -> None:
    outcome = apply_cap({"gpu-b": NOW - timedelta(hours=1)}, ["gpu-a"], share=0.25, pool_nodes=4)
    assert (outcome.slots, outcome.held, outcome.granted, outcome.held_back) == (
        1,
        ("gpu-a",),
        (),
        ("gpu-b",),
    )
    # Never a negative number of free slots, and never a held node untainted for the cap.
    crowded = apply_cap({}, ["gpu-a", "gpu-b"], share=0.25, pool_nodes=4)
    assert (crowded.held, crowded.reached) == (("gpu-a", "gpu-b"), False)


def test_within_the_cap_nothing_is_held_back() -> None:
    outcome = apply_cap({"gpu-a": NOW}, [], share=0.25, pool_nodes=4)
    assert (outcome.granted, outcome.held_back, outcome.reached) == (("gpu-a",), (), False)


def policy(**health: Any) -> PolicySpec:
    return parse_policy(
        {
            "metadata": {"name": "p", "uid": "u", "generation": 1},
            "spec": {
                "offloads": {"selector": {"matchLabels": {"tier": "inference"}}},
                "homePool": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}},
                # A node condition played as a degrading signal: the cap needs no exporter to be seen.
                "health": {
                    "externalConditions": ["GpuDegraded"],
                    "externalTaintPrefixes": ["example.com/"],
                    "severity": {"ExternalCondition": "Degrading"},
                    "degradingForSeconds": 60,
                    **health,
                },
            },
        }
    )


def node(name: str, *, degraded: bool = False, fatal: bool = False, tainted: bool = False) -> dict[str, Any]:
    conditions = [{"type": "GpuDegraded", "status": "True", "reason": "Flaky"}] if degraded else []
    taints = [{"key": "example.com/xid", "effect": "NoSchedule"}] if fatal else []
    if tainted:
        taints.append({"key": UNHEALTHY_TAINT_KEY, "value": "ExternalCondition", "effect": "NoSchedule"})
    return {
        "metadata": {"name": name},
        "spec": {"taints": taints},
        "status": {
            "capacity": {"nvidia.com/gpu": "4"},
            "allocatable": {"nvidia.com/gpu": "4"},
            "conditions": conditions,
        },
    }


async def test_three_of_four_degrading_at_once_with_a_quarter_taints_one() -> None:
    health = GpuHealth(cast(KubeApi, None))
    spec = policy(maxNonFatalShare=0.25)
    # gpu-c shows its signal first, so it has lasted longest when the three are due.
    await health.judge(NOW - timedelta(seconds=10), [node("gpu-c", degraded=True)], spec)
    pool = [
        node("gpu-a", degraded=True),
        node("gpu-b", degraded=True),
        node("gpu-c", degraded=True),
        node("gpu-d"),
    ]
    pending = await health.judge(NOW, pool, spec)
    assert all(state.healthy for state in pending.nodes.values())
    assert pending.nodes["gpu-a"].rule is not None
    assert pending.cap is not None
    assert not pending.cap.reached
    report = await health.judge(NOW + timedelta(seconds=60), pool, spec)
    assert report.cap is not None
    assert (report.cap.slots, report.cap.granted, report.cap.held_back) == (1, ("gpu-c",), ("gpu-a", "gpu-b"))
    assert (report.nodes["gpu-c"].healthy, report.nodes["gpu-c"].reason) == (False, "ExternalCondition")
    for held_back in ("gpu-a", "gpu-b"):
        state = report.nodes[held_back]
        assert (state.healthy, state.counts, state.held_back) == (True, True, True)
    # The next pass: gpu-c, judged unhealthy (its taint maybe not written yet), holds the slot.
    later = await health.judge(NOW + timedelta(seconds=62), pool, spec)
    assert later.cap is not None
    assert (later.cap.held, later.cap.granted, later.cap.held_back) == (("gpu-c",), (), ("gpu-a", "gpu-b"))
    assert not later.nodes["gpu-c"].healthy
    await health.close()


async def test_fatal_nodes_neither_count_nor_wait() -> None:
    health = GpuHealth(cast(KubeApi, None))
    pool = [node("gpu-a", fatal=True), node("gpu-b", fatal=True), node("gpu-c", degraded=True), node("gpu-d")]
    spec = policy(maxNonFatalShare=0.25, degradingForSeconds=0)
    report = await health.judge(NOW, pool, spec)
    assert [name for name, state in report.nodes.items() if not state.healthy] == ["gpu-a", "gpu-b", "gpu-c"]
    assert report.cap is not None
    assert not report.cap.reached
    await health.close()


async def test_at_the_default_share_a_four_node_pool_taints_nothing_for_a_degrading_signal() -> None:
    health = GpuHealth(cast(KubeApi, None))
    pool = [node("gpu-a", degraded=True), node("gpu-b"), node("gpu-c"), node("gpu-d")]
    report = await health.judge(NOW, pool, policy(degradingForSeconds=0))
    assert report.cap is not None
    assert (report.cap.slots, report.cap.held_back) == (0, ("gpu-a",))
    assert report.nodes["gpu-a"].healthy
    await health.close()


async def test_a_node_tainted_before_keeps_its_taint_and_slot_while_its_signal_lasts() -> None:
    """A new leader: the persistence clock starts afresh, but a tainted node stays tainted."""
    health = GpuHealth(cast(KubeApi, None))
    pool = [
        node("gpu-a", degraded=True, tainted=True),
        node("gpu-b", degraded=True),
        node("gpu-c"),
        node("gpu-d"),
    ]
    spec = policy(maxNonFatalShare=0.25, degradingForSeconds=0)
    report = await health.judge(NOW, pool, spec)
    assert not report.nodes["gpu-a"].healthy
    assert report.cap is not None
    assert (report.cap.held, report.cap.held_back) == (("gpu-a",), ("gpu-b",))
    await health.close()
