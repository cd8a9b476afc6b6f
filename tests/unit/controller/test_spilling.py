"""What the controller reads off a spill-over Offload's pods: which home pods still need the label its
autoscaler counts by, and what the away pods cost."""

from __future__ import annotations

from typing import Any

from tests.unit.offload.test_spec import MINIMAL
from vk_provider.controller.spilling import away_cost_per_hour, selector, unlabelled, unschedulable
from vk_provider.kit.placement.record import CHOSEN_CONDITION
from vk_provider.offload.names import SERVES_LABEL
from vk_provider.offload.spec import parse_offload


def pod(
    name: str, *, labels: dict[str, str] | None = None, price: float | None = None, deleted: bool = False
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": labels or {}}
    if deleted:
        metadata["deletionTimestamp"] = "2026-12-06T10:00:00Z"
    conditions = []
    if price is not None:
        message = f'{{"pricePerHour":{price},"provider":"runpod"}}'
        conditions.append(
            {"type": CHOSEN_CONDITION, "status": "True", "reason": "Placed", "message": message}
        )
    return {"metadata": metadata, "status": {"conditions": conditions}}


def test_only_live_home_pods_without_the_label_are_labelled() -> None:
    spec = parse_offload(MINIMAL)
    pods = [
        pod("a"),
        pod("b", labels={SERVES_LABEL: "chat"}),
        pod("c", labels={SERVES_LABEL: "other"}),
        pod("d", deleted=True),
    ]
    assert unlabelled(pods, spec) == ["a", "c"]
    assert selector(spec) == f"{SERVES_LABEL}=chat"


def test_the_away_cost_adds_up_the_published_prices_of_live_pods() -> None:
    pods = [pod("a", price=0.34), pod("b", price=0.34), pod("c"), pod("d", price=2.0, deleted=True)]
    assert away_cost_per_hour(pods) == 0.68
    assert away_cost_per_hour([pod("c")]) is None
    assert away_cost_per_hour([]) is None


def test_only_unbound_pods_the_scheduler_refused_count_as_unschedulable() -> None:
    refused = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    waiting = pod("a")
    waiting["status"]["conditions"] = [refused]
    gated = pod("b")
    gated["status"]["conditions"] = [{**refused, "reason": "SchedulingGated"}]
    bound = pod("c")
    bound["spec"] = {"nodeName": "gpu-1"}
    going = pod("d", deleted=True)
    going["status"]["conditions"] = [refused]
    assert unschedulable([waiting, gated, bound, going]) == 1
