"""Text for people about OffloadPolicies: the `policy list` table and the `policy status` page.

Pure functions of the policy's JSON and the current time. Read leniently, field by field: a policy the
controller has not reported on yet (no status), or whose status is partial or of an older shape, still
shows its spec and whatever status it has, and says what is missing instead of failing. The status shape
is the policy controller's (`vk_provider.policy`); the names of the Offload annotations come from
`vk_provider.policy.names`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.offloadcli.holds import describe_hold_value, span
from vk_provider.offloadcli.rendering import (
    NONE,
    PAGE_WIDTH,
    EventList,
    condition_lines,
    event_lines,
    format_table,
    human_age,
    number_text,
    shorten,
)
from vk_provider.policy.names import DEFAULT_GPU_RESOURCE, HOLD_UNTIL_NEXT_FLIP

RECENT_DECISIONS = 10
REASON_INDENT = "      "
REASON_LINES = 4
"""A longer reason is cut after this many lines (`...` marks it)."""
POOL_STATES = ("FREE", "RESERVED", "UNHEALTHY", "TOTAL")
OFFLOAD_COLUMNS = (
    "OFFLOAD",
    "PLACEMENT",
    "PHASE",
    "GPUS",
    "AUTO",
    "HOLD",
    "LAST FLIP",
    "TRIGGER",
    "NEXT ELIGIBLE",
)
TENSOR_METRIC = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
TENSOR_NOTE = (
    f"  TENSOR is the share of cycles the tensor cores were busy ({TENSOR_METRIC}): the work done.\n"
    "  GPU utilization alone says nothing: it reads 100% on a GPU that does little."
)
NO_STATUS = "no status yet: no policy controller has reported on it (is `vk-provider controller` running?)"
TIMING_DEFAULTS = {
    "flipOutAfterSeconds": 30,
    "flipBackAfterSeconds": 600,
    "minAwaySeconds": 300,
    "minHomeSeconds": 300,
    "maxFlipsPerHour": 4,
}


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is a mapping, else an empty one: a field of the wrong type reads as absent."""
    return value if isinstance(value, Mapping) else {}


def mappings(value: Any) -> list[Mapping[str, Any]]:
    """The mappings of a list field; anything else in it (or a non-list) is left out."""
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def spec_of(policy: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(policy.get("spec"))


def status_of(policy: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(policy.get("status"))


def condition(policy: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in mappings(status_of(policy).get("conditions")) if c.get("type") == kind), None)


def text(value: Any) -> str:
    """A scalar for a table cell: numbers without noise, `-` when absent or empty."""
    if value is None or value == "":
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return number_text(value)
    return str(value)


def percent(ratio: Any) -> str:
    """A 0..1 ratio as a whole percentage (`82%`); `-` when absent or not a number."""
    if isinstance(ratio, bool) or not isinstance(ratio, int | float):
        return NONE
    return f"{round(ratio * 100)}%"


def ago(value: Any, now: datetime) -> str:
    """`3m ago` for a past time, `in 2m` for a future one, `-` when absent; other text is shown as is."""
    moment = parse_timestamp(value)
    if moment is None:
        return text(value)
    if moment > now:
        return f"in {span((moment - now).total_seconds())}"
    return f"{human_age(moment, now)} ago"


def age_of(policy: Mapping[str, Any], now: datetime) -> str:
    return human_age(parse_timestamp(mapping(policy.get("metadata")).get("creationTimestamp")), now)


def describe_selector(selector: Any) -> str:
    """A label selector as kubectl writes it: `tier=inference,team in (ml,search)`; `everything` if empty."""
    if not isinstance(selector, Mapping):
        return "(not set)"
    parts = [f"{key}={value}" for key, value in mapping(selector.get("matchLabels")).items()]
    for expression in mappings(selector.get("matchExpressions")):
        operator = str(expression.get("operator", "")).lower()
        values = expression.get("values") or []
        key = expression.get("key", NONE)
        if operator == "exists":
            parts.append(str(key))
        elif operator == "doesnotexist":
            parts.append(f"!{key}")
        else:
            parts.append(f"{key} {operator} ({','.join(str(v) for v in values)})")
    return ",".join(parts) or "everything"


def pool_counts(policy: Mapping[str, Any]) -> list[str]:
    """free, reserved, unhealthy and total GPUs of the home pool, `-` each when not reported."""
    pool = mapping(status_of(policy).get("pool"))
    return [text(pool.get(state.lower())) for state in POOL_STATES]


def ready_text(policy: Mapping[str, Any]) -> str:
    ready = condition(policy, "Ready")
    return NONE if ready is None else text(ready.get("status"))


POLICY_WIDE_COLUMNS = ["SELECTOR", "RESOURCE", "REASON"]
"""What `-o wide` adds: which Offloads the policy moves, which GPUs it counts, and why it is not Ready."""


def policy_wide_cells(policy: Mapping[str, Any]) -> list[str]:
    spec = spec_of(policy)
    ready = condition(policy, "Ready") or {}
    return [
        describe_selector(mapping(spec.get("offloads")).get("selector")),
        text(mapping(spec.get("homePool")).get("resource") or DEFAULT_GPU_RESOURCE),
        text(ready.get("reason")) if ready.get("status") != "True" else NONE,
    ]


def render_policy_list(
    policies: Sequence[Mapping[str, Any]], *, now: datetime | None = None, wide: bool = False
) -> str:
    """NAME, PAUSED, DEMAND (GPUs), the pool's FREE/RESERVED/UNHEALTHY/TOTAL GPUs, OFFLOADS, READY, AGE;
    with `wide`, also `POLICY_WIDE_COLUMNS`."""
    now = now or datetime.now(UTC)
    header = [
        "NAME",
        "PAUSED",
        "DEMAND",
        "FREE",
        "RESERVED",
        "UNHEALTHY",
        "TOTAL",
        "OFFLOADS",
        "READY",
        "AGE",
        *(POLICY_WIDE_COLUMNS if wide else []),
    ]
    rows = []
    for policy in policies:
        status = status_of(policy)
        offloads = status.get("offloads")
        rows.append(
            [
                text(mapping(policy.get("metadata")).get("name")),
                "yes" if spec_of(policy).get("paused") else "no",
                text(mapping(status.get("demand")).get("gpus")),
                *pool_counts(policy),
                str(len(offloads)) if isinstance(offloads, list) else NONE,
                ready_text(policy),
                age_of(policy, now),
                *(policy_wide_cells(policy) if wide else []),
            ]
        )
    return format_table(header, rows)


def _indented(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["  " + line for line in format_table(header, rows).splitlines()]


def spec_lines(policy: Mapping[str, Any]) -> list[str]:
    """What the policy is asked to do, from its spec (with the CRD's defaults where a field is absent)."""
    spec = spec_of(policy)
    offloads = mapping(spec.get("offloads"))
    namespaces = offloads.get("namespaceSelector")
    where = (
        "every namespace" if namespaces is None else f"namespaces matching {describe_selector(namespaces)}"
    )
    pool = mapping(spec.get("homePool"))
    timing = {**TIMING_DEFAULTS, **mapping(spec.get("timing"))}
    return [
        f"Paused:       {'yes' if spec.get('paused') else 'no'}",
        f"Selects:      Offloads matching {describe_selector(offloads.get('selector'))}, in {where}",
        f"Home pool:    nodes matching {describe_selector(pool.get('nodeSelector'))}, "
        f"resource {pool.get('resource') or DEFAULT_GPU_RESOURCE}",
        f"Timing:       out after {text(timing['flipOutAfterSeconds'])}s of demand, back after "
        f"{text(timing['flipBackAfterSeconds'])}s without it;",
        f"              at least {text(timing['minAwaySeconds'])}s away and "
        f"{text(timing['minHomeSeconds'])}s home; "
        f"at most {text(timing['maxFlipsPerHour'])} flips an hour per Offload",
        warm_up_line(mapping(spec.get("warmUp"))),
    ]


def warm_up_line(warm_up: Mapping[str, Any]) -> str:
    """Early warm-up as the spec asks it (the CRD's defaults where absent): on or off, for how long,
    and the scheduled runs."""
    if warm_up.get("enabled") is False:
        return "Warm-up:      off"
    hold = warm_up.get("holdSeconds", 600)
    runs = [
        f"{text(run.get('cron'))} UTC ({text(run.get('gpus'))} GPUs)"
        for run in mappings(warm_up.get("schedule"))
    ]
    scheduled = f"; scheduled: {', '.join(runs)}" if runs else ""
    return f"Warm-up:      on foreseen demand, for {text(hold)}s after its last sign{scheduled}"


def observed_line(policy: Mapping[str, Any]) -> str:
    """Whether the controller has judged the current spec: `Observed: generation 3 of 3`."""
    observed = status_of(policy).get("observedGeneration")
    generation = mapping(policy.get("metadata")).get("generation")
    if observed is None:
        return f"Observed:     {NONE}"
    behind = (
        " (behind: the latest spec is not judged yet)"
        if isinstance(observed, int) and isinstance(generation, int) and observed < generation
        else ""
    )
    return f"Observed:     generation {text(observed)} of {text(generation)}{behind}"


def demand_lines(status: Mapping[str, Any], now: datetime) -> list[str]:
    """Training demand: the GPUs asked for, per gang, with what is still unplaced and since when, and
    how long a waiting gang has waited and for what."""
    demand = status.get("demand")
    if not isinstance(demand, Mapping):
        return [f"Demand:       {NONE} (not reported)"]
    gangs = mappings(demand.get("gangs"))
    count = f"{len(gangs)} gang" + ("" if len(gangs) == 1 else "s")
    gone = parse_timestamp(demand.get("goneSince"))
    since = f" (none since {human_age(gone, now)} ago)" if gone is not None and not gangs else ""
    lines = [f"Demand:       {text(demand.get('gpus'))} GPUs from {count}{since}"]
    if not gangs:
        return lines
    rows = [
        [
            text(gang.get("kind")),
            "/".join(text(gang.get(part)) for part in ("namespace", "name")),
            text(gang.get("gpus")),
            text(gang.get("unplacedGpus")),
            ago(gang.get("since"), now),
            waited(gang.get("waitingSeconds")),
            waiting_for(gang),
        ]
        for gang in gangs
    ]
    return lines + _indented(["KIND", "GANG", "GPUS", "UNPLACED", "SINCE", "WAITED", "WAITING FOR"], rows)


def waited(value: Any) -> str:
    """How long a gang has waited for its GPUs (the policy's waitingSeconds), as an age: 45s, 12m."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return NONE
    return human_age(datetime.fromtimestamp(0, UTC), datetime.fromtimestamp(max(0, value), UTC))


def waiting_for(gang: Mapping[str, Any]) -> str:
    """The stage a gang waits at, with the Offloads whose migrations it waits on: WarmingAway ns/a."""
    stage = gang.get("waitingFor")
    if not isinstance(stage, str) or not stage:
        return NONE
    on = [item for item in gang.get("waitingOn") or () if isinstance(item, str)]
    return f"{stage} {', '.join(on)}" if on else stage


def _health(node: Mapping[str, Any]) -> str:
    """`healthy`, `unhealthy: Reason`, or `settling` (healthy again, not yet for long enough to count)."""
    healthy, reason = node.get("healthy"), node.get("reason")
    if healthy is False:
        return f"unhealthy: {reason}" if reason else "settling"
    if healthy is True:
        return "healthy"
    return text(reason)


def _temperature(value: Any) -> str:
    return NONE if isinstance(value, bool) or not isinstance(value, int | float) else f"{number_text(value)}C"


def pool_lines(status: Mapping[str, Any], now: datetime) -> list[str]:
    """The home pool's GPUs by state, and per node: health with the reason, temperature, tensor activity."""
    pool = status.get("pool")
    if not isinstance(pool, Mapping):
        return [f"Home GPUs:    {NONE} (not reported)"]
    states = ", ".join(
        f"{text(pool.get(state))} {state}" for state in ("free", "reserved", "busy", "unhealthy")
    )
    resource = pool.get("resource") or DEFAULT_GPU_RESOURCE
    lines = [f"Home GPUs:    {text(pool.get('total'))} {resource}: {states}"]
    tensor = pool.get("tensorActive")
    lines.append(
        f"Tensor cores: {percent(tensor)} active on average"
        if percent(tensor) != NONE
        else "Tensor cores: not reported (no dcgm-exporter configured, or none answered)"
    )
    nodes = mappings(pool.get("nodes"))
    if nodes:
        rows = [
            [
                text(node.get("name")),
                text(node.get("gpus")),
                text(node.get("free")),
                text(node.get("reserved")),
                _health(node),
                ago(node.get("since"), now),
                _temperature(node.get("temperatureCelsius")),
                percent(node.get("tensorActive")),
            ]
            for node in nodes
        ]
        header = ["NODE", "GPUS", "FREE", "RESERVED", "HEALTH", "SINCE", "TEMP", "TENSOR"]
        lines += _indented(header, rows)
    return [*lines, TENSOR_NOTE, *exporter_error_lines(status)]


HEALTH_COLUMNS = ("NODE", "SIGNAL", "SEVERITY", "SINCE", "ACTION", "DETAIL")


def health_lines(status: Mapping[str, Any], now: datetime) -> list[str]:
    """Which rule judged each node (the signal, its severity, since when, what came of it: tainted,
    held back by the cap, pending until due, reported), every other finding below it, and the cap on
    non-fatal taints. Nothing when no node shows any signal and no cap was reported."""
    pool = mapping(status.get("pool"))
    rows = []
    for node in mappings(pool.get("nodes")):
        rule = mapping(node.get("rule"))
        if not rule:
            continue
        findings = [rule] + [
            f for f in mappings(node.get("findings")) if f.get("detail") != rule.get("detail")
        ]
        for index, finding in enumerate(findings):
            rows.append(
                [
                    text(node.get("name")) if index == 0 else "",
                    text(finding.get("signal")),
                    text(finding.get("severity")),
                    ago(finding.get("since"), now),
                    _action(rule, now) if index == 0 else "also",
                    shorten(text(finding.get("detail")), 60),
                ]
            )
    cap = mapping(pool.get("healthCap"))
    lines = [f"Health rules: {_cap_text(cap)}" if cap else "Health rules:"]
    if not rows:
        return [f"{lines[0]}; no node shows a signal"] if cap else []
    return lines + _indented(HEALTH_COLUMNS, rows)


def _action(rule: Mapping[str, Any], now: datetime) -> str:
    action = text(rule.get("action"))
    if action == "pending" and rule.get("due"):
        return f"taints {ago(rule.get('due'), now)}"
    return action


def _cap_text(cap: Mapping[str, Any]) -> str:
    """`at most 1 of 4 nodes tainted for non-fatal reasons (maxNonFatalShare 0.25); held back: a, b`."""
    held_back = [str(name) for name in cap.get("heldBack") or ()]
    text_ = (
        f"at most {text(cap.get('slots'))} of {text(cap.get('poolNodes'))} nodes tainted for non-fatal "
        f"reasons (maxNonFatalShare {text(cap.get('maxNonFatalShare'))})"
    )
    return text_ + (f"; cap reached, held back: {', '.join(held_back)}" if held_back else "")


def exporter_error_lines(status: Mapping[str, Any]) -> list[str]:
    """The dcgm-exporters that could not be read (unreachable, malformed): their GPUs show no readings."""
    errors = mapping(status.get("exporterErrors"))
    if not errors:
        return []
    return [
        "Exporter errors:",
        *(f"  {where}: {shorten(text(message), PAGE_WIDTH)}" for where, message in errors.items()),
    ]


def hold_cell(value: Any, now: datetime) -> str:
    """An Offload's hold in a table cell: `next flip`, `1h59m left`, `ended`; `-` when there is none."""
    if value is None or value == "":
        return NONE
    if value == HOLD_UNTIL_NEXT_FLIP:
        return "next flip"
    described = describe_hold_value(value, now)
    if described.startswith("until "):
        return described.split("(", 1)[1].rstrip(")")
    return "ended" if described.startswith("ended") else str(value)


def _auto(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "on" if value is None else str(value)


def _last_flip(value: Any, now: datetime) -> str:
    """`lastFlip` as a time, or as an object with a time and a direction (`away 3m ago`)."""
    if isinstance(value, Mapping):
        when = ago(value.get("time") or value.get("at"), now)
        where = value.get("placement") or value.get("to") or value.get("direction")
        return f"{where} {when}" if where else when
    return ago(value, now)


def _eligible(value: Any, now: datetime) -> str:
    moment = parse_timestamp(value)
    if moment is not None and moment <= now:
        return "now"
    return ago(value, now)


def offload_lines(status: Mapping[str, Any], now: datetime) -> list[str]:
    """Each selected Offload: placement, phase, home GPUs, auto, hold, last flip, trigger, next eligible."""
    offloads = status.get("offloads")
    if not isinstance(offloads, list):
        return [f"Offloads:     {NONE} (not reported)"]
    if not offloads:
        return ["Offloads:     none selected"]
    rows = [
        [
            "/".join(text(offload.get(part)) for part in ("namespace", "name")),
            text(offload.get("placement")),
            text(offload.get("phase")),
            text(offload.get("homeGpus")),
            _auto(offload.get("auto")),
            hold_cell(offload.get("holdUntil"), now),
            _last_flip(offload.get("lastFlip"), now),
            text(offload.get("lastTrigger")),
            _eligible(offload.get("nextEligible"), now),
        ]
        for offload in mappings(offloads)
    ]
    return ["Offloads:", *_indented(OFFLOAD_COLUMNS, rows)]


def _targets(decision: Mapping[str, Any]) -> str:
    """The Offloads (`ns/name`) and nodes (`node/name`) a decision was about."""
    offloads, nodes = decision.get("offloads"), decision.get("nodes")
    names = [str(o) for o in offloads] if isinstance(offloads, list) else []
    names += [f"node/{n}" for n in nodes] if isinstance(nodes, list) else []
    return ",".join(names) or NONE


def decision_lines(status: Mapping[str, Any], now: datetime) -> list[str]:
    """The last decisions, newest first: when, what, on which Offloads and nodes, then the reason (and its
    message) on lines of their own below, wrapped to the page: it is what a person reads the page for."""
    decisions = mappings(status.get("decisions"))[:RECENT_DECISIONS]
    if not decisions:
        return ["Decisions:    none yet"]
    rows = [
        [
            ago(decision.get("time"), now),
            text(decision.get("action")),
            _targets(decision),
        ]
        for decision in decisions
    ]
    table = _indented(["AGE", "ACTION", "ON"], rows)
    lines = ["Decisions (newest first):", table[0]]
    for row, decision in zip(table[1:], decisions, strict=True):
        message = decision.get("message")
        reason = textwrap.wrap(
            text(decision.get("reason")) + (f": {message}" if message else ""),
            PAGE_WIDTH - len(REASON_INDENT),
            max_lines=REASON_LINES,
            placeholder=" ...",
        )
        lines += [row, *(REASON_INDENT + line for line in reason)]
    return lines


def render_policy_status(
    policy: Mapping[str, Any], events: EventList | None = None, *, now: datetime | None = None
) -> str:
    """The `policy status` page: the spec always; the status's sections as far as they are reported; the
    Recent events section when `events` is given."""
    now = now or datetime.now(UTC)
    lines = [
        f"Name:         {text(mapping(policy.get('metadata')).get('name'))}",
        f"Age:          {age_of(policy, now)}",
        *spec_lines(policy),
    ]
    status = status_of(policy)
    if not status:
        lines.append(f"Status:       {NO_STATUS}")
    else:
        lines += [
            observed_line(policy),
            *demand_lines(status, now),
            *pool_lines(status, now),
            *health_lines(status, now),
            *offload_lines(status, now),
            *decision_lines(status, now),
            "Conditions:",
            *condition_lines(mappings(status.get("conditions")), now),
        ]
    if events is not None:
        lines += event_lines(events, policy, now)
    return "\n".join(lines)
