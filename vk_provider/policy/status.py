"""The OffloadPolicy's status: what the policy sees and did, for people, `kubectl offload policy status`
and the next leader.

Shape (every key optional; `kubectl get ofp` shows demand.gpus and the pool's counts):

    observedGeneration
    conditions: [Ready, TrainingDemand, HomeCapacityHealthy, HealthCapReached, GpuMetricsAvailable,
                 PodGroupsReadable]
    demand: {gpus, goneSince, gangs: [{kind, namespace, name, gpus, unplacedGpus, since, shortfallSince,
                                       waitingSeconds, waitingFor, waitingOn}]}
    pool: {resource, total, free, reserved, busy, unhealthy, tensorActive,
           nodes: [{name, gpus, free, healthy, reason, since, temperatureCelsius, tensorActive, reserved,
                    rule: {signal, severity, detail, since, action, due}, heldBack,
                    findings: [{signal, severity, detail, since}]}],
           healthCap: {maxNonFatalShare, poolNodes, slots, held, heldBack}}
    offloads: [{namespace, name, placement, phase, homeGpus, auto, holdUntil, lastFlip, lastTrigger,
                nextEligible}]
    decisions: [{time, action, offloads, nodes, reason, message}]   # newest first, at most 20
    exporterErrors: {pod or node: message}

`demand.gangs[].since`, `shortfallSince` and `demand.goneSince` are the policy's memory (`History`):
a new leader reads them back, so its clocks continue instead of starting again. `waitingSeconds` and
`waitingFor` (a `waiting.Stage`) say how long a gang with unplaced members has waited and for what;
`waitingOn` lists the Offloads whose migrations it waits on.

A node's `rule` is the health finding that judged it, with what came of it (`action`: `tainted`,
`held back` by the cap, `pending` until `due`, `reported` for an informational one); `findings` lists
every signal found on it, informational ones too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from vk_provider.kit.timestamps import format_timestamp, parse_timestamp
from vk_provider.offload.status import set_condition
from vk_provider.policy.decide import Decision, free_gpus, usable
from vk_provider.policy.health import Verdict
from vk_provider.policy.healthcap import CapOutcome
from vk_provider.policy.model import HOUR, History, NodeHealth, Observed, OffloadView
from vk_provider.policy.names import HOLD_UNTIL_ANNOTATION
from vk_provider.policy.observe import Observation, Problem
from vk_provider.policy.severity import Finding
from vk_provider.policy.spec import PolicySpec
from vk_provider.policy.waiting import Wait

MAX_DECISIONS = 20


def history_from_status(status: Mapping[str, Any] | None) -> History:
    """The policy's memory as its last status recorded it (a fresh policy: empty)."""
    demand = (status or {}).get("demand") or {}
    shortfall: dict[str, datetime] = {}
    seen: dict[str, datetime] = {}
    for gang in demand.get("gangs") or ():
        key = f"{gang.get('kind')}:{gang.get('namespace')}/{gang.get('name')}"
        if (since := parse_timestamp(gang.get("since"))) is not None:
            seen[key] = since
        if (short := parse_timestamp(gang.get("shortfallSince"))) is not None:
            shortfall[key] = short
    return History(
        shortfall_since=shortfall,
        demand_since=seen,
        demand_gone_since=parse_timestamp(demand.get("goneSince")),
    )


def decision_entry(now: datetime, decision: Decision) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "time": format_timestamp(now),
        "action": decision.action.value,
        "reason": decision.reason,
    }
    if decision.offloads:
        entry["offloads"] = list(decision.offloads)
    if decision.nodes:
        entry["nodes"] = list(decision.nodes)
    if decision.message:
        entry["message"] = decision.message
    return entry


EXPORTER_UNAVAILABLE = "ExporterUnavailable"


def conditions_for(
    previous: Sequence[Mapping[str, Any]],
    now: datetime,
    generation: int,
    *,
    problem: Problem | None,
    observed: Observed | None,
    policy: PolicySpec | None,
    exporter_errors: Mapping[str, str] | None = None,
    pod_groups_unavailable: str | None = None,
    health_cap: CapOutcome | None = None,
) -> list[dict[str, Any]]:
    conditions = [dict(item) for item in previous]
    if problem is not None:
        conditions = set_condition(
            conditions, "Ready", "False", problem.reason, problem.message, now=now, generation=generation
        )
    else:
        conditions = set_condition(
            conditions, "Ready", "True", "Ready", "watching the home pool", now=now, generation=generation
        )
    if observed is None or policy is None:
        return conditions
    if observed.gangs:
        unplaced = sum(gang.unplaced_gpus for gang in observed.gangs)
        total = sum(gang.gpus for gang in observed.gangs)
        message = f"{len(observed.gangs)} gang(s) request {total} GPUs, {unplaced} unplaced"
        conditions = set_condition(
            conditions, "TrainingDemand", "True", "GangsPresent", message, now=now, generation=generation
        )
    else:
        conditions = set_condition(
            conditions,
            "TrainingDemand",
            "False",
            "NoDemand",
            "no training gang",
            now=now,
            generation=generation,
        )
    sick = [node for node in observed.nodes if not node.health.counts]
    if sick:
        message = "; ".join(
            f"{node.name}: {node.health.reason or 'settling'} {node.health.detail}".strip() for node in sick
        )
        reason = "Unhealthy" if any(not node.health.healthy for node in sick) else "Settling"
        conditions = set_condition(
            conditions, "HomeCapacityHealthy", "False", reason, message, now=now, generation=generation
        )
    else:
        conditions = set_condition(
            conditions,
            "HomeCapacityHealthy",
            "True",
            "AllHealthy",
            "every home node counts as healthy",
            now=now,
            generation=generation,
        )
    if health_cap is not None:
        conditions = set_condition(
            conditions, HEALTH_CAP_REACHED, *health_cap_condition(health_cap), now=now, generation=generation
        )
    metrics = gpu_metrics_condition(policy, exporter_errors or {})
    conditions = set_condition(conditions, "GpuMetricsAvailable", *metrics, now=now, generation=generation)
    if not policy.demand.pod_groups:  # nothing to read, nothing to say
        return [condition for condition in conditions if condition.get("type") != POD_GROUPS_READABLE]
    readable = pod_groups_condition(pod_groups_unavailable)
    return set_condition(conditions, POD_GROUPS_READABLE, *readable, now=now, generation=generation)


HEALTH_CAP_REACHED = "HealthCapReached"


def health_cap_condition(cap: CapOutcome) -> tuple[str, str, str]:
    """Status, reason and message of `HealthCapReached`: whether the cap on non-fatal taints keeps
    nodes that a degrading signal would pull in service."""
    room = (
        f"maxNonFatalShare {cap.share:g} of {cap.pool_nodes} nodes allows {cap.slots} tainted for non-fatal "
        f"reasons; held: {', '.join(cap.held) or 'none'}"
    )
    if cap.reached:
        return "True", "CapReached", f"{room}; not pulled: {', '.join(cap.held_back)}"
    return "False", "WithinCap", room


POD_GROUPS_READABLE = "PodGroupsReadable"
POD_GROUPS_UNAVAILABLE = "PodGroupsUnavailable"


def pod_groups_condition(unavailable: str | None) -> tuple[str, str, str]:
    """Status, reason and message of `PodGroupsReadable`: whether native PodGroups count as demand. On a
    cluster older than the API (1.35, 1.36) gangs are still read from pods and Kueue Workloads; the
    condition is what keeps that from being a silent gap."""
    if unavailable:
        return "False", POD_GROUPS_UNAVAILABLE, unavailable
    return "True", "Read", "unschedulable native PodGroups count as training demand"


def gpu_metrics_condition(policy: PolicySpec, errors: Mapping[str, str]) -> tuple[str, str, str]:
    """Status, reason and message of `GpuMetricsAvailable`: whether dcgm-exporter (and the interconnect
    exporter, when named) could be read. A node whose exporter cannot be read is judged on its own
    signals alone; nothing moves because of it."""
    if policy.health.exporter is None and policy.health.interconnect is None:
        return "True", "NotConfigured", "no dcgm-exporter named: health from the nodes' own state only"
    if errors:
        listed = "; ".join(f"{where}: {message}" for where, message in sorted(errors.items()))
        return "False", EXPORTER_UNAVAILABLE, f"judged on node state alone for {listed}"
    return "True", "Scraped", "every dcgm-exporter pod answered"


def _next_eligible(offload: OffloadView, policy: PolicySpec) -> datetime | None:
    moments = []
    if offload.last_change is not None:
        dwell = (
            policy.timing.min_home_seconds if offload.placement == "home" else policy.timing.min_away_seconds
        )
        moments.append(offload.last_change + timedelta(seconds=dwell))
    recent = sorted(offload.policy_flips)[-policy.timing.max_flips_per_hour :]
    if len(recent) >= policy.timing.max_flips_per_hour:
        moments.append(recent[0] + HOUR)
    return max(moments, default=None)


def offload_entry(offload: OffloadView, raw: Mapping[str, Any], policy: PolicySpec) -> dict[str, Any]:
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    entry: dict[str, Any] = {
        "namespace": offload.namespace,
        "name": offload.name,
        "placement": offload.placement,
        "homeGpus": offload.home_gpus,
        "auto": offload.auto,
    }
    if offload.phase:
        entry["phase"] = offload.phase
    if hold := annotations.get(HOLD_UNTIL_ANNOTATION):
        entry["holdUntil"] = hold
    if offload.last_change is not None:
        entry["lastFlip"] = format_timestamp(offload.last_change)
    if offload.flipped_by:
        entry["lastTrigger"] = "auto" if offload.flipped_by.startswith("policy/") else "manual"
    if (eligible := _next_eligible(offload, policy)) is not None:
        entry["nextEligible"] = format_timestamp(eligible)
    return entry


def pool_entry(observation: Observation, policy: PolicySpec) -> dict[str, Any]:
    observed = observation.observed
    nodes = []
    tensors: list[float] = []
    reserved = unhealthy = busy = 0
    for node in observed.nodes:
        readings = observation.health.readings.get(node.name, ())
        entry: dict[str, Any] = {
            "name": node.name,
            "gpus": node.allocatable,
            "free": node.free,
            "healthy": node.health.counts,
            "reserved": policy.reservation.key in node.taints,
        }
        if node.health.reason:
            entry["reason"] = node.health.reason
        if node.health.since is not None:
            entry["since"] = format_timestamp(node.health.since)
        entry.update(health_entry(node.health, policy))
        temperatures = [r.temperature_celsius for r in readings if r.temperature_celsius is not None]
        if temperatures:
            entry["temperatureCelsius"] = max(temperatures)
        node_tensors = [r.tensor_active for r in readings if r.tensor_active is not None]
        if node_tensors:
            entry["tensorActive"] = round(sum(node_tensors) / len(node_tensors), 3)
            tensors += node_tensors
        nodes.append(entry)
        busy += node.used
        if entry["reserved"]:
            reserved += node.allocatable
        if not usable(node, policy):
            unhealthy += node.allocatable
    pool: dict[str, Any] = {
        "resource": policy.resource,
        "total": sum(node.allocatable for node in observed.nodes),
        "free": free_gpus(observed, policy),
        "reserved": reserved,
        "busy": busy,
        "unhealthy": unhealthy,
        "nodes": nodes,
    }
    if tensors:
        pool["tensorActive"] = round(sum(tensors) / len(tensors), 3)
    cap = observation.health.cap
    if cap is not None:
        pool["healthCap"] = {
            "maxNonFatalShare": cap.share,
            "poolNodes": cap.pool_nodes,
            "slots": cap.slots,
            "held": list(cap.held),
            "heldBack": list(cap.held_back),
        }
    return pool


ACTIONS = {
    Verdict.FATAL: "tainted",
    Verdict.KEPT: "tainted",
    Verdict.DUE: "tainted",
    Verdict.PENDING: "pending",
    Verdict.CLEAR: "reported",
}


def health_entry(health: NodeHealth, policy: PolicySpec) -> dict[str, Any]:
    """A node's `rule` (the finding that judged it and what came of it) and `findings`, when any."""
    if health.rule is None:
        return {}
    rule = finding_entry(health.rule)
    rule["action"] = "held back" if health.held_back else ACTIONS[health.verdict]
    if health.verdict is Verdict.PENDING and health.rule.since is not None:
        due = health.rule.since + timedelta(seconds=policy.health.degrading_for_seconds)
        rule["due"] = format_timestamp(due)
    entry: dict[str, Any] = {"rule": rule, "findings": [finding_entry(f) for f in health.findings]}
    if health.held_back:
        entry["heldBack"] = True
    return entry


def finding_entry(finding: Finding) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "signal": finding.signal,
        "severity": finding.severity.value,
        "detail": finding.detail,
    }
    if finding.since is not None:
        entry["since"] = format_timestamp(finding.since)
    return entry


def demand_entry(
    observed: Observed, history: History, waits: Mapping[str, Wait] | None = None
) -> dict[str, Any]:
    gangs = []
    for gang in observed.gangs:
        entry: dict[str, Any] = {
            "kind": gang.kind,
            "namespace": gang.namespace,
            "name": gang.name,
            "gpus": gang.gpus,
            "unplacedGpus": gang.unplaced_gpus,
        }
        if (since := history.demand_since.get(gang.key)) is not None:
            entry["since"] = format_timestamp(since)
        if (short := history.shortfall_since.get(gang.key)) is not None:
            entry["shortfallSince"] = format_timestamp(short)
        if (wait := (waits or {}).get(gang.key)) is not None:
            entry["waitingSeconds"] = round(wait.seconds)
            entry["waitingFor"] = str(wait.stage)
            if wait.offloads:
                entry["waitingOn"] = list(wait.offloads)
        gangs.append(entry)
    demand: dict[str, Any] = {"gpus": sum(gang.gpus for gang in observed.gangs), "gangs": gangs}
    demand["goneSince"] = format_timestamp(history.demand_gone_since) if history.demand_gone_since else None
    return demand


CLOCK_REFRESH_SECONDS = 30.0
"""How stale `waitingSeconds` may grow in the written status: the rest of the status is written when it
changes; a gang's wait clock alone, which changes every pass, at most this often (every 2 s it was a
write per pass for as long as training waited, all of it apiserver and etcd load)."""


def _without_wait_clocks(body: Mapping[str, Any]) -> dict[str, Any]:
    demand = body.get("demand")
    if not isinstance(demand, Mapping):
        return dict(body)
    gangs = [
        {key: value for key, value in gang.items() if key != "waitingSeconds"}
        for gang in demand.get("gangs") or ()
    ]
    return {**body, "demand": {**demand, "gangs": gangs}}


def needs_write(
    written: Mapping[str, Any] | None, body: Mapping[str, Any], *, seconds_since_written: float
) -> bool:
    """Whether the status `body` must be written, `written` being what this leader wrote last."""
    if written is None:
        return True
    if body == written:
        return False
    if _without_wait_clocks(body) != _without_wait_clocks(written):
        return True
    return seconds_since_written >= CLOCK_REFRESH_SECONDS
