"""Carry the policy's decisions out: an Offload's placement, and the policy's taints on nodes.

A placement is written exactly as `kubectl offload flip` writes it (a merge patch of spec.placement
carrying the read's resourceVersion, so a concurrent change is noticed, not overwritten), with the
flipped-by annotation and the times of this policy's flips in the same write: the flip and its record
cannot be separated by a crash, which is what lets a new leader count flips and dwell without a
double flip. Each write re-checks on a fresh read that a person has not taken the Offload meanwhile.

A taint is added or removed together with the node's policy-taints annotation, in one write with the
node's resourceVersion; the policy removes only taints that annotation lists.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from vk_provider._kube.informers import uncached
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.kit.timestamps import format_timestamp, parse_timestamp
from vk_provider.offload.names import GROUP, WARM_UNTIL_ANNOTATION, WARMED_BY_ANNOTATION, offload_path
from vk_provider.policy.names import (
    AUTO_ANNOTATION,
    FLIPPED_BY_ANNOTATION,
    HOLD_UNTIL_ANNOTATION,
    HOLD_UNTIL_NEXT_FLIP,
    POLICY_FIELD_MANAGER,
    POLICY_TAINTS_ANNOTATION,
    flipped_by_policy,
)
from vk_provider.policy.spec import Taint

POLICY_FLIPS_ANNOTATION = f"{GROUP}/policy-flips"
"""On an Offload: the JSON list of the times (RFC 3339) a policy flipped it within the last hour,
written with each flip: what `maxFlipsPerHour` and the dwell times are counted from."""
CONFLICT_RETRIES = 5
KEEP_FLIPS = timedelta(hours=1)


class Refused(Exception):
    """The fresh read says the decision no longer holds (a person moved or held the Offload)."""


async def _patch(api: KubeApi, path: str, body: Mapping[str, Any]) -> RawObject:
    return await api.request(
        "PATCH", path, query={"fieldManager": POLICY_FIELD_MANAGER}, body=body, content_type=MERGE_PATCH
    )


async def _checked(
    api: KubeApi, path: str, build: Callable[[RawObject], dict[str, Any] | None]
) -> RawObject | None:
    """Read, build a patch from what was read (None: nothing to write), write it with that read's
    resourceVersion; again on a conflict."""
    for _ in range(CONFLICT_RETRIES):
        current = await uncached(api).get(path)
        patch = build(current)
        if patch is None:
            return None
        patch.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
        try:
            return await _patch(api, path, patch)
        except KubeApiError as error:
            if not error.conflict:
                raise
    raise KubeApiError(409, "Conflict", f"{path} kept changing while the policy updated it")


def _held(annotations: Mapping[str, str], now: datetime) -> bool:
    hold = annotations.get(HOLD_UNTIL_ANNOTATION)
    if not hold:
        return False
    until = parse_timestamp(hold) if hold != HOLD_UNTIL_NEXT_FLIP else None
    return until is None or until > now


async def set_placement(
    api: KubeApi, namespace: str, name: str, placement: str, *, policy: str, now: datetime, expect: str
) -> RawObject:
    """Set spec.placement to `placement` if it still says `expect` and no person holds the Offload."""

    def build(current: RawObject) -> dict[str, Any]:
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        spec = current.get("spec") or {}
        if spec.get("placement") != expect:
            raise Refused(f"its placement is now {spec.get('placement')}, not {expect}")
        if _held(annotations, now):
            raise Refused(f"a person holds it ({annotations.get(HOLD_UNTIL_ANNOTATION)})")
        if str(annotations.get(AUTO_ANNOTATION, "on")).lower() == "off":
            raise Refused("automatic flips are off for it")
        flips = [
            moment
            for moment in flip_times(annotations.get(POLICY_FLIPS_ANNOTATION))
            if now - moment < KEEP_FLIPS
        ]
        record = json.dumps([format_timestamp(moment) for moment in [*flips, now]])
        return {
            "metadata": {
                "annotations": {
                    FLIPPED_BY_ANNOTATION: flipped_by_policy(policy),
                    POLICY_FLIPS_ANNOTATION: record,
                }
            },
            "spec": {"placement": placement},
        }

    patched = await _checked(api, offload_path(namespace, name), build)
    if patched is None:  # build never declines (it raises Refused); kept for the type
        raise Refused("nothing to write")
    return patched


async def set_warm_until(
    api: KubeApi, namespace: str, name: str, until: datetime, *, policy: str, now: datetime
) -> RawObject:
    """Ask for the Offload's away side to be kept warm until `until` (its warm-until and warmed-by
    annotations), if it still serves at home and no person holds it or turned automatic moves off: the
    same rules a flip follows, checked on a fresh read. A later warm-until already there is kept."""

    def build(current: RawObject) -> dict[str, Any] | None:
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        placement = (current.get("spec") or {}).get("placement")
        if placement != "home":
            raise Refused(f"its placement is now {placement}, not home")
        if _held(annotations, now):
            raise Refused(f"a person holds it ({annotations.get(HOLD_UNTIL_ANNOTATION)})")
        if str(annotations.get(AUTO_ANNOTATION, "on")).lower() == "off":
            raise Refused("automatic flips are off for it")
        known = parse_timestamp(annotations.get(WARM_UNTIL_ANNOTATION))
        if known is not None and known >= until:
            return None
        return {
            "metadata": {
                "annotations": {
                    WARM_UNTIL_ANNOTATION: format_timestamp(until),
                    WARMED_BY_ANNOTATION: flipped_by_policy(policy),
                }
            }
        }

    patched = await _checked(api, offload_path(namespace, name), build)
    if patched is None:
        raise Refused("a later warm-until is already set")
    return patched


def flip_times(raw: Any) -> list[datetime]:
    """The times of the policy-flips annotation (unreadable: none)."""
    try:
        values = json.loads(raw) if isinstance(raw, str) else []
    except ValueError:
        return []
    moments = [parse_timestamp(value) for value in values] if isinstance(values, list) else []
    return [moment for moment in moments if moment is not None]


def _recorded(annotations: Mapping[str, str]) -> list[str]:
    try:
        keys = json.loads(annotations.get(POLICY_TAINTS_ANNOTATION) or "[]")
    except ValueError:
        return []
    return [key for key in keys if isinstance(key, str)] if isinstance(keys, list) else []


async def add_taint(api: KubeApi, node: str, taint: Taint) -> bool:
    """Put `taint` on the node and record it as the policy's, or bring the value of the policy's own
    taint of that key up to date; False when nothing changed or the key is someone else's (never
    claimed)."""

    def build(current: RawObject) -> dict[str, Any] | None:
        taints = list((current.get("spec") or {}).get("taints") or ())
        recorded = _recorded(current["metadata"].get("annotations") or {})
        same = [t for t in taints if t.get("key") == taint.key]
        new = {"key": taint.key, "value": taint.value, "effect": taint.effect}
        if same and (taint.key not in recorded or same == [new]):
            return None
        others = [t for t in taints if t.get("key") != taint.key]
        return {
            "metadata": {
                "annotations": {POLICY_TAINTS_ANNOTATION: json.dumps(sorted({*recorded, taint.key}))}
            },
            "spec": {"taints": [*others, new]},
        }

    return await _checked(api, resource_path("v1", "nodes", name=node), build) is not None


async def remove_taint(api: KubeApi, node: str, key: str) -> bool:
    """Remove the taint `key` if the node's annotation records it as the policy's; False otherwise."""

    def build(current: RawObject) -> dict[str, Any] | None:
        recorded = _recorded(current["metadata"].get("annotations") or {})
        if key not in recorded:
            return None
        taints = [t for t in (current.get("spec") or {}).get("taints") or () if t.get("key") != key]
        left = [k for k in recorded if k != key]
        return {
            "metadata": {"annotations": {POLICY_TAINTS_ANNOTATION: json.dumps(left) if left else None}},
            "spec": {"taints": taints or None},
        }

    return await _checked(api, resource_path("v1", "nodes", name=node), build) is not None
