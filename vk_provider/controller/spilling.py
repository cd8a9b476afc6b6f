"""What the controller reads and writes for a spilling-over Offload, beyond a migration's own: the
label that lets an autoscaler count both sides' pods, the away side's cost, the status that reports it.

The decisions are `vk_provider.offload.spillover`'s; the reconciler (`SpillingOver._spill_over`, in
`spillingover`) carries them out with these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vk_provider.kit.placement.record import recorded_placement
from vk_provider.offload.names import SERVES_LABEL
from vk_provider.offload.spec import OffloadSpec
from vk_provider.offload.spillover import SpillStep, Split

SPILLING_CONDITION = "SpillingOver"


def selector(spec: OffloadSpec) -> str:
    """`status.selector`: both sides' pods, for the scale subresource."""
    return f"{SERVES_LABEL}={spec.name}"


def unlabelled(pods: Iterable[Mapping[str, Any]], spec: OffloadSpec) -> list[str]:
    """Names of the pods that do not carry the serves label yet (the home ones the controller labels)."""
    names = []
    for pod in pods:
        metadata = pod.get("metadata") or {}
        if (metadata.get("labels") or {}).get(SERVES_LABEL) != spec.name and not metadata.get(
            "deletionTimestamp"
        ):
            names.append(str(metadata.get("name")))
    return names


def unschedulable(pods: Iterable[Mapping[str, Any]]) -> int:
    """Pods the scheduler found no node for (PodScheduled False, Unschedulable): at home, GPUs taken."""
    count = 0
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp") or (pod.get("spec") or {}).get("nodeName"):
            continue
        conditions = (pod.get("status") or {}).get("conditions") or ()
        if any(
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
            for condition in conditions
        ):
            count += 1
    return count


def away_cost_per_hour(pods: Iterable[Mapping[str, Any]]) -> float | None:
    """USD per hour of the away pods placed at a published price; None when none of them has one."""
    prices = [
        placement.price_per_hour
        for pod in pods
        if not (pod.get("metadata") or {}).get("deletionTimestamp")
        and (placement := recorded_placement(pod)) is not None
        and placement.price_per_hour is not None
    ]
    return round(sum(prices), 4) if prices else None


def spill_status(
    *,
    home_replicas: int,
    home_ready: int,
    away_replicas: int,
    away_ready: int,
    capacity_weight: int,
    cost: float | None,
) -> dict[str, Any]:
    """`status.spillOver`, in the API's spelling."""
    return {
        "homeReplicas": home_replicas,
        "homeReadyReplicas": home_ready,
        "awayReplicas": away_replicas,
        "awayReadyReplicas": away_ready,
        "capacityWeight": capacity_weight,
        "awayCostPerHour": cost,
    }


def describe(split: Split, step: SpillStep, home_ready: int, away_ready: int) -> str:
    """The SpillingOver condition's message."""
    where = (
        f"{split.home} home ({home_ready} ready), {split.away} away ({away_ready} ready)"
        if split.away
        else f"{split.home} home ({home_ready} ready), none away"
    )
    moving = "" if step.weight == step.capacity_weight else f", moving toward {step.capacity_weight}"
    return f"{where}; away weight {step.weight}{moving}"
