"""The policy loop: every few seconds, for each OffloadPolicy, observe, decide, act, report.

Runs inside `vk-provider controller` while it holds the leader Lease, so one process acts at a time.
Everything it needs to continue is in the cluster: the Offloads' annotations and status, the nodes'
taints and policy-taints annotation, and the policy's status (its demand clocks and last decisions);
a new leader reads those back on its first pass, so it neither restarts its clocks nor flips again
what its predecessor flipped (an Offload on its way out counts as GPUs being freed).

Situations that last (a skip, a deferred flip back, a policy that cannot work as written) are reported
once when they begin, not on every pass: an Event per pass would bury everything else.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp

from vk_provider._kube.events import EventRecorder, EventType, InvolvedObject
from vk_provider.kit.bounded import gather_bounded
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, RawObject
from vk_provider.kit.timestamps import format_timestamp
from vk_provider.offload.names import API_VERSION, KIND
from vk_provider.policy import actuate
from vk_provider.policy.admission.checks import AdmissionChecks, WithWorkloads
from vk_provider.policy.decide import Action, Decision, Reason, decide
from vk_provider.policy.metrics import PolicyMetrics
from vk_provider.policy.model import History
from vk_provider.policy.names import POLICY_FIELD_MANAGER, POLICY_KIND, policies_path
from vk_provider.policy.observe import Observation, Problem, observe
from vk_provider.policy.signals import HealthSource, PodGroupSource, health_source, podgroup_source
from vk_provider.policy.spec import InvalidPolicy, PolicySpec, Taint, parse_policy
from vk_provider.policy.status import (
    HEALTH_CAP_REACHED,
    MAX_DECISIONS,
    POD_GROUPS_UNAVAILABLE,
    conditions_for,
    decision_entry,
    demand_entry,
    gpu_metrics_condition,
    history_from_status,
    needs_write,
    offload_entry,
    pool_entry,
)
from vk_provider.policy.waiting import by_stage, waits

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 2.0
TAINT_CONCURRENCY = 16
"""Nodes tainted or untainted at once (each a read and a PATCH)."""
EXPECTED_ERRORS = (KubeApiError, aiohttp.ClientError, OSError, TimeoutError)
# The Event reason of each decision (the design's names); skips and deferrals carry theirs in the message.
EVENT_REASONS = {
    Action.FLIP_OUT: "FlipOutStarted",
    Action.FLIP_BACK: "FlipBackStarted",
    Action.SKIP: "FlipOutSkipped",
    Action.DEFER: "FlipBackDeferred",
    Action.RESERVE: "NodesReserved",
    Action.RELEASE: "NodesReleased",
    Action.TAINT_UNHEALTHY: "NodeUnhealthy",
    Action.UNTAINT_UNHEALTHY: "NodeHealthy",
    Action.DEMAND_DETECTED: "TrainingDemandDetected",
    Action.WARM: "WarmUpRequested",
}
RECORDED = {
    Action.FLIP_OUT,
    Action.FLIP_BACK,
    Action.SKIP,
    Action.DEFER,
    Action.RESERVE,
    Action.RELEASE,
    Action.WARM,
}
"""Decisions listed in status.decisions (the contract's actions; Defer shows as Skip there)."""


@dataclasses.dataclass
class Memory:
    """Per policy, between passes of this leader."""

    history: History
    decisions: list[dict[str, Any]]
    reported: set[str] = dataclasses.field(default_factory=set)
    """Keys of the lasting situations reported already (re-reported once they end and come back)."""
    written: dict[str, Any] | None = None
    written_at: datetime | None = None


@dataclasses.dataclass
class Pass:
    """One pass over one policy: what the decisions are carried out against."""

    policy: PolicySpec
    involved: InvolvedObject
    observation: Observation
    memory: Memory
    now: datetime
    lasting: set[str]
    flipped_out: set[str] = dataclasses.field(default_factory=set)
    """Offloads this pass moved away (`namespace/name`): observed still at home, already on their way."""

    def unpacked(self) -> tuple[PolicySpec, InvolvedObject, Observation, Memory, datetime]:
        """What carrying out one decision reads, in one line."""
        return self.policy, self.involved, self.observation, self.memory, self.now


class PolicyController:
    def __init__(
        self,
        api: KubeApi,
        events: EventRecorder,
        *,
        metrics: PolicyMetrics | None = None,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        health: HealthSource | None = None,
        podgroups: PodGroupSource | None = None,
        admission: AdmissionChecks | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._api = api
        self._events = events
        self._metrics = metrics
        self._interval = interval_seconds
        self._health = health or health_source(api)
        self._admission = admission or AdmissionChecks(api, events, metrics=metrics)
        # Kueue Workloads waiting on our AdmissionChecks are gangs like unschedulable PodGroups.
        self._podgroups: PodGroupSource = WithWorkloads(podgroups or podgroup_source(api), self._admission)
        self._clock = clock
        self._memory: dict[str, Memory] = {}
        self._missing_crd_reported = False

    async def run(self) -> None:
        try:
            while True:
                await self.pass_once()
                await asyncio.sleep(self._interval)
        finally:
            await self._health.close()

    async def pass_once(self) -> None:
        try:
            listing = await self._api.get(policies_path())
        except KubeApiError as error:
            if error.not_found and not self._missing_crd_reported:
                logger.warning("the OffloadPolicy CRD is not installed: no policy runs until it is")
                self._missing_crd_reported = True
            elif not error.not_found:
                logger.warning("could not list OffloadPolicies: %s", error)
            return
        except EXPECTED_ERRORS as error:
            logger.warning("could not list OffloadPolicies: %s", error)
            return
        self._missing_crd_reported = False
        items: list[RawObject] = listing.get("items") or []
        try:
            await self._admission.refresh(items, self._clock())
        except EXPECTED_ERRORS as error:
            # The policies still run (on PodGroup and pod demand); the checks wait for the next pass.
            logger.warning("could not read Kueue's AdmissionChecks and Workloads: %s", error)
        for uid in set(self._memory) - {item["metadata"]["uid"] for item in items}:
            del self._memory[uid]  # a deleted policy
        if self._metrics is not None:
            self._metrics.policies_listed(item["metadata"]["name"] for item in items)
        for raw in items:
            try:
                await self.reconcile(raw)
            except EXPECTED_ERRORS as error:
                logger.warning(
                    "policy %s: pass failed, next pass retries: %s", raw["metadata"]["name"], error
                )
            except Exception:
                # A fault of the policy must not take the migrations down with it (they share the
                # leader's task group): logged with its traceback, and the next pass tries again.
                logger.exception("policy %s: unexpected error in a pass", raw["metadata"]["name"])

    async def reconcile(self, raw: RawObject) -> None:
        metadata = raw["metadata"]
        now = self._clock()
        status = raw.get("status") or {}
        memory = self._memory.get(metadata["uid"])
        if memory is None:
            memory = Memory(history_from_status(status), list(status.get("decisions") or ()))
            self._memory[metadata["uid"]] = memory
        policy_object = _involved_policy(raw)
        generation = int(metadata.get("generation") or 0)
        try:
            policy = parse_policy(raw)
        except InvalidPolicy as error:
            problem = Problem("InvalidSpec", str(error))
            reported: set[str] = set()
            self._report_lasting(
                memory,
                reported,
                policy_object,
                kind="Warning",
                reason=problem.reason,
                message=problem.message,
            )
            memory.reported = reported
            invalid: dict[str, Any] = {"observedGeneration": generation}
            await self._write_status(
                raw, memory, invalid, problem=problem, observation=None, policy=None, now=now
            )
            return
        observation = await self._observe(policy, now)
        lasting: set[str] = set()
        body: dict[str, Any] = {
            "observedGeneration": generation,
            "pool": pool_entry(observation, policy),
            "exporterErrors": dict(observation.health.errors) or None,
        }
        if observation.health.errors:  # said once when it starts; the condition says it meanwhile
            _, reason, message = gpu_metrics_condition(policy, observation.health.errors)
            self._report_lasting(
                memory, lasting, policy_object, kind="Warning", reason=reason, message=message
            )
        cap = observation.health.cap
        if cap is not None and cap.reached:  # said once per set of nodes held back; the condition stays
            self._report_lasting(
                memory,
                lasting,
                policy_object,
                kind="Warning",
                reason=HEALTH_CAP_REACHED,
                message=cap_message(observation),
            )
        if observation.pod_groups_unavailable:  # expected on older clusters, so Normal; the condition stays
            self._report_lasting(
                memory,
                lasting,
                policy_object,
                kind="Normal",
                reason=POD_GROUPS_UNAVAILABLE,
                message=observation.pod_groups_unavailable,
            )
        if observation.problems:
            problem = observation.problems[0]
            self._report_lasting(
                memory, lasting, policy_object, kind="Warning", reason=problem.reason, message=problem.message
            )
            memory.reported = lasting
            # Free GPUs may still cover a waiting Workload (or the pool be too small for it).
            await self._admission.settle(policy, observation.observed, now)
            body["demand"] = demand_entry(observation.observed, memory.history)
            await self._write_status(
                raw, memory, body, problem=problem, observation=observation, policy=policy, now=now
            )
            return
        outcome = decide(now, policy, observation.observed, memory.history)
        self._served(policy, memory.history, outcome.history, now)
        memory.history = outcome.history
        run = Pass(policy, policy_object, observation, memory, now, lasting)
        for decision in outcome.decisions:
            await self._carry_out(run, decision)
        memory.reported = lasting
        found = waits(now, policy, observation.observed, memory.history, flipped_out=run.flipped_out)
        if self._metrics is not None:
            self._metrics.waiting(policy.name, by_stage(found))
        # After the flips: a Workload turns Ready only on GPUs already free (a pass later than the flip).
        await self._admission.settle(policy, observation.observed, now, waits=found)
        body["demand"] = demand_entry(observation.observed, memory.history, found)
        body["offloads"] = [
            offload_entry(view, observation.offloads[view.key], policy)
            for view in observation.observed.offloads
        ]
        self._export(policy, observation, body)
        await self._write_status(
            raw, memory, body, problem=None, observation=observation, policy=policy, now=now
        )

    async def _observe(self, policy: PolicySpec, now: datetime) -> Observation:
        observation = await observe(self._api, policy, now, health=self._health, podgroups=self._podgroups)
        queued = tuple(self._admission.queued(policy))
        if not queued:
            return observation
        # Workloads heading for our checks before their quota: foreseen, not yet demand.
        observed = dataclasses.replace(observation.observed, foreseen=queued)
        return dataclasses.replace(observation, observed=observed)

    def _served(self, policy: PolicySpec, before: History, after: History, now: datetime) -> None:
        """Time the gangs whose shortfall ended this pass: since it began, and since the gang was seen."""
        if self._metrics is None:
            return
        for key, since in before.shortfall_since.items():
            # Freed: the gang is still there, its shortfall is not (a deleted gang was not served).
            if key not in after.shortfall_since and key in after.demand_since:
                self._metrics.freed(policy.name, (now - since).total_seconds())
                self._metrics.waited(policy.name, (now - after.demand_since[key]).total_seconds())

    def _export(self, policy: PolicySpec, observation: Observation, body: Mapping[str, Any]) -> None:
        if self._metrics is None:
            return
        pool = body["pool"]
        states = {state: pool[state] for state in ("free", "reserved", "busy", "unhealthy")}
        self._metrics.pool(policy.name, body["demand"]["gpus"], states)
        for node in observation.observed.nodes:
            readings = observation.health.readings.get(node.name, ())
            self._metrics.node(node.name, node.health.counts, node.health.reason, readings)

    def _report_lasting(
        self,
        memory: Memory,
        lasting: set[str],
        involved: InvolvedObject,
        *,
        kind: EventType,
        reason: str,
        message: str,
    ) -> bool:
        """Record an Event for a situation that lasts only when it begins; True when it began now."""
        key = f"{involved.kind}/{involved.namespace}/{involved.name}:{reason}:{message}"
        lasting.add(key)
        if key in memory.reported:
            return False
        self._events.record(involved, kind, reason, message)
        return True

    async def _carry_out(self, run: Pass, decision: Decision) -> None:
        policy, policy_object, observation, memory, now = run.unpacked()
        reason = EVENT_REASONS[decision.action]
        text = f"{decision.reason}: {decision.message}" if decision.message else str(decision.reason)
        if decision.action in (Action.SKIP, Action.DEFER):
            who = ", ".join(decision.offloads)
            message = f"{decision.reason}: {who} {decision.message}".strip() if who else text
            if self._report_lasting(
                memory, run.lasting, policy_object, kind="Normal", reason=reason, message=message
            ):
                for key in decision.offloads:
                    self._events.record(_involved_offload(observation, key), "Normal", reason, message)
                self._record(memory, now, decision)
                if self._metrics is not None:
                    self._metrics.skipped(policy.name, decision.reason)
            return
        if decision.action is Action.DEMAND_DETECTED:
            self._events.record(policy_object, "Normal", reason, decision.message)
            return
        if decision.action in (Action.FLIP_OUT, Action.FLIP_BACK):
            await self._flip(run, decision)
            return
        if decision.action is Action.WARM:
            await self._warm(run, decision)
            return
        await self._taint(run, decision)

    async def _warm(self, run: Pass, decision: Decision) -> None:
        """Write the warm-ups; say so (Events, a status decision) only for those that start now: a
        refresh of a warm-up already running is the same situation going on."""
        policy, policy_object, observation, memory, now = run.unpacked()
        until = now + timedelta(seconds=policy.warm_up.hold_seconds)
        views = {view.key: view for view in observation.observed.offloads}
        started = []
        for key in decision.offloads:
            namespace, _, name = key.partition("/")
            try:
                await actuate.set_warm_until(self._api, namespace, name, until, policy=policy.name, now=now)
            except actuate.Refused as refused:
                logger.info("policy %s: no warm-up for %s: %s", policy.name, key, refused)
                continue
            view = views.get(key)
            if view is None or view.warm_until is None or view.warm_until <= now:
                started.append(key)
                message = (
                    f"{decision.reason}: away side warm until {format_timestamp(until)}; {decision.message}"
                )
                self._events.record(_involved_offload(observation, key), "Normal", "WarmUpRequested", message)
        if started:
            warming = ", ".join(started)
            message = (
                f"{decision.reason}: warming {warming} until {format_timestamp(until)}; {decision.message}"
            )
            self._events.record(policy_object, "Normal", "WarmUpRequested", message)
            self._record(memory, now, dataclasses.replace(decision, offloads=tuple(started)))

    async def _flip(self, run: Pass, decision: Decision) -> None:
        policy, policy_object, observation, memory, now = run.unpacked()
        out = decision.action is Action.FLIP_OUT
        placement, expect = ("away", "home") if out else ("home", "away")
        reason = EVENT_REASONS[decision.action]
        done = []
        for key in decision.offloads:
            namespace, _, name = key.partition("/")
            involved = _involved_offload(observation, key)
            try:
                await actuate.set_placement(
                    self._api, namespace, name, placement, policy=policy.name, now=now, expect=expect
                )
            except actuate.Refused as refused:
                skip = "FlipOutSkipped" if out else "FlipBackDeferred"
                self._events.record(involved, "Normal", skip, f"{key}: {refused}")
                self._events.record(policy_object, "Normal", skip, f"{key}: {refused}")
                continue
            done.append(key)
            if out:
                run.flipped_out.add(key)
            message = f"{decision.reason}: {decision.message} (placement {placement})"
            self._events.record(involved, "Normal", reason, message)
            if self._metrics is not None:
                trigger = "abort" if decision.reason == Reason.DEMAND_RETURNED else "auto"
                self._metrics.flipped(policy.name, key, placement, trigger)
        if done:
            message = f"{decision.reason}: {', '.join(done)} to {placement}; {decision.message}"
            self._events.record(policy_object, "Normal", reason, message)
            self._record(memory, now, dataclasses.replace(decision, offloads=tuple(done)))

    async def _taint(self, run: Pass, decision: Decision) -> None:
        policy, policy_object, observation, memory, now = run.unpacked()
        reason = EVENT_REASONS[decision.action]
        kind: EventType = "Warning" if decision.action is Action.TAINT_UNHEALTHY else "Normal"

        async def change(node: str) -> bool:
            if decision.action is Action.RESERVE:
                return await actuate.add_taint(self._api, node, policy.reservation)
            if decision.action is Action.TAINT_UNHEALTHY:
                taint = Taint(policy.health.taint_key, decision.reason, policy.health.taint_effect)
                return await actuate.add_taint(self._api, node, taint)
            key = policy.reservation.key if decision.action is Action.RELEASE else policy.health.taint_key
            return await actuate.remove_taint(self._api, node, key)

        # A pool of 200 nodes reserved one PATCH after another took seconds before the first flip.
        results = await gather_bounded(
            [functools.partial(change, node) for node in decision.nodes], TAINT_CONCURRENCY
        )
        done = [node for node, changed in zip(decision.nodes, results, strict=True) if changed is True]
        for node in done:
            message = f"{decision.reason}: {decision.message}" if decision.message else str(decision.reason)
            self._events.record(_involved_node(observation, node), kind, reason, message)
        failed = next((result for result in results if isinstance(result, BaseException)), None)
        if done:
            message = f"{decision.reason}: {', '.join(done)}" + (
                f" ({decision.message})" if decision.message else ""
            )
            self._events.record(policy_object, kind, reason, message)
            if decision.action in RECORDED:
                self._record(memory, now, dataclasses.replace(decision, nodes=tuple(done)))
        if failed is not None:
            raise failed  # what was done is recorded; the pass's failure handling takes the rest

    def _record(self, memory: Memory, now: datetime, decision: Decision) -> None:
        entry = decision_entry(now, decision)
        if decision.action is Action.DEFER:
            entry["action"] = "Skip"  # the contract's actions: a deferred flip back is a skip
        memory.decisions = [entry, *memory.decisions][:MAX_DECISIONS]

    async def _write_status(
        self,
        raw: RawObject,
        memory: Memory,
        body: dict[str, Any],
        *,
        problem: Problem | None,
        observation: Observation | None,
        policy: PolicySpec | None,
        now: datetime,
    ) -> None:
        status = raw.get("status") or {}
        previous = (memory.written or status).get("conditions") or ()
        generation = int(raw["metadata"].get("generation") or 0)
        observed = observation.observed if observation is not None else None
        body["conditions"] = conditions_for(
            previous,
            now,
            generation,
            problem=problem,
            observed=observed,
            policy=policy,
            exporter_errors=observation.health.errors if observation is not None else None,
            pod_groups_unavailable=observation.pod_groups_unavailable if observation is not None else None,
            health_cap=observation.health.cap if observation is not None else None,
        )
        body["decisions"] = memory.decisions
        if self._metrics is not None:
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in body["conditions"])
            self._metrics.ready(raw["metadata"]["name"], ready)
        since = (now - memory.written_at).total_seconds() if memory.written_at else float("inf")
        if not needs_write(memory.written, body, seconds_since_written=since):
            return
        await self._api.request(
            "PATCH",
            policies_path(raw["metadata"]["name"], status=True),
            query={"fieldManager": POLICY_FIELD_MANAGER},
            body={"status": body},
            content_type=MERGE_PATCH,
        )
        memory.written = body
        memory.written_at = now


def cap_message(observation: Observation) -> str:
    """The nodes the cap on non-fatal taints keeps in service, each with the signal that would pull it
    (no readings: the message, so the Event, stays the same while the same nodes are held back)."""
    cap = observation.health.cap
    if cap is None:
        return ""
    rules = []
    for name in cap.held_back:
        rule = observation.health.nodes[name].rule if name in observation.health.nodes else None
        rules.append(f"{name} ({rule.signal})" if rule is not None else name)
    # Not who holds the slots: that changes a pass after a slot is granted, and the Event would repeat.
    return (
        f"would have pulled {', '.join(rules)}: maxNonFatalShare {cap.share:g} of {cap.pool_nodes} nodes "
        f"allows {cap.slots} tainted for non-fatal reasons at once"
    )


def _involved_policy(raw: RawObject) -> InvolvedObject:
    metadata = raw["metadata"]
    return InvolvedObject(POLICY_KIND, metadata["name"], "", metadata.get("uid", ""), api_version=API_VERSION)


def _involved_offload(observation: Observation, key: str) -> InvolvedObject:
    namespace, _, name = key.partition("/")
    uid = str(((observation.offloads.get(key) or {}).get("metadata") or {}).get("uid", ""))
    return InvolvedObject(KIND, name, namespace, uid, api_version=API_VERSION)


def _involved_node(observation: Observation, name: str) -> InvolvedObject:
    uid = next(
        (str(n["metadata"].get("uid", "")) for n in observation.nodes if n["metadata"]["name"] == name), ""
    )
    return InvolvedObject("Node", name, "", uid)
