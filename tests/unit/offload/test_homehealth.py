"""Home pods on unhealthy nodes: which are stranded, and the make-before-break move that replaces them."""

from __future__ import annotations

from typing import Any

import pytest

from vk_provider.offload.homehealth import (
    REPLACING_ANNOTATION,
    HomePods,
    classify,
    plan_replacement,
    recorded_base,
    unhealthy_nodes,
)

pytestmark = pytest.mark.unit

TAINT = "gpu.vk-provider.dev/unhealthy"


def pod(name: str, node: str | None, *, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-06T10:00:00Z"
    return {
        "metadata": metadata,
        "spec": {"nodeName": node} if node else {},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def node(name: str, *taints: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"taints": [{"key": key, "effect": "NoSchedule"} for key in taints]},
    }


def test_a_node_is_unhealthy_only_with_the_unhealthy_taint() -> None:
    nodes = [node("hot", TAINT), node("reserved", "gpu.vk-provider.dev/reserved"), node("fine")]
    assert unhealthy_nodes(nodes, TAINT) == {"hot"}


def test_pods_on_unhealthy_nodes_are_stranded_ready_or_not_and_pods_being_deleted_are_not_counted() -> None:
    pods = [
        pod("a", "hot"),
        pod("b", "hot", ready=False),
        pod("c", "hot", deleting=True),
        pod("d", "fine"),
        pod("e", "fine", ready=False),
        pod("f", None, ready=False),
        pod("g", "fine", deleting=True),
    ]
    assert classify(pods, frozenset({"hot"})) == HomePods(1, ("a", "b"), ("hot",))


def test_nothing_stranded_keeps_the_replicas_and_records_nothing() -> None:
    assert plan_replacement(HomePods(healthy_ready=2), 2) == plan_replacement(HomePods(0), 2)
    move = plan_replacement(HomePods(healthy_ready=2), 2)
    assert (move.replicas, move.base, move.drain, move.waiting) == (2, None, (), "")


def test_stranded_pods_keep_their_place_while_replacements_are_made_beside_them() -> None:
    move = plan_replacement(HomePods(1, ("a", "b"), ("hot",)), 3)
    assert (move.replicas, move.base, move.drain) == (5, 3, ())
    assert "1 of 3 home replicas ready on healthy nodes" in move.waiting
    assert "hot" in move.waiting


def test_once_enough_pods_are_ready_on_healthy_nodes_the_stranded_ones_go_first_and_the_surge_ends() -> None:
    move = plan_replacement(HomePods(3, ("a", "b"), ("hot",)), 3)
    assert (move.replicas, move.base, move.drain) == (3, 3, ("a", "b"))
    assert move.waiting.startswith("3 home replicas ready on healthy nodes: removing the 2")


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({REPLACING_ANNOTATION: "4"}, 4),
        ({REPLACING_ANNOTATION: "x"}, None),
        ({REPLACING_ANNOTATION: "-1"}, None),
        ({}, None),
    ],
)
def test_the_recorded_base_is_read_back_and_a_bad_one_is_ignored(
    annotations: dict[str, str], expected: int | None
) -> None:
    assert recorded_base({"metadata": {"annotations": annotations}}) == expected
    assert recorded_base(None) is None
