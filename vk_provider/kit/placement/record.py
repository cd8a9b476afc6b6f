"""How a placement is written on its pod: the `Chosen` status condition and the `Placed` event. Pure.

The record is compact JSON, so tools can read it and the node can read it back after a restart
(`PodState.placement` is only known to the instance that placed the pod). It is the `message` of a
pod status condition of its own, written in the same status patch that reports the pod's state, so a
placed pod costs no pod write of its own (a metadata patch is a second pod update every watcher of
pods receives):

    status:
      conditions:
      - type: placement.vk-provider.dev/Chosen
        status: "True"
        reason: Placed
        message: >-
          {"gpuCount":1,"gpuType":"NVIDIA GeForce RTX 4090","locations":["EU-RO-1"],"pricePerHour":0.34,
          "provider":"runpod","tier":"COMMUNITY"}

Older nodes wrote the same JSON as the annotation `placement.vk-provider.dev/chosen`; `recorded_placement`
still reads it, for pods they placed.

`provider` is always there; the other keys only when known (`pricePerHour` is missing when the provider
chose by its own defaults and published no price).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from vk_provider.kit.placement.annotations import CHOSEN_ANNOTATION
from vk_provider.provider import Placement

PLACED_EVENT_REASON = "Placed"
"""The reason of the Normal event that says where a pod was placed and at what price, and of the
`CHOSEN_CONDITION`."""
CHOSEN_CONDITION = "placement.vk-provider.dev/Chosen"
"""The pod status condition whose `message` records the placement (`chosen_annotation`'s JSON)."""


def chosen_annotation(placement: Placement) -> str:
    document: dict[str, Any] = {"provider": placement.provider}
    if placement.price_per_hour is not None:
        document["pricePerHour"] = placement.price_per_hour
    if placement.gpu_type is not None:
        document["gpuType"] = placement.gpu_type
    if placement.gpu_count:
        document["gpuCount"] = placement.gpu_count
    if placement.tier is not None:
        document["tier"] = placement.tier
    if placement.locations:
        document["locations"] = list(placement.locations)
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def parse_chosen_annotation(text: str) -> Placement | None:
    """The placement an annotation records; None when it is not one `chosen_annotation` could write."""
    try:
        document = json.loads(text)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    provider = document.get("provider")
    price = document.get("pricePerHour")
    gpu_type = document.get("gpuType")
    count = document.get("gpuCount", 0)
    tier = document.get("tier")
    locations = document.get("locations", [])
    if (
        not isinstance(provider, str)
        or not provider
        or not (price is None or _is_price(price))
        or not (gpu_type is None or isinstance(gpu_type, str))
        or isinstance(count, bool)
        or not isinstance(count, int)
        or count < 0
        or not (tier is None or isinstance(tier, str))
        or not isinstance(locations, list)
        or not all(isinstance(location, str) for location in locations)
    ):
        return None
    return Placement(
        provider=provider,
        price_per_hour=None if price is None else float(price),
        gpu_type=gpu_type,
        gpu_count=count,
        tier=tier,
        locations=tuple(locations),
    )


def _is_price(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )


def placement_message(placement: Placement) -> str:
    """The event's message: "placed on runpod: 1 x NVIDIA GeForce RTX 4090 (COMMUNITY) in EU-RO-1 at
    $0.34/h"."""
    if placement.gpu_type is None:
        what = f"{placement.gpu_count} GPUs" if placement.gpu_count else "the provider's defaults"
        head = f"placed on {placement.provider} ({what})"
    else:
        tier = f" ({placement.tier})" if placement.tier else ""
        head = f"placed on {placement.provider}: {placement.gpu_count} x {placement.gpu_type}{tier}"
    where = f" in {' or '.join(placement.locations)}" if placement.locations else ""
    price = (
        "; no price is known"
        if placement.price_per_hour is None
        else f" at ${placement.price_per_hour:.2f}/h (list price)"
    )
    return head + where + price


def recorded_placement(pod: Mapping[str, Any]) -> Placement | None:
    """The placement recorded on a pod (its JSON form): the `CHOSEN_CONDITION` in its status, else the
    `chosen` annotation older nodes wrote; None when neither records one that can be read."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == CHOSEN_CONDITION:
            message = condition.get("message")
            placement = parse_chosen_annotation(message) if isinstance(message, str) else None
            if placement is not None:
                return placement
    annotation = ((pod.get("metadata") or {}).get("annotations") or {}).get(CHOSEN_ANNOTATION)
    return parse_chosen_annotation(annotation) if isinstance(annotation, str) else None
