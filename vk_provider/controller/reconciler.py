"""Reconcile one Offload: read everything, decide one move, write it, say when to look again.

Level-based: each pass reads the Offload, both Deployments, the home Service and what the routers
apply, and acts on that alone, so a controller restarted at any moment picks up from the status. The
only memory kept between passes is the metrics sample taken when a step's interval began; after a
restart it is gone and the interval simply starts again (a step is judged late, never wrongly).

A migration's life, recorded in `status.phase`:

- **Preparing**: the receiving side is scaled up (the away Deployment derived and created, or the
  home Deployment given its replicas back) until the ready threshold is met and every router has
  that many usable endpoints there. Then the first step's weight is applied.
- **Shifting**: for each weight, wait until every router applies it; then the step's interval counts;
  then the gates judge the receiving side's traffic over the interval and the pure plan
  (`vk_provider.migration.plan`) says advance, hold, roll back or finish.
- **Paused**: `spec.paused` holds the current weight; the interval starts over on resume.
- **Finalizing**: the migration has an outcome. Once every router applies the final weight, the
  side that no longer gets traffic is scaled to 0 (home, so training gets the GPUs; or away, so
  nothing is left running at the provider), and the phase becomes the outcome: Succeeded,
  RolledBack (gates failed, or aborted) or Failed (progress deadline exceeded).

A flip (`spec.placement` changed) starts a migration from wherever traffic stands. While one runs,
changing `spec.placement` back aborts it (that is what `kubectl offload abort` does), and a new value
of the promote annotation skips the remaining steps.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from vk_provider._kube.events import EventRecorder, EventType, InvolvedObject
from vk_provider.controller import deriving
from vk_provider.controller.gates import SideSample, judge, parse_side_sample, total
from vk_provider.controller.routers import RouterDirectory, RouterUnreachable
from vk_provider.controller.spec import (
    API_VERSION,
    KIND,
    RUNNING_PHASES,
    InvalidSpec,
    OffloadSpec,
    offload_path,
    parse_offload,
    parse_timestamp,
    timestamp,
)
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, RawObject
from vk_provider.migration import plan
from vk_provider.migration.plan import Action, Decision, Direction, MigrationState

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
"""How soon to look again while waiting on replicas or routers (their changes do not wake us)."""
IDLE_RESYNC_SECONDS = 60.0
MISSING_RESYNC_SECONDS = 10.0

Requeue = float | None
"""Seconds until the next pass, or None to wait for the Offload to change."""


def deployment_path(namespace: str, name: str | None = None) -> str:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    return path if name is None else f"{path}/{name}"


def service_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/services/{name}"


def receiving_side(direction: Direction) -> str:
    """The side a migration moves traffic to: the one its gates judge."""
    return direction.value


def set_condition(
    conditions: list[dict[str, Any]],
    kind: str,
    status: str,
    reason: str,
    message: str,
    *,
    now: datetime,
    generation: int,
) -> list[dict[str, Any]]:
    """The conditions with `kind` set; its transition time moves only when its status changes."""
    previous = next((item for item in conditions if item.get("type") == kind), None)
    changed = previous is None or previous.get("status") != status
    condition = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message[:32768],
        "lastTransitionTime": timestamp(now) if changed else previous["lastTransitionTime"],  # type: ignore[index]
        "observedGeneration": generation,
    }
    return [*(item for item in conditions if item.get("type") != kind), condition]


@dataclasses.dataclass
class IntervalStart:
    """The sample taken when a step's interval began (in memory only)."""

    step_key: tuple[int, int, int]
    """(step index, weight, consecutive failures): a new key means a new interval."""
    started: float
    samples: dict[str, SideSample]
    """Per router URL, the judged side's counters."""


@dataclasses.dataclass
class Pass:
    """What one reconcile pass read, and the status patch it builds up."""

    spec: OffloadSpec
    offload: RawObject
    status: dict[str, Any]
    home: RawObject
    service: RawObject
    now: datetime
    patch: dict[str, Any] = dataclasses.field(default_factory=dict)

    def get(self, field: str, default: Any = None) -> Any:
        """The status field as it will be after this pass's patch."""
        return self.patch[field] if field in self.patch else self.status.get(field, default)

    def set(self, **fields: Any) -> None:
        self.patch.update(fields)

    def condition(self, kind: str, status: str, reason: str, message: str) -> None:
        conditions = list(self.get("conditions") or [])
        updated = set_condition(
            conditions, kind, status, reason, message, now=self.now, generation=self.spec.generation
        )
        if updated != conditions:
            self.patch["conditions"] = updated

    @property
    def direction(self) -> Direction:
        return Direction(self.get("targetPlacement") or self.spec.placement.value)

    def state(self) -> MigrationState:
        steps = tuple(self.get("steps") or self.spec.strategy.steps_toward(self.direction))
        return MigrationState(
            direction=self.direction,
            steps=steps,
            step_index=int(self.get("stepIndex", 0)),
            weight=int(self.get("awayWeight", 0)),
            last_good_weight=int(self.get("lastGoodWeight", self.get("awayWeight", 0))),
            consecutive_failures=int(self.get("consecutiveFailures", 0)),
            failures_before_rollback=self.spec.strategy.failures_before_rollback,
            paused=self.spec.paused,
        )


def _replicas(deployment: RawObject | None) -> int:
    """The Deployment's desired replicas (the API's default is 1)."""
    if deployment is None:
        return 0
    value = (deployment.get("spec") or {}).get("replicas")
    return int(value) if isinstance(value, int) else 1


class Reconciler:
    def __init__(
        self,
        api: KubeApi,
        routers: RouterDirectory,
        events: EventRecorder,
        *,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._routers = routers
        self._events = events
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        self._intervals: dict[str, IntervalStart] = {}

    # -- reading -------------------------------------------------------------------------------

    async def _get(self, path: str) -> RawObject | None:
        try:
            return await self._api.get(path)
        except KubeApiError as error:
            if error.not_found:
                return None
            raise

    async def reconcile(self, namespace: str, name: str) -> Requeue:
        offload = await self._get(offload_path(namespace, name))
        if offload is None:
            self._intervals.pop(f"{namespace}/{name}", None)
            return None
        now = self._wall_clock()
        status = dict(offload.get("status") or {})
        try:
            spec = parse_offload(offload)
        except InvalidSpec as error:
            await self._report_problem(offload, status, now, "InvalidSpec", str(error))
            return None
        home = await self._get(deployment_path(namespace, spec.home_deployment))
        service = await self._get(service_path(namespace, spec.home_service))
        if home is None or service is None:
            reason, what = (
                ("HomeDeploymentNotFound", f'Deployment "{spec.home_deployment}"')
                if home is None
                else ("HomeServiceNotFound", f'Service "{spec.home_service}"')
            )
            await self._report_problem(
                offload,
                status,
                now,
                reason,
                f"{what} not found in {namespace}; nothing is moved until it exists",
            )
            return MISSING_RESYNC_SECONDS
        work = Pass(spec, offload, status, home, service, now)
        work.condition("Ready", "True", "Resolved", "the home Deployment and Service exist")
        requeue = await self._step(work)
        await self._write(work)
        return requeue

    async def _report_problem(
        self, offload: RawObject, status: Mapping[str, Any], now: datetime, reason: str, message: str
    ) -> None:
        generation = int((offload.get("metadata") or {}).get("generation") or 0)
        conditions = list(status.get("conditions") or [])
        updated = set_condition(conditions, "Ready", "False", reason, message, now=now, generation=generation)
        if updated == conditions and status.get("observedGeneration") == generation:
            return
        patch: dict[str, Any] = {"conditions": updated, "observedGeneration": generation, "message": message}
        if not status.get("phase"):
            patch["phase"] = "Idle"
        metadata = offload.get("metadata") or {}
        self._event(offload, "Warning", reason, message)
        await self._api.patch(
            offload_path(metadata["namespace"], metadata["name"], status=True),
            {"status": patch},
            content_type=MERGE_PATCH,
        )

    async def _write(self, work: Pass) -> None:
        if not work.patch:
            return
        await self._api.patch(
            offload_path(work.spec.namespace, work.spec.name, status=True),
            {"status": work.patch},
            content_type=MERGE_PATCH,
        )

    def _event(self, offload: RawObject, kind: EventType, reason: str, message: str) -> None:
        metadata = offload.get("metadata") or {}
        involved = InvolvedObject(
            kind=KIND,
            name=str(metadata.get("name")),
            namespace=str(metadata.get("namespace")),
            uid=str(metadata.get("uid")),
            api_version=API_VERSION,
        )
        self._events.record(involved, kind, reason, message)

    # -- the state machine ---------------------------------------------------------------------

    async def _step(self, work: Pass) -> Requeue:
        phase = work.get("phase")
        if not phase:
            work.set(
                phase="Idle",
                targetPlacement="home",
                awayWeight=0,
                lastGoodWeight=0,
                stepIndex=0,
                consecutiveFailures=0,
                observedGeneration=work.spec.generation,
                handledPromotion=work.spec.promotion,
                message="serving at home",
            )
            phase = "Idle"
        if phase not in RUNNING_PHASES:
            if work.spec.placement.value != work.get("targetPlacement"):
                return self._start(work)
            if work.get("observedGeneration") != work.spec.generation:
                work.set(observedGeneration=work.spec.generation)
            return IDLE_RESYNC_SECONDS
        work.set(observedGeneration=work.spec.generation)
        if phase == "Finalizing":
            return await self._finalize(work)
        if work.spec.placement.value != work.get("targetPlacement"):
            return self._decide(work, plan.abort(work.state()), outcome_reason="Aborted")
        if phase == "Preparing":
            return await self._prepare(work)
        return await self._shift(work)

    def _start(self, work: Pass) -> Requeue:
        spec = work.spec
        direction = spec.placement
        weight = int(work.get("awayWeight", 0))
        steps = spec.strategy.steps_toward(direction)
        state = plan.begin_from(
            direction, steps, weight, failures_before_rollback=spec.strategy.failures_before_rollback
        )
        home_replicas = work.get("homeReplicas")
        if direction is Direction.TO_AWAY and _replicas(work.home) > 0:
            home_replicas = _replicas(work.home)
        schedule = " -> ".join(str(w) for w in state.schedule[state.step_index :])
        message = f"moving {direction.value}: away weight {schedule}"
        work.set(
            phase="Preparing",
            targetPlacement=direction.value,
            steps=list(state.steps),
            stepIndex=state.step_index,
            awayWeight=state.weight,
            lastGoodWeight=state.last_good_weight,
            consecutiveFailures=0,
            homeReplicas=home_replicas,
            migrationStartedAt=timestamp(work.now),
            progressAt=timestamp(work.now),
            stepStartedAt=None,
            outcome=None,
            outcomeReason=None,
            lastCheck=None,
            handledPromotion=spec.promotion,
            observedGeneration=spec.generation,
            message=message,
        )
        work.condition("Progressing", "True", "MigrationStarted", message)
        self._intervals.pop(spec.key, None)
        self._event(work.offload, "Normal", "MigrationStarted", message)
        return 0.0

    def _deadline_passed(self, work: Pass) -> bool:
        progress = parse_timestamp(work.get("progressAt")) or work.now
        return (work.now - progress).total_seconds() > work.spec.strategy.progress_deadline_seconds

    def _waiting(self, work: Pass, reason: str, message: str) -> Requeue:
        """Wait for something outside our control, within the progress deadline."""
        if self._deadline_passed(work):
            failed = plan.abort(work.state()) if work.get("phase") == "Preparing" else None
            state = work.state()
            if failed is None:
                # Back to the last weight that passed its gates: the safe place to stop.
                rolled = dataclasses.replace(
                    state, weight=state.last_good_weight, ending=plan.Ending.ROLLED_BACK
                )
                failed = Decision(Action.ROLL_BACK, rolled, "")
            deadline = work.spec.strategy.progress_deadline_seconds
            explanation = f"no progress for {deadline}s ({message}); back to away weight {failed.weight}"
            return self._decide(
                work,
                dataclasses.replace(failed, reason=explanation),
                outcome="Failed",
                outcome_reason="ProgressDeadlineExceeded",
            )
        work.condition("Progressing", "True", reason, message)
        work.set(message=message)
        return POLL_SECONDS

    async def _receiving_deployment(self, work: Pass) -> tuple[RawObject | None, int]:
        """Make the receiving side's Deployment exist with its replicas; return it and the count wanted."""
        spec = work.spec
        if work.direction is Direction.TO_AWAY:
            wanted = spec.away.replicas
            if wanted is None:
                wanted = int(work.get("homeReplicas") or _replicas(work.home) or 1)
            return await self._ensure_away(work, wanted), wanted
        wanted = int(work.get("homeReplicas") or 0) or max(1, await self._away_replicas(spec))
        if _replicas(work.home) != wanted:
            work.home = await self._scale(spec.namespace, spec.home_deployment, wanted)
        return work.home, wanted

    async def _away_replicas(self, spec: OffloadSpec) -> int:
        away = await self._get(deployment_path(spec.namespace, deriving.away_name(spec)))
        return _replicas(away)

    async def _ensure_away(self, work: Pass, replicas: int) -> RawObject:
        spec = work.spec
        desired = deriving.away_deployment(spec, work.home, work.service, replicas)
        path = deployment_path(spec.namespace, deriving.away_name(spec))
        current = await self._get(path)
        if current is None:
            created = await self._api.create(deployment_path(spec.namespace), desired)
            self._event(
                work.offload,
                "Normal",
                "AwayDeploymentCreated",
                f"created Deployment {deriving.away_name(spec)} with {replicas} replicas",
            )
            return created
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        wanted_hash = desired["metadata"]["annotations"][deriving.TEMPLATE_HASH_ANNOTATION]
        if annotations.get(deriving.TEMPLATE_HASH_ANNOTATION) != wanted_hash:
            # The home template changed since: roll the away pods to it (a merge patch replaces
            # the template's lists wholesale, which is what we want here).
            return await self._api.patch(
                path,
                {"metadata": {"annotations": desired["metadata"]["annotations"]}, "spec": desired["spec"]},
                content_type=MERGE_PATCH,
            )
        if _replicas(current) != replicas:
            return await self._scale(spec.namespace, deriving.away_name(spec), replicas)
        return current

    async def _scale(self, namespace: str, name: str, replicas: int) -> RawObject:
        logger.info("scaling Deployment %s/%s to %d", namespace, name, replicas)
        return await self._api.patch(
            deployment_path(namespace, name), {"spec": {"replicas": replicas}}, content_type=MERGE_PATCH
        )

    async def _away_pods(self, spec: OffloadSpec) -> int:
        selector = ",".join(f"{key}={value}" for key, value in deriving.away_selector(spec).items())
        listing = await self._api.get(
            f"/api/v1/namespaces/{spec.namespace}/pods", query={"labelSelector": selector}
        )
        return len(listing.get("items") or [])

    async def _prepare(self, work: Pass) -> Requeue:
        side = receiving_side(work.direction)
        deployment, wanted = await self._receiving_deployment(work)
        needed = math.ceil(wanted * work.spec.strategy.ready_threshold_percent / 100)
        ready = _ready_replicas(deployment)
        if ready < needed:
            return self._waiting(
                work, "WaitingForReplicas", f"{ready} of {needed} {side} replicas ready (of {wanted} wanted)"
            )
        try:
            views = await self._routers.views(work.spec.namespace, work.spec.name)
        except RouterUnreachable as error:
            return self._waiting(work, "RouterUnreachable", str(error))
        behind = [view.router for view in views if view.usable.get(side, 0) < needed]
        if behind:
            return self._waiting(
                work,
                "WaitingForRouters",
                f"routers {', '.join(behind)} see fewer than {needed} {side} endpoints",
            )
        decision = plan.next_step(dataclasses.replace(work.state(), paused=False), plan.Verdict.HEALTHY)
        return self._decide(work, decision)

    async def _shift(self, work: Pass) -> Requeue:
        spec = work.spec
        if spec.paused:
            return self._hold_paused(work)
        if work.get("phase") == "Paused":
            message = f"resumed at away weight {work.get('awayWeight')}"
            work.set(phase="Shifting", progressAt=timestamp(work.now), message=message)
            self._event(work.offload, "Normal", "Resumed", message)
        if spec.promotion and spec.promotion != work.get("handledPromotion"):
            work.set(handledPromotion=spec.promotion)
            return self._decide(work, plan.promote(work.state()))
        weight = int(work.get("awayWeight", 0))
        side = receiving_side(work.direction)
        samples: dict[str, SideSample] = {}
        try:
            lagging = await self._lagging_routers(spec, weight)
            if not lagging:
                samples = await self._sample(spec, side)
        except RouterUnreachable as error:
            lagging = str(error)
        if lagging:
            return self._waiting(work, "WaitingForRouters", lagging)
        step_key = (int(work.get("stepIndex", 0)), weight, int(work.get("consecutiveFailures", 0)))
        started = self._intervals.get(spec.key)
        if started is None or started.step_key != step_key:
            self._begin_interval(work, step_key, samples)
            work.condition(
                "Progressing",
                "True",
                "StepInterval",
                f"every router applies away weight {weight}; judging the {side} side",
            )
            return float(spec.strategy.step_interval_seconds)
        remaining = spec.strategy.step_interval_seconds - (self._monotonic() - started.started)
        if remaining > 0:
            return remaining
        return self._judge(work, started, samples)

    async def _lagging_routers(self, spec: OffloadSpec, weight: int) -> str:
        """'' when every router applies `weight`, else which ones do not."""
        views = await self._routers.views(spec.namespace, spec.name)
        behind = [view.router for view in views if view.away_weight != weight]
        return f"routers {', '.join(behind)} do not apply away weight {weight} yet" if behind else ""

    def _hold_paused(self, work: Pass) -> Requeue:
        if work.get("phase") != "Paused":
            message = f"paused at away weight {work.get('awayWeight')}"
            work.set(phase="Paused", message=message, stepStartedAt=None)
            work.condition("Progressing", "True", "Paused", message)
            self._event(work.offload, "Normal", "Paused", message)
        self._intervals.pop(work.spec.key, None)
        return None

    def _begin_interval(
        self, work: Pass, step_key: tuple[int, int, int], samples: dict[str, SideSample]
    ) -> None:
        self._intervals[work.spec.key] = IntervalStart(step_key, self._monotonic(), samples)
        work.set(stepStartedAt=timestamp(work.now))

    def _judge(self, work: Pass, started: IntervalStart, samples: dict[str, SideSample]) -> Requeue:
        """The interval is over: judge it and act on the plan's decision."""
        spec = work.spec
        side = receiving_side(work.direction)
        interval = None
        if samples.keys() == started.samples.keys():  # the same routers at both ends
            interval = total(samples.values()).minus(total(started.samples.values()))
        judgement = judge(interval, spec.strategy.gates, side)
        work.set(lastCheck={**judgement.as_status(), "side": side, "at": timestamp(work.now)})
        work.condition(
            "GatesPassing",
            {"Healthy": "True", "Unhealthy": "False"}.get(judgement.verdict.value, "Unknown"),
            judgement.verdict.value,
            judgement.message,
        )
        decision = plan.next_step(work.state(), judgement.verdict)
        if decision.action is not Action.HOLD:
            return self._decide(work, decision, judged=judgement.message)
        # Held: a new interval starts now, from the sample just taken.
        step_key = (started.step_key[0], started.step_key[1], decision.state.consecutive_failures)
        self._begin_interval(work, step_key, samples)
        interval_seconds = float(spec.strategy.step_interval_seconds)
        if judgement.verdict is plan.Verdict.UNHEALTHY:
            self._event(work.offload, "Warning", "GateFailed", f"{decision.reason}: {judgement.message}")
            work.set(
                consecutiveFailures=decision.state.consecutive_failures,
                progressAt=timestamp(work.now),
                message=decision.reason,
            )
            return interval_seconds
        if self._deadline_passed(work):
            return self._waiting(work, "NotEnoughData", judgement.message)
        work.set(message=f"holding away weight {started.step_key[1]}: {judgement.message}")
        return interval_seconds

    async def _sample(self, spec: OffloadSpec, side: str) -> dict[str, SideSample]:
        urls = await self._routers.urls()
        texts = await self._routers.metrics()
        return {
            url: parse_side_sample(text, spec.namespace, spec.name, side)
            for url, text in zip(urls, texts, strict=True)
        }

    def _decide(
        self,
        work: Pass,
        decision: Decision,
        *,
        judged: str = "",
        outcome: str | None = None,
        outcome_reason: str | None = None,
    ) -> Requeue:
        """Record a decision that moves the weight (advance, roll back, abort, finish)."""
        state = decision.state
        reason = decision.reason + (f" ({judged})" if judged else "")
        work.set(
            awayWeight=state.weight,
            stepIndex=state.step_index,
            lastGoodWeight=state.last_good_weight,
            consecutiveFailures=state.consecutive_failures,
            stepStartedAt=None,
            progressAt=timestamp(work.now),
            message=reason,
        )
        self._intervals.pop(work.spec.key, None)
        if decision.action is Action.ADVANCE:
            work.set(phase="Shifting")
            work.condition("Progressing", "True", "StepApplied", reason)
            self._event(work.offload, "Normal", "StepApplied", reason)
            return 0.0
        if outcome is None:
            outcome, outcome_reason = {
                Action.FINISH: ("Succeeded", "Succeeded"),
                Action.ROLL_BACK: ("RolledBack", "GatesFailed"),
                Action.ABORT: ("RolledBack", "Aborted"),
            }[decision.action]
        if decision.action is Action.ABORT and outcome_reason == "Aborted":
            # The spec now names the starting placement: that is where this migration ends.
            work.set(targetPlacement=work.spec.placement.value)
        work.set(phase="Finalizing", outcome=outcome, outcomeReason=outcome_reason)
        work.condition("Progressing", "True", "Finalizing", reason)
        kind: EventType = "Normal" if outcome == "Succeeded" else "Warning"
        self._event(work.offload, kind, outcome_reason or outcome, reason)
        return 0.0

    async def _finalize(self, work: Pass) -> Requeue:
        spec = work.spec
        weight = int(work.get("awayWeight", 0))
        try:
            lagging = await self._lagging_routers(spec, weight)
        except RouterUnreachable as error:
            lagging = str(error)
        if lagging:
            return self._finalize_wait(work, lagging)
        if weight == plan.MAX_WEIGHT and _replicas(work.home) != 0:
            # Everything goes away now: the home GPUs are free for training.
            work.home = await self._scale(spec.namespace, spec.home_deployment, 0)
            self._event(
                work.offload, "Normal", "HomeScaledDown", "home Deployment scaled to 0; its GPUs are free"
            )
        if weight == plan.MIN_WEIGHT:
            away = await self._get(deployment_path(spec.namespace, deriving.away_name(spec)))
            if away is not None and _replicas(away) != 0:
                await self._scale(spec.namespace, deriving.away_name(spec), 0)
                self._event(
                    work.offload,
                    "Normal",
                    "AwayScaledDown",
                    "away Deployment scaled to 0; its provider deployments are being deleted",
                )
                return self._finalize_wait(work, "waiting for the away pods to be deleted")
            remaining = await self._away_pods(spec)
            if remaining:
                return self._finalize_wait(
                    work, f"waiting for {remaining} away pods to be deleted at the provider"
                )
        outcome = str(work.get("outcome") or "Succeeded")
        reason = str(work.get("outcomeReason") or outcome)
        where = {plan.MIN_WEIGHT: "home", plan.MAX_WEIGHT: "away"}.get(weight, f"split, {weight}% away")
        message = f"{reason}: serving {where}" + (
            f"; {work.get('message')}" if outcome != "Succeeded" and work.get("message") else ""
        )
        work.set(phase=outcome, message=message, stepStartedAt=None)
        work.condition("Progressing", "False", reason, message)
        self._event(
            work.offload, "Normal" if outcome == "Succeeded" else "Warning", f"Migration{outcome}", message
        )
        return IDLE_RESYNC_SECONDS

    def _finalize_wait(self, work: Pass, message: str) -> Requeue:
        work.condition("Progressing", "True", "Finalizing", message)
        return POLL_SECONDS


def _ready_replicas(deployment: RawObject | None) -> int:
    """Ready replicas running the current template (old ones being replaced do not count)."""
    if deployment is None:
        return 0
    status = deployment.get("status") or {}
    metadata = deployment.get("metadata") or {}
    if int(status.get("observedGeneration") or 0) < int(metadata.get("generation") or 0):
        return 0
    ready = int(status.get("readyReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    return min(ready, updated)
