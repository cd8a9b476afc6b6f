"""What a person's commands write on an Offload for the OffloadPolicies, and how the page says it.

A flip by a person is also a hold: the policy leaves the Offload where the person put it until the hold
ends (`--hold 2h`), or until the next flip by a person (no `--hold`). `auto off` keeps every policy away
for good; `auto on` hands the Offload back, ending any hold. The annotation names and values are the
policy's (`vk_provider.policy.names`); only the CLI's side of them is here. Pure functions of the
annotations and the clock, so every case is unit-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from vk_provider.kit.timestamps import format_timestamp, parse_timestamp
from vk_provider.policy.names import (
    AUTO_ANNOTATION,
    FLIPPED_BY_ANNOTATION,
    FLIPPED_BY_PERSON,
    HOLD_UNTIL_ANNOTATION,
    HOLD_UNTIL_NEXT_FLIP,
)

AUTO_ON = "on"
AUTO_OFF = "off"


def hold_value(now: datetime, hold_seconds: int | None) -> str:
    """The hold-until value of a flip made now: RFC 3339 UTC `hold_seconds` from now, or `next-flip`."""
    if hold_seconds is None:
        return HOLD_UNTIL_NEXT_FLIP
    return format_timestamp(now + timedelta(seconds=hold_seconds))


def flip_annotations(now: datetime, hold_seconds: int | None) -> dict[str, str]:
    """The annotations a person's flip writes, in the same patch as the placement (so both or neither)."""
    return {HOLD_UNTIL_ANNOTATION: hold_value(now, hold_seconds), FLIPPED_BY_ANNOTATION: FLIPPED_BY_PERSON}


def auto_patch(state: str) -> dict[str, Any]:
    """The merge patch of `auto on|off`: `on` also removes the hold (null deletes the annotation)."""
    annotations: dict[str, Any] = {AUTO_ANNOTATION: state}
    if state == AUTO_ON:
        annotations[HOLD_UNTIL_ANNOTATION] = None
    return {"metadata": {"annotations": annotations}}


def annotations_of(offload: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations: Mapping[str, Any] = (offload.get("metadata") or {}).get("annotations") or {}
    return annotations


def span(seconds: float) -> str:
    """`1h59m`, `5m`, `40s`: a hold's remaining time, precise enough to plan by."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs}s" if secs and minutes < 10 else f"{minutes}m"
    return f"{secs}s"


def describe_hold_value(value: Any, now: datetime) -> str:
    """A hold-until value for people: until when, how long is left, or that it has ended."""
    if value == HOLD_UNTIL_NEXT_FLIP:
        return "until the next flip by a person"
    until = parse_timestamp(value)
    if until is None:
        return f"{value!r} (unreadable: neither an RFC 3339 time nor {HOLD_UNTIL_NEXT_FLIP})"
    left = (until - now).total_seconds()
    if left <= 0:
        return f"ended {span(-left)} ago (was until {format_timestamp(until)})"
    return f"until {format_timestamp(until)} ({span(left)} left)"


def hold_lines(offload: Mapping[str, Any], now: datetime) -> list[str]:
    """The status page's lines about the policies, each only when its annotation is set: the auto state,
    the hold, and who flipped the Offload last (a person or `policy/<name>`)."""
    annotations = annotations_of(offload)
    lines = []
    auto = auto_text(annotations.get(AUTO_ANNOTATION))
    if auto is not None:
        lines.append(f"Auto:         {auto}")
    hold = annotations.get(HOLD_UNTIL_ANNOTATION)
    if hold is not None:
        lines.append(f"Hold:         {describe_hold_value(hold, now)}")
    by = annotations.get(FLIPPED_BY_ANNOTATION)
    if by is not None:
        lines.append(f"Flipped by:   {by}")
    return lines


def auto_text(value: Any) -> str | None:
    """An auto annotation's value for people; None when absent (which means on, and is not shown)."""
    if value is None:
        return None
    if value == AUTO_OFF:
        return "off (no OffloadPolicy moves it)"
    if value == AUTO_ON:
        return "on (an OffloadPolicy that selects it may move it)"
    return f"{value!r} (unknown: expected on or off)"
