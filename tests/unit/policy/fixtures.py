"""Small builders of policies and observed states for the policy's unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from vk_provider.policy.model import Gang, NodeHealth, OffloadView, PoolNode
from vk_provider.policy.spec import PolicySpec, parse_policy

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(days=1)
RESERVED = "gpu.vk-provider.dev/reserved"
UNHEALTHY = "gpu.vk-provider.dev/unhealthy"


def policy(**timing: int) -> PolicySpec:
    raw: dict[str, Any] = {
        "metadata": {"name": "training-first", "uid": "u1", "generation": 1},
        "spec": {
            "offloads": {"selector": {"matchLabels": {"tier": "inference"}}},
            "homePool": {"nodeSelector": {"matchLabels": {"pool": "home-gpu"}}},
            "timing": {
                "flipOutAfterSeconds": 30,
                "flipBackAfterSeconds": 600,
                "minAwaySeconds": 300,
                "minHomeSeconds": 300,
                "maxFlipsPerHour": 4,
                **{_camel(key): value for key, value in timing.items()},
            },
        },
    }
    return parse_policy(raw)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def node(name: str, gpus: int = 4, used: int = 0, **fields: Any) -> PoolNode:
    return PoolNode(name=name, allocatable=gpus, used=used, **fields)


def sick(reason: str = "Temperature") -> NodeHealth:
    return NodeHealth(healthy=False, counts=False, reason=reason, detail=f"{reason} detail", since=NOW)


def offload(name: str, gpus: int, *, placement: str = "home", **fields: Any) -> OffloadView:
    fields.setdefault("phase", "Idle" if placement == "home" else "Succeeded")
    fields.setdefault("last_change", LONG_AGO)
    held = gpus if placement == "home" else 0
    fields.setdefault("home_gpus_held", held)
    return OffloadView(namespace="ns", name=name, placement=placement, home_gpus=gpus, **fields)


def gang(name: str, unplaced: int, gpus: int | None = None) -> Gang:
    return Gang("Pods", "train", name, gpus if gpus is not None else unplaced, unplaced)


def mine(**fields: Any) -> dict[str, Any]:
    """Fields of an Offload this test's policy flipped away at `at`."""
    at = fields.pop("at", LONG_AGO)
    return {"flipped_by": "policy/training-first", "policy_flips": (at,), "last_change": at, **fields}
