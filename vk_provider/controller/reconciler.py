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
  (`vk_provider.offload.plan`) says advance, hold, roll back or finish.
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
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from vk_provider._kube.events import EventRecorder, EventType, InvolvedObject
from vk_provider.controller import deriving
from vk_provider.controller.claims import RouteClaims
from vk_provider.controller.deployments import (
    Deployments,
    deployment_path,
    ready_replicas_of,
    replicas_of,
    service_path,
)
from vk_provider.controller.gates import SideSample, judge, parse_side_sample, total
from vk_provider.controller.routers import RouterDirectory, RouterUnreachable
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, RawObject
from vk_provider.kit.timestamps import format_timestamp
from vk_provider.offload import plan
from vk_provider.offload.names import API_VERSION, KIND, offload_path
from vk_provider.offload.plan import Action, Decision, Direction, MigrationState
from vk_provider.offload.spec import InvalidSpec, OffloadSpec, parse_offload
from vk_provider.offload.status import (
    RUNNING_PHASES,
    OffloadStatus,
    Phase,
    set_condition,
    status_patch,
    with_patch,
)
from vk_provider.runtime.queueing import Requeue

POLL_SECONDS = 1.0
"""How soon to look again while waiting on replicas or routers (their changes do not wake us)."""
IDLE_RESYNC_SECONDS = 60.0
MISSING_RESYNC_SECONDS = 10.0


def receiving_side(direction: Direction) -> str:
    """The side a migration moves traffic to: the one its gates judge."""
    return direction.value


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
    status: Mapping[str, Any]
    """`.status` as read, in the API's spelling."""
    home: RawObject
    service: RawObject
    now: datetime
    patch: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The merge patch of `.status` this pass writes, in the API's spelling."""

    @property
    def current(self) -> OffloadStatus:
        """The status as it will be after this pass's patch."""
        return with_patch(self.status, self.patch)

    def set(self, **fields: Any) -> None:
        """Set status fields by their Python names (see OffloadStatus); None removes one."""
        self.patch.update(status_patch(**fields))

    def condition(self, kind: str, status: str, reason: str, message: str) -> None:
        conditions = self.current.conditions
        updated = set_condition(
            conditions, kind, status, reason, message, now=self.now, generation=self.spec.generation
        )
        if updated != list(conditions):
            self.patch["conditions"] = updated

    @property
    def weight(self) -> int:
        return self.current.away_weight or 0

    @property
    def direction(self) -> Direction:
        return Direction(self.current.target_placement or self.spec.placement.value)

    def state(self) -> MigrationState:
        current = self.current
        return MigrationState(
            direction=self.direction,
            steps=current.steps or self.spec.strategy.steps_toward(self.direction),
            step_index=current.step_index or 0,
            weight=self.weight,
            last_good_weight=self.weight if current.last_good_weight is None else current.last_good_weight,
            consecutive_failures=current.consecutive_failures,
            failures_before_rollback=self.spec.strategy.failures_before_rollback,
            paused=self.spec.paused,
        )


class Reconciler:
    def __init__(
        self,
        api: KubeApi,
        routers: RouterDirectory,
        events: EventRecorder,
        *,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        claims: RouteClaims | None = None,
    ) -> None:
        self._claims = claims
        self._api = api
        self._deployments = Deployments(api)
        self._routers = routers
        self._events = events
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        self._intervals: dict[str, IntervalStart] = {}

    # -- reading -------------------------------------------------------------------------------

    async def reconcile(self, namespace: str, name: str) -> Requeue:
        offload = await self._deployments.get(offload_path(namespace, name))
        if offload is None:
            self._intervals.pop(f"{namespace}/{name}", None)
            return None
        now = self._wall_clock()
        status: Mapping[str, Any] = offload.get("status") or {}
        try:
            spec = parse_offload(offload)
        except InvalidSpec as error:
            await self._report_problem(offload, status, now, "InvalidSpec", str(error))
            return None
        conflict = None if self._claims is None else await self._claims.conflict(offload)
        if conflict is not None:  # an older Offload holds the route: no migration, no traffic
            await self._report_problem(offload, status, now, "RouteConflict", conflict.message)
            return IDLE_RESYNC_SECONDS
        home = await self._deployments.get(deployment_path(namespace, spec.home_deployment))
        service = await self._deployments.get(service_path(namespace, spec.home_service))
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
        current = OffloadStatus.from_raw(status)
        conditions = list(current.conditions)
        updated = set_condition(conditions, "Ready", "False", reason, message, now=now, generation=generation)
        if updated == conditions and current.observed_generation == generation:
            return
        patch = status_patch(conditions=tuple(updated), observed_generation=generation, message=message)
        if current.phase is None:
            patch.update(status_patch(phase=Phase.IDLE))
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
        phase = work.current.phase
        if phase is None:
            work.set(
                phase=Phase.IDLE,
                target_placement="home",
                away_weight=0,
                last_good_weight=0,
                step_index=0,
                consecutive_failures=0,
                observed_generation=work.spec.generation,
                handled_promotion=work.spec.promotion,
                message="serving at home",
            )
            phase = Phase.IDLE
        if phase not in RUNNING_PHASES:
            if work.spec.placement.value != work.current.target_placement or work.spec.retry_requested(
                phase, work.current.handled_retry
            ):
                return self._start(work)
            if work.current.observed_generation != work.spec.generation:
                work.set(observed_generation=work.spec.generation)
            return IDLE_RESYNC_SECONDS
        work.set(observed_generation=work.spec.generation)
        if phase is Phase.FINALIZING:
            return await self._finalize(work)
        if work.spec.placement.value != work.current.target_placement:
            return self._decide(work, plan.abort(work.state()), outcome_reason="Aborted")
        if phase is Phase.PREPARING:
            return await self._prepare(work)
        return await self._shift(work)

    def _start(self, work: Pass) -> Requeue:
        spec = work.spec
        direction = spec.placement
        steps = spec.strategy.steps_toward(direction)
        state = plan.begin_from(
            direction, steps, work.weight, failures_before_rollback=spec.strategy.failures_before_rollback
        )
        home_replicas = work.current.home_replicas
        if direction is Direction.TO_AWAY and replicas_of(work.home) > 0:
            home_replicas = replicas_of(work.home)
        schedule = " -> ".join(str(w) for w in state.schedule[state.step_index :])
        message = f"moving {direction.value}: away weight {schedule}"
        work.set(
            phase=Phase.PREPARING,
            target_placement=direction.value,
            steps=state.steps,
            step_index=state.step_index,
            away_weight=state.weight,
            last_good_weight=state.last_good_weight,
            consecutive_failures=0,
            home_replicas=home_replicas,
            migration_started_at=work.now,
            progress_at=work.now,
            step_started_at=None,
            outcome=None,
            outcome_reason=None,
            last_check=None,
            handled_promotion=spec.promotion,
            handled_retry=spec.retry or None,
            observed_generation=spec.generation,
            message=message,
        )
        work.condition("Progressing", "True", "MigrationStarted", message)
        self._intervals.pop(spec.key, None)
        self._event(work.offload, "Normal", "MigrationStarted", message)
        return 0.0

    def _deadline_passed(self, work: Pass) -> bool:
        progress = work.current.progress_at or work.now
        return (work.now - progress).total_seconds() > work.spec.strategy.progress_deadline_seconds

    def _waiting(self, work: Pass, reason: str, message: str) -> Requeue:
        """Wait for something outside our control, within the progress deadline."""
        if self._deadline_passed(work):
            failed = plan.abort(work.state()) if work.current.phase is Phase.PREPARING else None
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
        home_replicas = work.current.home_replicas
        if work.direction is Direction.TO_AWAY:
            wanted = spec.away.replicas
            if wanted is None:
                wanted = home_replicas or replicas_of(work.home) or 1
            return await self._deployments.ensure_away(
                spec, work.home, work.service, wanted, self._announcer(work)
            ), wanted
        wanted = home_replicas or max(1, replicas_of(await self._deployments.away(spec)))
        if replicas_of(work.home) != wanted:
            work.home = await self._deployments.scale(spec.namespace, spec.home_deployment, wanted)
        return work.home, wanted

    def _announcer(self, work: Pass) -> Callable[[str, str], None]:
        return lambda reason, message: self._event(work.offload, "Normal", reason, message)

    async def _prepare(self, work: Pass) -> Requeue:
        side = receiving_side(work.direction)
        deployment, wanted = await self._receiving_deployment(work)
        needed = math.ceil(wanted * work.spec.strategy.ready_threshold_percent / 100)
        ready = ready_replicas_of(deployment)
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
        if work.current.phase is Phase.PAUSED:
            message = f"resumed at away weight {work.current.away_weight}"
            work.set(phase=Phase.SHIFTING, progress_at=work.now, message=message)
            self._event(work.offload, "Normal", "Resumed", message)
        if spec.promotion and spec.promotion != work.current.handled_promotion:
            work.set(handled_promotion=spec.promotion)
            return self._decide(work, plan.promote(work.state()))
        weight = work.weight
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
        step_key = (work.current.step_index or 0, weight, work.current.consecutive_failures)
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
        if work.current.phase is not Phase.PAUSED:
            message = f"paused at away weight {work.current.away_weight}"
            work.set(phase=Phase.PAUSED, message=message, step_started_at=None)
            work.condition("Progressing", "True", "Paused", message)
            self._event(work.offload, "Normal", "Paused", message)
        self._intervals.pop(work.spec.key, None)
        return None

    def _begin_interval(
        self, work: Pass, step_key: tuple[int, int, int], samples: dict[str, SideSample]
    ) -> None:
        self._intervals[work.spec.key] = IntervalStart(step_key, self._monotonic(), samples)
        work.set(step_started_at=work.now)

    def _judge(self, work: Pass, started: IntervalStart, samples: dict[str, SideSample]) -> Requeue:
        """The interval is over: judge it and act on the plan's decision."""
        spec = work.spec
        side = receiving_side(work.direction)
        interval = None
        if samples.keys() == started.samples.keys():  # the same routers at both ends
            interval = total(samples.values()).minus(total(started.samples.values()))
        judgement = judge(interval, spec.strategy.gates, side)
        work.set(last_check={**judgement.as_status(), "side": side, "at": format_timestamp(work.now)})
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
                consecutive_failures=decision.state.consecutive_failures,
                progress_at=work.now,
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
            away_weight=state.weight,
            step_index=state.step_index,
            last_good_weight=state.last_good_weight,
            consecutive_failures=state.consecutive_failures,
            step_started_at=None,
            progress_at=work.now,
            message=reason,
        )
        self._intervals.pop(work.spec.key, None)
        if decision.action is Action.ADVANCE:
            work.set(phase=Phase.SHIFTING)
            work.condition("Progressing", "True", "StepApplied", reason)
            self._event(work.offload, "Normal", "StepApplied", reason)
            return 0.0
        if outcome is None:
            outcome, outcome_reason = {
                Action.FINISH: (Phase.SUCCEEDED, "Succeeded"),
                Action.ROLL_BACK: (Phase.ROLLED_BACK, "GatesFailed"),
                Action.ABORT: (Phase.ROLLED_BACK, "Aborted"),
            }[decision.action]
        if decision.action is Action.ABORT and outcome_reason == "Aborted":
            # The spec now names the starting placement: that is where this migration ends.
            work.set(target_placement=work.spec.placement.value)
        work.set(phase=Phase.FINALIZING, outcome=outcome, outcome_reason=outcome_reason)
        work.condition("Progressing", "True", "Finalizing", reason)
        kind: EventType = "Normal" if outcome == Phase.SUCCEEDED else "Warning"
        self._event(work.offload, kind, outcome_reason or outcome, reason)
        return 0.0

    async def _finalize(self, work: Pass) -> Requeue:
        spec = work.spec
        weight = work.weight
        try:
            lagging = await self._lagging_routers(spec, weight)
        except RouterUnreachable as error:
            lagging = str(error)
        if lagging:
            return self._finalize_wait(work, lagging)
        if weight == plan.MAX_WEIGHT and replicas_of(work.home) != 0:
            # Everything goes away now: the home GPUs are free for training.
            work.home = await self._deployments.scale(spec.namespace, spec.home_deployment, 0)
            self._event(
                work.offload, "Normal", "HomeScaledDown", "home Deployment scaled to 0; its GPUs are free"
            )
        if weight == plan.MIN_WEIGHT:
            away = await self._deployments.away(spec)
            if away is not None and replicas_of(away) != 0:
                await self._deployments.scale(spec.namespace, deriving.away_name(spec), 0)
                self._event(
                    work.offload,
                    "Normal",
                    "AwayScaledDown",
                    "away Deployment scaled to 0; its provider deployments are being deleted",
                )
                return self._finalize_wait(work, "waiting for the away pods to be deleted")
            remaining = await self._deployments.away_pod_count(spec)
            if remaining:
                return self._finalize_wait(
                    work, f"waiting for {remaining} away pods to be deleted at the provider"
                )
        current = work.current
        outcome = Phase(current.outcome or Phase.SUCCEEDED)
        reason = current.outcome_reason or outcome.value
        where = {plan.MIN_WEIGHT: "home", plan.MAX_WEIGHT: "away"}.get(weight, f"split, {weight}% away")
        message = f"{reason}: serving {where}" + (
            f"; {current.message}" if outcome is not Phase.SUCCEEDED and current.message else ""
        )
        work.set(phase=outcome, message=message, step_started_at=None)
        work.condition("Progressing", "False", reason, message)
        self._event(
            work.offload,
            "Normal" if outcome is Phase.SUCCEEDED else "Warning",
            f"Migration{outcome.value}",
            message,
        )
        return IDLE_RESYNC_SECONDS

    def _finalize_wait(self, work: Pass, message: str) -> Requeue:
        work.condition("Progressing", "True", "Finalizing", message)
        return POLL_SECONDS
