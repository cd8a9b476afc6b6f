"""Text for people: the list table, the status page, progress lines, and JSON/YAML for machines.

Pure functions of Offload JSON (and the current time), so every layout is unit-tested without a
cluster. Plain text only: `rich` is not a dependency of the project.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import yaml

from vk_provider.migration.plan import DEFAULT_TO_AWAY_STEPS, DEFAULT_TO_HOME_STEPS

RawObject = Mapping[str, Any]

RUNNING_PHASES = frozenset({"Preparing", "Shifting", "Paused", "Finalizing"})
TERMINAL_PHASES = frozenset({"Succeeded", "RolledBack", "Failed"})
BAR_WIDTH = 20
NONE = "-"


def exit_code_of_phase(phase: str | None) -> int | None:
    """The exit code a finished migration maps to (0 Succeeded, 1 RolledBack/Failed); None while running."""
    if phase == "Succeeded":
        return 0
    if phase in ("RolledBack", "Failed"):
        return 1
    return None


def spec_of(offload: RawObject) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = offload.get("spec") or {}
    return spec


def status_of(offload: RawObject) -> Mapping[str, Any]:
    status: Mapping[str, Any] = offload.get("status") or {}
    return status


def is_running(offload: RawObject) -> bool:
    return status_of(offload).get("phase") in RUNNING_PHASES


def direction_placement(offload: RawObject) -> str:
    """The placement the current (or last) migration goes to: status.targetPlacement, else spec.placement."""
    return str(status_of(offload).get("targetPlacement") or spec_of(offload).get("placement") or "home")


def steps_toward(offload: RawObject, placement: str) -> tuple[int, ...]:
    strategy = spec_of(offload).get("strategy") or {}
    if placement == "away":
        return tuple(strategy.get("toAwaySteps") or DEFAULT_TO_AWAY_STEPS)
    return tuple(strategy.get("toHomeSteps") or DEFAULT_TO_HOME_STEPS)


def step_text(offload: RawObject) -> str:
    """`i/n`: the step index of the schedule toward the target (0 = start weight) over its number of steps."""
    index = status_of(offload).get("stepIndex")
    if index is None:
        return NONE
    return f"{index}/{len(steps_toward(offload, direction_placement(offload)))}"


def weight_text(offload: RawObject) -> str:
    weight = status_of(offload).get("awayWeight")
    return NONE if weight is None else f"{weight}%"


def progress_bar(weight: int, width: int = BAR_WIDTH) -> str:
    """`[#####---------------]  25% away`: the share of requests routed away."""
    clamped = max(0, min(100, weight))
    filled = round(clamped * width / 100)
    return f"[{'#' * filled}{'-' * (width - filled)}] {clamped:3d}% away"


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_age(since: datetime | None, now: datetime) -> str:
    """kubectl-like short ages: 45s, 12m, 5h, 3d."""
    if since is None:
        return NONE
    seconds = max(0, int((now - since).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 3 * 3600:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _age(offload: RawObject, now: datetime) -> str:
    return human_age(parse_time((offload.get("metadata") or {}).get("creationTimestamp")), now)


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, separated by three spaces, like kubectl."""
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    lines = [
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines)


def render_list(offloads: Sequence[RawObject], *, all_namespaces: bool, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    header = ["NAME", "PLACEMENT", "PHASE", "AWAY WEIGHT", "STEP", "AGE"]
    if all_namespaces:
        header = ["NAMESPACE", *header]
    rows = []
    for offload in offloads:
        metadata = offload.get("metadata") or {}
        row = [
            str(metadata.get("name", NONE)),
            str(spec_of(offload).get("placement") or NONE),
            str(status_of(offload).get("phase") or NONE),
            weight_text(offload),
            step_text(offload),
            _age(offload, now),
        ]
        rows.append([str(metadata.get("namespace", NONE)), *row] if all_namespaces else row)
    return format_table(header, rows)


def _placement_line(offload: RawObject) -> str:
    placement = str(spec_of(offload).get("placement") or NONE)
    target = status_of(offload).get("targetPlacement")
    if is_running(offload) and target:
        return f"{placement} (migrating to {target})"
    return placement


def _condition_lines(conditions: Sequence[Mapping[str, Any]], now: datetime) -> list[str]:
    if not conditions:
        return ["  (none)"]
    header = ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"]
    rows = [
        [
            str(condition.get("type", NONE)),
            str(condition.get("status", NONE)),
            str(condition.get("reason", NONE)),
            human_age(parse_time(condition.get("lastTransitionTime")), now),
            str(condition.get("message", "")),
        ]
        for condition in conditions
    ]
    return ["  " + line for line in format_table(header, rows).splitlines()]


def render_status(offload: RawObject, *, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    metadata = offload.get("metadata") or {}
    spec = spec_of(offload)
    status = status_of(offload)
    weight = status.get("awayWeight")
    target = direction_placement(offload)
    steps = ",".join(str(step) for step in steps_toward(offload, target))
    lines = [
        f"Name:         {metadata.get('name', NONE)}",
        f"Namespace:    {metadata.get('namespace', NONE)}",
        f"Placement:    {_placement_line(offload)}",
        f"Phase:        {status.get('phase') or NONE}",
        f"Away weight:  {NONE if weight is None else progress_bar(int(weight))}",
        f"Step:         {step_text(offload)} (toward {target}: {steps})",
        f"Paused:       {'yes' if spec.get('paused') else 'no'}",
        f"Age:          {_age(offload, now)}",
        f"Message:      {status.get('message') or NONE}",
        "Conditions:",
        *_condition_lines(status.get("conditions") or [], now),
    ]
    return "\n".join(lines)


def progress_line(offload: RawObject) -> str:
    """One line per change while waiting: phase, weight and step."""
    name = (offload.get("metadata") or {}).get("name", NONE)
    status = status_of(offload)
    phase = status.get("phase") or "Pending"
    message = status.get("message")
    line = f"offload {name}: {phase}, away weight {weight_text(offload)}, step {step_text(offload)}"
    return f"{line}: {message}" if message else line


def as_json(document: Any) -> str:
    return json.dumps(document, indent=2, sort_keys=False)


def as_yaml(document: Any) -> str:
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False).rstrip("\n")


def render_document(document: Any, output: str) -> str:
    return as_json(document) if output == "json" else as_yaml(document)
