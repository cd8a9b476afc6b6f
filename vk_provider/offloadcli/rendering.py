"""Text for people: the list table, the status page, progress lines, and JSON/YAML for machines.

Pure functions of Offload JSON (with the Events about it, and the current time), so every layout is
unit-tested without a cluster. Plain text only: `rich` is not a dependency of the project. What an
Offload is (its status, phases and defaults) comes from `vk_provider.offload`; this module only
decides how it looks. The spec is read leniently here, field by field with the CRD's defaults, so a
page still shows what it can of an Offload the controller refuses.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.offload.names import WARMED_BY_ANNOTATION
from vk_provider.offload.plan import (
    DEFAULT_FAILURES_BEFORE_ROLLBACK,
    DEFAULT_TO_AWAY_STEPS,
    DEFAULT_TO_HOME_STEPS,
)
from vk_provider.offload.spec import (
    DEFAULT_DATA_PLANE,
    DEFAULT_MAX_ERROR_RATE_PERCENT,
    DEFAULT_MAX_P99_LATENCY_MS,
    DEFAULT_MIN_REQUESTS_PER_INTERVAL,
    DEFAULT_STEP_INTERVAL_SECONDS,
    MAX_AWAY_REPLICAS,
)
from vk_provider.offload.status import InvalidStatus, OffloadStatus, Phase
from vk_provider.offloadcli.holds import hold_lines

RawObject = Mapping[str, Any]

BAR_WIDTH = 20
NONE = "-"
PAGE_WIDTH = 100
"""Event messages are cut so that their lines fit this many columns."""
RECENT_EVENTS = 5
MIN_MESSAGE_WIDTH = 20


def exit_code_of_phase(phase: str | None) -> int | None:
    """The exit code a finished migration maps to (0 Succeeded, 1 RolledBack/Failed); None while running."""
    if phase == Phase.SUCCEEDED:
        return 0
    if phase in (Phase.ROLLED_BACK, Phase.FAILED):
        return 1
    return None


def spec_of(offload: RawObject) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = offload.get("spec") or {}
    return spec


def status_of(offload: RawObject) -> OffloadStatus:
    """The typed status; one the API could not have stored (wrong types) shows as empty."""
    try:
        return OffloadStatus.from_raw(offload.get("status"))
    except InvalidStatus:
        return OffloadStatus()


def is_running(offload: RawObject) -> bool:
    return status_of(offload).running


def direction_placement(offload: RawObject) -> str:
    """The placement the current (or last) migration goes to: status.targetPlacement, else spec.placement."""
    return str(status_of(offload).target_placement or spec_of(offload).get("placement") or "home")


def condition_of(offload: RawObject, kind: str) -> Mapping[str, Any] | None:
    """The status condition of this type, or None."""
    return next((c for c in status_of(offload).conditions if c.get("type") == kind), None)


def flip_command(offload: RawObject, placement: str) -> str:
    """The command line that flips this Offload to `placement`, namespace included."""
    metadata = offload.get("metadata") or {}
    namespace = metadata.get("namespace")
    where = f" -n {namespace}" if namespace else ""
    return f"kubectl offload flip {metadata.get('name', NONE)} --to {placement}{where}"


def retry_hint(offload: RawObject) -> str:
    """What to do after a migration rolled back or failed: try it again, or go back."""
    target = direction_placement(offload)
    status = status_of(offload)
    why = f" ({status.outcome_reason})" if status.outcome_reason else ""
    back = "home" if target == "away" else "away"
    return (
        f"the migration to {target} ended {status.phase or NONE}{why}; to try it again: "
        f"`{flip_command(offload, target)}`; to go back: `{flip_command(offload, back)}`"
    )


def hint_lines(offload: RawObject) -> list[str]:
    """A `Next:` line when the Offload needs a person: not Ready, or its last migration ended badly."""
    ready = condition_of(offload, "Ready")
    if ready is not None and ready.get("status") == "False":
        return [
            f"Next:         fix {ready.get('reason', 'NotReady')} (see Conditions); nothing moves until then"
        ]
    if status_of(offload).phase in (Phase.ROLLED_BACK, Phase.FAILED):
        return [f"Next:         {retry_hint(offload)}"]
    return []


def strategy_of(offload: RawObject) -> Mapping[str, Any]:
    strategy: Mapping[str, Any] = spec_of(offload).get("strategy") or {}
    return strategy


def steps_toward(offload: RawObject, placement: str) -> tuple[int, ...]:
    strategy = strategy_of(offload)
    if placement == "away":
        return tuple(strategy.get("toAwaySteps") or DEFAULT_TO_AWAY_STEPS)
    return tuple(strategy.get("toHomeSteps") or DEFAULT_TO_HOME_STEPS)


def migration_steps(offload: RawObject) -> tuple[int, ...]:
    """The steps of the current (or last) migration.

    The controller copies them into status.steps when a migration starts, and status.stepIndex counts
    along that copy, so it wins over the spec, which may have been edited since. Before any migration
    there is no copy, and the spec's steps toward the target (or the CRD defaults) are shown.
    """
    snapshot = status_of(offload).steps
    if snapshot:
        return snapshot
    return steps_toward(offload, direction_placement(offload))


def migration_interval_seconds(offload: RawObject) -> int:
    """The step interval of the current (or last) migration: the copy in status.stepIntervalSeconds
    (a flip's own, perhaps), as for the steps; before any migration, the spec's (or the CRD default)."""
    snapshot = status_of(offload).step_interval_seconds
    if snapshot:
        return snapshot
    return int(strategy_of(offload).get("stepIntervalSeconds") or DEFAULT_STEP_INTERVAL_SECONDS)


def step_text(offload: RawObject) -> str:
    """`i/n`: the step index of the schedule toward the target (0 = start weight) over its number of steps."""
    index = status_of(offload).step_index
    if index is None:
        return NONE
    return f"{index}/{len(migration_steps(offload))}"


def weight_text(offload: RawObject) -> str:
    weight = status_of(offload).away_weight
    return NONE if weight is None else f"{weight}%"


def progress_bar(weight: int, width: int = BAR_WIDTH) -> str:
    """`[#####---------------]  25% away`: the share of requests routed away."""
    clamped = max(0, min(100, weight))
    filled = round(clamped * width / 100)
    return f"[{'#' * filled}{'-' * (width - filled)}] {clamped:3d}% away"


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
    return human_age(parse_timestamp((offload.get("metadata") or {}).get("creationTimestamp")), now)


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, separated by three spaces, like kubectl."""
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    lines = [
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines)


WIDE_COLUMNS = ["DATA PLANE", "HOSTS", "READY", "REASON", "HOME REPLICAS", "AWAY REPLICAS"]
"""What `-o wide` adds: where the traffic goes and whether the controller can act on the Offload."""


def wide_cells(offload: RawObject) -> list[str]:
    """The `-o wide` cells: the data plane, the routed hosts (`*`: every host), the Ready condition's
    status and its reason (so a RouteConflict shows in a listing), and a spill-over Offload's replicas."""
    spec = spec_of(offload)
    traffic = spec.get("traffic") or {}
    hosts = (spec.get("route") or {}).get("hosts") or ()
    ready = condition_of(offload, "Ready") or {}
    spill = (status_of(offload).spill_over or {}) if isinstance(spec.get("spillOver"), Mapping) else {}
    return [
        str(traffic.get("dataPlane") or DEFAULT_DATA_PLANE),
        ",".join(str(host) for host in hosts) or "*",
        str(ready.get("status") or NONE),
        str(ready.get("reason") or NONE) if ready.get("status") != "True" else NONE,
        str(spill.get("homeReplicas", NONE)),
        str(spill.get("awayReplicas", NONE)),
    ]


def render_list(
    offloads: Sequence[RawObject], *, all_namespaces: bool, now: datetime | None = None, wide: bool = False
) -> str:
    now = now or datetime.now(UTC)
    header = ["NAME", "PLACEMENT", "PHASE", "AWAY WEIGHT", "STEP", "AGE", *(WIDE_COLUMNS if wide else [])]
    if all_namespaces:
        header = ["NAMESPACE", *header]
    rows = []
    for offload in offloads:
        metadata = offload.get("metadata") or {}
        row = [
            str(metadata.get("name", NONE)),
            str(spec_of(offload).get("placement") or NONE),
            str(status_of(offload).phase or NONE),
            weight_text(offload),
            step_text(offload),
            _age(offload, now),
            *(wide_cells(offload) if wide else []),
        ]
        rows.append([str(metadata.get("namespace", NONE)), *row] if all_namespaces else row)
    return format_table(header, rows)


def _placement_line(offload: RawObject) -> str:
    placement = str(spec_of(offload).get("placement") or NONE)
    target = status_of(offload).target_placement
    if is_running(offload) and target:
        return f"{placement} (migrating to {target})"
    return placement


def condition_lines(conditions: Sequence[Mapping[str, Any]], now: datetime) -> list[str]:
    if not conditions:
        return ["  (none)"]
    header = ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"]
    rows = [
        [
            str(condition.get("type", NONE)),
            str(condition.get("status", NONE)),
            str(condition.get("reason", NONE)),
            human_age(parse_timestamp(condition.get("lastTransitionTime")), now),
            str(condition.get("message", "")),
        ]
        for condition in conditions
    ]
    return ["  " + line for line in format_table(header, rows).splitlines()]


def number_text(value: Any) -> str:
    """A number from JSON without float noise or exponents: 1, 0.5, 2.125, 180.4; `-` when absent."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return NONE if value is None else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _gate_limits(offload: RawObject) -> str:
    gates: Mapping[str, Any] = strategy_of(offload).get("gates") or {}
    error_rate = gates.get("maxErrorRatePercent", DEFAULT_MAX_ERROR_RATE_PERCENT)
    p99 = gates.get("maxP99LatencyMilliseconds", DEFAULT_MAX_P99_LATENCY_MS)
    requests = gates.get("minRequestsPerInterval", DEFAULT_MIN_REQUESTS_PER_INTERVAL)
    return (
        f"error rate <= {number_text(error_rate)}%, p99 <= {number_text(p99)} ms, "
        f"at least {number_text(requests)} requests per interval"
    )


def _failures_line(offload: RawObject) -> list[str]:
    failures = status_of(offload).consecutive_failures
    if not failures:
        return []
    allowed = strategy_of(offload).get("failuresBeforeRollback", DEFAULT_FAILURES_BEFORE_ROLLBACK)
    return [f"  Failures:    {failures}/{allowed} failed checks in a row (rolls back at {allowed})"]


def gate_lines(offload: RawObject, now: datetime) -> list[str]:
    """The Gates section: the configured limits, the last check of an interval and the failure count."""
    lines = ["Gates:", f"  Limits:      {_gate_limits(offload)}"]
    check = status_of(offload).last_check
    if not check:
        lines.append("  Last check:  none yet")
    else:
        p99 = check.get("p99Milliseconds")
        baseline = check.get("baselineErrorRatePercent")
        verdict, side = check.get("verdict") or NONE, check.get("side") or NONE
        when = human_age(parse_timestamp(check.get("at")), now)
        lines += [
            f"  Last check:  {verdict} on the {side} side, {when} ago",
            f"  Measured:    {number_text(check.get('requests'))} requests, "
            f"error rate {number_text(check.get('errorRatePercent'))}%"
            # Both sides served: the judged side was compared with the other one's rate.
            + ("" if baseline is None else f" (the other side {number_text(baseline)}%)")
            + f", p99 {NONE if p99 is None else number_text(p99) + ' ms'}",
        ]
        if check.get("message"):
            lines.append(f"  Message:     {check['message']}")
    return lines + _failures_line(offload)


@dataclass(frozen=True)
class EventList:
    """The Events listed about an Offload, or why they could not be listed."""

    items: Sequence[RawObject] = ()
    note: str | None = None


def _event_time(event: RawObject) -> datetime | None:
    series = event.get("series") or {}
    for stamp in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        parsed = parse_timestamp(stamp)
        if parsed is not None:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _event_order(event: RawObject) -> tuple[datetime, int]:
    version = str((event.get("metadata") or {}).get("resourceVersion") or "")
    return (
        _event_time(event) or datetime.min.replace(tzinfo=UTC),
        int(version) if version.isdigit() else 0,
    )


def recent_events(
    events: Sequence[RawObject], offload: RawObject, limit: int = RECENT_EVENTS
) -> list[RawObject]:
    """The last `limit` Events about this Offload, oldest first.

    A deleted and recreated Offload of the same name has a new uid: Events that name another uid are
    about the old one and left out (an Event without a uid is kept).
    """
    uid = (offload.get("metadata") or {}).get("uid")
    mine = [
        event
        for event in events
        if not uid
        or not (event.get("involvedObject") or {}).get("uid")
        or (event.get("involvedObject") or {}).get("uid") == uid
    ]
    return sorted(mine, key=_event_order)[-limit:] if limit > 0 else []


def shorten(text: str, width: int) -> str:
    """One line of at most `width` characters, ending in `...` when cut."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    return flat[: max(0, width - 3)].rstrip() + "..."


def _event_age(event: RawObject, now: datetime) -> str:
    age = human_age(_event_time(event), now)
    count = event.get("count") or (event.get("series") or {}).get("count") or 1
    if isinstance(count, int) and count > 1:
        first = parse_timestamp(event.get("firstTimestamp"))
        return f"{age} (x{count} over {human_age(first, now)})" if first else f"{age} (x{count})"
    return age


def event_lines(events: EventList, offload: RawObject, now: datetime) -> list[str]:
    """The Recent events section: `AGE  TYPE  REASON  MESSAGE`, newest last, cut to the page width."""
    lines = ["Recent events:"]
    if events.note:
        return [*lines, f"  ({events.note})"]
    shown = recent_events(events.items, offload)
    if not shown:
        return [*lines, "  (none)"]
    header = ["AGE", "TYPE", "REASON"]
    rows = [
        [_event_age(event, now), str(event.get("type") or NONE), str(event.get("reason") or NONE)]
        for event in shown
    ]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    prefix_width = 2 + sum(widths) + 3 * len(widths)  # indent, columns, and the gap before each next
    message_width = max(MIN_MESSAGE_WIDTH, PAGE_WIDTH - prefix_width)
    messages = [shorten(str(event.get("message") or ""), message_width) for event in shown]
    table = format_table(
        [*header, "MESSAGE"], [[*row, message] for row, message in zip(rows, messages, strict=True)]
    )
    return [*lines, *("  " + line for line in table.splitlines())]


def render_status(offload: RawObject, events: EventList | None = None, *, now: datetime | None = None) -> str:
    """The status page; the Recent events section is there when `events` is given."""
    now = now or datetime.now(UTC)
    metadata = offload.get("metadata") or {}
    spec = spec_of(offload)
    status = status_of(offload)
    weight = status.away_weight
    target = direction_placement(offload)
    steps = ",".join(str(step) for step in migration_steps(offload))
    lines = [
        f"Name:         {metadata.get('name', NONE)}",
        f"Namespace:    {metadata.get('namespace', NONE)}",
        f"Placement:    {_placement_line(offload)}",
        f"Phase:        {status.phase or NONE}",
        f"Away weight:  {NONE if weight is None else progress_bar(int(weight))}",
        f"Step:         {step_text(offload)} (toward {target}: {steps}; "
        f"{migration_interval_seconds(offload)}s per step)",
        f"Paused:       {'yes' if spec.get('paused') else 'no'}",
        *spill_over_lines(offload),
        *warm_lines(offload),
        *route_lines(offload),
        *hold_lines(offload, now),
        f"Age:          {_age(offload, now)}",
        f"Message:      {status.message or NONE}",
        *hint_lines(offload),
        *gate_lines(offload, now),
        "Conditions:",
        *condition_lines(status.conditions, now),
    ]
    if events is not None:
        lines += event_lines(events, offload, now)
    return "\n".join(lines)


def spill_over_lines(offload: RawObject) -> list[str]:
    """A spill-over Offload's replicas on each side, the capacity split and the away side's cost."""
    wanted = spec_of(offload).get("spillOver")
    if not isinstance(wanted, Mapping):
        return []
    spill = status_of(offload).spill_over or {}
    replicas = spec_of(offload).get("replicas")
    cost = spill.get("awayCostPerHour")
    return [
        f"Spill-over:   {NONE if replicas is None else replicas} replicas wanted; home holds "
        f"{wanted.get('maxHomeReplicas', NONE)}, away {wanted.get('minAwayReplicas', 0)}.."
        f"{wanted.get('maxAwayReplicas', MAX_AWAY_REPLICAS)}",
        f"              home {spill.get('homeReadyReplicas', NONE)}/{spill.get('homeReplicas', NONE)} ready, "
        f"away {spill.get('awayReadyReplicas', NONE)}/{spill.get('awayReplicas', NONE)} ready; "
        f"capacity split {spill.get('capacityWeight', NONE)}% away",
        f"              away cost: {NONE if cost is None else f'${number_text(cost)}/hour'}",
    ]


def warm_lines(offload: RawObject) -> list[str]:
    """The away replicas kept warm while home serves (`status.warm`), when there are any."""
    warm = status_of(offload).warm or {}
    if not warm.get("replicas"):
        return []
    if warm.get("reason") == "WarmUp":
        by = ((offload.get("metadata") or {}).get("annotations") or {}).get(WARMED_BY_ANNOTATION)
        why = f"warm-up until {warm.get('until', NONE)}" + (f", for {by}" if by else "")
    else:
        why = "pilot light, spec.away.warmReplicas"
    return [f"Away warm:    {warm.get('ready', NONE)}/{warm['replicas']} ready ({why})"]


def route_lines(offload: RawObject) -> list[str]:
    """What the Offload routes, who else may route under its hosts, and what becomes of the route."""
    route = spec_of(offload).get("route") or {}
    home = spec_of(offload).get("home") or {}
    hosts = ", ".join(route.get("hosts") or ()) or "every host"
    lines = [f"Route:        {hosts}, path prefix {route.get('pathPrefix') or '/'}"]
    allowed = route.get("allowedNamespaces") or ()
    if allowed:
        lines.append(f"              other namespaces may claim paths of its hosts: {', '.join(allowed)}")
    lines.append(
        f"              kept for Service {home.get('service', NONE)} once this Offload is deleted, until "
        f"KeptRoute {(offload.get('metadata') or {}).get('name', NONE)} is deleted"
    )
    return lines


def progress_line(offload: RawObject) -> str:
    """One line per change while waiting: phase, weight and step."""
    name = (offload.get("metadata") or {}).get("name", NONE)
    status = status_of(offload)
    phase = status.phase or "Pending"
    message = status.message
    line = f"offload {name}: {phase}, away weight {weight_text(offload)}, step {step_text(offload)}"
    return f"{line}: {message}" if message else line


def as_json(document: Any) -> str:
    return json.dumps(document, indent=2, sort_keys=False)


def as_yaml(document: Any) -> str:
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False).rstrip("\n")


def render_document(document: Any, output: str) -> str:
    return as_json(document) if output == "json" else as_yaml(document)
