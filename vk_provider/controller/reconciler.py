"""Reconcile one Offload: read everything, decide one move, write it, say when to look again.

Level-based: each pass reads the Offload, both Deployments, the home Service and what the routers
apply, and acts on that alone, so a controller restarted at any moment picks up from the status. The
only memory kept between passes is the metrics sample taken when a step's interval began and since
when a side has been lost (or back); after a restart they are gone and the interval or the grace
period simply starts again (judged late, never wrongly).

A migration's life, recorded in `status.phase`:

- **Preparing**: the receiving side is scaled up (the away Deployment derived and created, or the
  home Deployment given its replicas back) until the ready threshold is met and every router has
  that many usable endpoints there. Then the first step's weight is applied.
- **Shifting**: for each weight, wait until every router applies it; then the step's interval counts;
  then the gates judge the receiving side's traffic over the interval (against the other side's
  over the same interval while the weight sends it traffic too, `vk_provider.controller.baseline`)
  and the pure plan (`vk_provider.offload.plan`) says advance, hold, roll back or finish.
- **Paused**: `spec.paused` holds the current weight; the interval starts over on resume.
- **Finalizing**: the migration has an outcome. Once every router applies the final weight, the
  side that no longer gets traffic is scaled to 0 (home, so training gets the GPUs; or away, so
  nothing is left running at the provider, but for a pilot light), and the phase becomes the
  outcome: Succeeded, RolledBack (gates failed, or aborted) or Failed (progress deadline exceeded).

While it serves at home, an Offload may keep away replicas warm, at weight 0: a pilot light or a
warm-up (`vk_provider.controller.warming`), so that a flip away need not wait for a cold start.

A flip (`spec.placement` changed) starts a migration from wherever traffic stands. While one runs,
changing `spec.placement` back aborts it (that is what `kubectl offload abort` does), and a new value
of the promote annotation skips the remaining steps.

After a migration, the controller keeps watching the side that serves all the traffic and, when it is
lost for the grace period, starts an emergency migration to the other side
(`vk_provider.controller.emergency`). A deleted Offload is migrated home, then let go
(`vk_provider.controller.deletion`).

The reconciler is built of parts, each a module mixed into `Reconciler`: those two, a step's interval
and the severe gate's windows within it (`intervals`), home pods on unhealthy nodes (`unhealthyhome`),
spilling over (`spillingover`), and what they all share (`reconcilerbase`, with one pass's reading and
its status patch in `passes`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from vk_provider._kube.events import EventType
from vk_provider.controller import deriving, warming
from vk_provider.controller.dataplanes import DataPlaneNotConfigured
from vk_provider.controller.deletion import Deletion, leaving
from vk_provider.controller.deployments import deployment_path, ready_replicas_of, replicas_of, service_path
from vk_provider.controller.emergency import EMERGENCY_REASON, EmergencyWatch, watch_seconds
from vk_provider.controller.httproutes import RouteProblem
from vk_provider.controller.intervals import StepIntervals, severe_poll_seconds
from vk_provider.controller.passes import (
    IDLE_RESYNC_SECONDS,
    POLL_SECONDS,
    Pass,
    first_status,
    receiving_side,
)
from vk_provider.controller.routers import RouterUnreachable
from vk_provider.controller.scrapes import Scrape, serves_both_sides
from vk_provider.controller.serving import other_side
from vk_provider.controller.spilling import SPILLING_CONDITION
from vk_provider.controller.spillingover import SpillingOver
from vk_provider.controller.unhealthyhome import UnhealthyHome
from vk_provider.kit.kube import RawObject
from vk_provider.offload import homehealth, plan, spillover
from vk_provider.offload.names import FINALIZER, offload_path
from vk_provider.offload.plan import Action, Decision, Direction
from vk_provider.offload.spec import InvalidSpec, OffloadSpec, parse_offload
from vk_provider.offload.status import RUNNING_PHASES, InvalidStatus, OffloadStatus, Phase
from vk_provider.runtime.queueing import Requeue

MISSING_RESYNC_SECONDS = 10.0
ROUTER_LAG_REPORTED_AFTER_SECONDS = 3.0
"""Routers behind a step's weight for less than this (from when it was written) are waited for
without a status write: picking the step up takes them a second or two."""


class Reconciler(EmergencyWatch, Deletion, StepIntervals, UnhealthyHome, SpillingOver):
    """The phase machine of every Offload, with its parts mixed in (see the module's docstring)."""

    # -- reading -------------------------------------------------------------------------------

    async def reconcile(self, namespace: str, name: str) -> Requeue:
        offload = await self._deployments.get(offload_path(namespace, name))
        if offload is None:
            for memory in (self._lost, self._back):
                memory.forget(f"{namespace}/{name}")
            self._intervals.pop(f"{namespace}/{name}", None)
            self._metrics.offload_gone(namespace, name)
            return None
        now = self._wall_clock()
        status: Mapping[str, Any] = offload.get("status") or {}
        self._export(namespace, name, status)
        spec = await self._actionable_spec(offload, status, now)
        if spec is None:
            return None
        if spec.deleting:
            spec = leaving(spec)
        elif FINALIZER not in spec.finalizers:
            offload = await self._add_finalizer(spec)
        conflict = None if self._claims is None else await self._claims.conflict(offload)
        if conflict is not None:  # an older Offload holds the route: no migration, no traffic
            return await self._conflicted(spec, offload, status, now, conflict.message)
        home = await self._deployments.get(deployment_path(namespace, spec.home_deployment))
        service = await self._deployments.get(service_path(namespace, spec.home_service))
        missing = await self._missing(spec, home, service)
        if missing is not None or home is None or service is None:
            if spec.deleting and not OffloadStatus.from_raw(status).away_weight:
                # Nothing is served away, so nothing needs the home side to go: let go now.
                return await self._release_now(spec, offload, status, now)
            if missing is not None:
                await self._report_problem(offload, status, now, *missing)
            return MISSING_RESYNC_SECONDS
        work = Pass(spec, offload, status, home, service, now)
        work.condition("Ready", "True", "Resolved", "the home Deployment and Service exist")
        requeue = await self._step(work)
        if spec.spill_over is not None and work.current.running:
            # A migration moves the replicas: the autoscaler and `status` see them as they are.
            await self._report_replicas(work, await self._deployments.away(spec), work.weight)
            message = f"a migration {work.direction.value} runs: {work.current.message}"
            work.condition(SPILLING_CONDITION, "False", "Migrating", message)
        await self._write(work)
        return requeue

    def _export(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """The Offload's gauges from its status as read. Our own status writes come back through the
        watch as another pass, so the gauges trail the status by one pass at most."""
        self._metrics.offload_seen(namespace, name)
        with contextlib.suppress(InvalidStatus):  # a status of the wrong shape has no gauges
            self._metrics.offload_status(namespace, name, OffloadStatus.from_raw(status))

    async def _missing(
        self, spec: OffloadSpec, home: RawObject | None, service: RawObject | None
    ) -> tuple[str, str] | None:
        """(reason, message) when something the Offload names is missing, so that nothing can move."""
        if home is None or service is None:
            reason, what = (
                ("HomeDeploymentNotFound", f'Deployment "{spec.home_deployment}"')
                if home is None
                else ("HomeServiceNotFound", f'Service "{spec.home_service}"')
            )
            return reason, f"{what} not found in {spec.namespace}; nothing is moved until it exists"
        try:
            await self._plane(spec).check(spec)
        except RouteProblem as problem:
            return problem.reason, str(problem)
        except RouterUnreachable:
            pass  # the step reads the data plane again, and waits on it within the progress deadline
        return None

    async def _actionable_spec(
        self, offload: RawObject, status: Mapping[str, Any], now: datetime
    ) -> OffloadSpec | None:
        """The Offload's spec, or None (reported on the Offload) when it cannot be acted on as written."""
        try:
            spec = parse_offload(offload)
            self._data_planes.of(spec)
        except InvalidSpec as error:
            await self._report_problem(offload, status, now, "InvalidSpec", str(error))
            return None
        except DataPlaneNotConfigured as error:
            await self._report_problem(offload, status, now, "DataPlaneNotConfigured", str(error))
            return None
        return spec

    # -- the state machine ---------------------------------------------------------------------

    async def _step(self, work: Pass) -> Requeue:
        phase = work.current.phase
        if phase is None:
            work.set(**first_status(work.spec.generation, work.spec.promotion))
            phase = Phase.IDLE
        if work.spec.deleting:
            self._note_deleting(work)
        if phase not in RUNNING_PHASES:
            return await self._idle(work, phase)
        work.set(observed_generation=work.spec.generation)
        if phase is Phase.FINALIZING:
            return await self._finalize(work)
        if work.spec.placement.value != work.current.target_placement and not self._in_emergency(work):
            return self._decide(work, plan.abort(work.state()), outcome_reason="Aborted")
        if phase is Phase.PREPARING:
            return await self._prepare(work)
        return await self._shift(work)

    async def _idle(self, work: Pass, phase: Phase) -> Requeue:
        """No migration runs: start one, wait to return after an emergency, let go, or keep watching."""
        if work.spec.placement.value != work.current.target_placement:
            if self._in_emergency(work):
                return await self._await_return(work)
            return self._start(work)
        if work.spec.retry_requested(phase, work.current.handled_retry):
            return self._start(work)
        flip = work.spec.flip_strategy
        if flip is not None and flip.value != work.current.handled_flip_strategy:
            # Its flip started no migration (the Offload was already there): it applies to nothing.
            work.set(handled_flip_strategy=flip.value)
        if work.current.observed_generation != work.spec.generation:
            work.set(observed_generation=work.spec.generation)
        if self._in_emergency(work):  # the spec now names the side the emergency moved to
            message = f"spec.placement is now {work.spec.placement.value}, where the emergency moved traffic"
            work.condition("Degraded", "False", "PlacementChanged", message)
        if work.spec.deleting:
            return await self._let_go(work, phase)
        serving = await self._keep_serving(work)
        warm = await self._warmer.keep(
            work, in_emergency=self._in_emergency(work), announce=self._announcer(work)
        )
        return warming.earliest(serving, warm)

    def _start(
        self, work: Pass, direction: Direction | None = None, steps: tuple[int, ...] | None = None
    ) -> Requeue:
        """Start a migration toward `direction` (default: the spec's placement) by `steps` (default: a
        person's flip's own, else the spec's)."""
        spec = work.spec
        direction = spec.placement if direction is None else direction
        handled_flip = work.current.handled_flip_strategy
        interval = spec.strategy.step_interval_seconds
        if steps is None:
            steps, interval = spec.migration_pace(direction, handled_flip)
            if spec.flip_strategy is not None:
                handled_flip = spec.flip_strategy.value  # run by this migration, or by none
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
            step_interval_seconds=interval,
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
            handled_flip_strategy=handled_flip,
            observed_generation=spec.generation,
            message=message,
        )
        work.condition("Progressing", "True", "MigrationStarted", message)
        self._warmer.leave(work, f"a migration {direction.value} runs")
        self._intervals.pop(spec.key, None)
        self._event(work.offload, "Normal", "MigrationStarted", message)
        return 0.0

    def _wait_for_routers(self, work: Pass, lagging: str, reason: str = "WaitingForRouters") -> Requeue:
        moved = work.current.progress_at
        just_moved = (
            moved is not None and (work.now - moved).total_seconds() < ROUTER_LAG_REPORTED_AFTER_SECONDS
        )
        if just_moved and not self._deadline_passed(work):
            # Routers apply a step within a second or two of its status write. Saying so in the
            # status costs one write per step and Offload (a wave of a hundred saturated the
            # controller's requests with them) and tells nobody anything: a lag that lasts is said.
            return POLL_SECONDS
        return self._waiting(work, reason, lagging)

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
            # (The count a warm-up keeps ready too, so that this finds it ready.)
            wanted = warming.move_away_replicas(spec, home_replicas or replicas_of(work.home))
            return await self._deployments.ensure_away(
                spec, work.home, work.service, wanted, self._announcer(work)
            ), wanted
        # Home gets back what it had before the move out, else what away runs; with neither known, the
        # home side keeps its own count (never shrunk by a move home that moves nothing).
        away_replicas = replicas_of(await self._deployments.away(spec))
        wanted = home_replicas or away_replicas or replicas_of(work.home) or 1
        if spec.spill_over is not None:  # home takes what it holds; the overflow stays away
            wanted = max(1, spillover.split_replicas(spec.total_replicas, spec.spill_over).home)
        if replicas_of(work.home) != wanted and homehealth.recorded_base(work.home) is None:
            work.home = await self._deployments.scale(spec.namespace, spec.home_deployment, wanted)
        return work.home, wanted

    async def _prepare(self, work: Pass) -> Requeue:
        side = receiving_side(work.direction)
        deployment, wanted = await self._receiving_deployment(work)
        if work.direction is Direction.TO_HOME:
            held = await self._hold_for_stranded(work, wanted)
            if held is not None:
                return held
            deployment = work.home
        needed = math.ceil(wanted * work.spec.strategy.ready_threshold_percent / 100)
        ready = ready_replicas_of(deployment)
        if ready < needed:
            return self._waiting(
                work, "WaitingForReplicas", f"{ready} of {needed} {side} replicas ready (of {wanted} wanted)"
            )
        try:
            views = await self._views(work.spec, work.weight)
        except RouterUnreachable as error:
            return self._waiting(work, "RouterUnreachable", str(error))
        behind = [view.router for view in views if view.usable.get(side, 0) < needed]
        if behind:
            return self._waiting(
                work,
                "WaitingForRouters",
                f"{', '.join(behind)} see fewer than {needed} {side} endpoints",
            )
        if self._in_emergency(work):
            # All at once: the side being left has lost its endpoints, no step would protect anything.
            promoted = plan.promote(work.state())
            reason = (
                f"the {side} side is ready: all traffic moves there at once (away weight {promoted.weight})"
            )
            return self._decide(
                work,
                dataclasses.replace(promoted, reason=reason),
                outcome=Phase.SUCCEEDED,
                outcome_reason=EMERGENCY_REASON,
            )
        decision = plan.next_step(dataclasses.replace(work.state(), paused=False), plan.Verdict.HEALTHY)
        return self._decide(work, decision)

    async def _shift(self, work: Pass) -> Requeue:
        spec = work.spec
        if work.direction is Direction.TO_HOME and not self._in_emergency(work):
            # Looked at on every pass of a move home, even at weight 100: the next step would send
            # traffic to pods on a node turned unhealthy since the move was prepared.
            stranded = await self._stranded_home(work)
            if stranded.stranded:
                return self._retreat(
                    work,
                    f"{len(stranded.stranded)} home pods are on unhealthy node(s) "
                    f"{', '.join(stranded.stranded_nodes)}",
                )
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
        samples = Scrape({})
        reason = None
        try:
            lagging = await self._lagging_routers(spec, weight)
            if not lagging:
                samples = await self._sample(spec, side, weight)
        except RouterUnreachable as error:
            lagging, reason = str(error), error.waiting_reason
        if lagging:
            return self._wait_for_routers(work, lagging, reason or "WaitingForRouters")
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
            return min(float(work.step_interval_seconds), severe_poll_seconds(spec))
        return self._within_interval(work, started, samples)

    async def _lagging_routers(self, spec: OffloadSpec, weight: int) -> str:
        """'' when every router applies `weight`, else which ones do not."""
        views = await self._views(spec, weight)
        behind = [view.router for view in views if view.away_weight != weight]
        return f"{', '.join(behind)} do not apply away weight {weight} yet" if behind else ""

    def _hold_paused(self, work: Pass) -> Requeue:
        if work.current.phase is not Phase.PAUSED:
            message = f"paused at away weight {work.current.away_weight}"
            work.set(phase=Phase.PAUSED, message=message, step_started_at=None)
            work.condition("Progressing", "True", "Paused", message)
            self._event(work.offload, "Normal", "Paused", message)
        self._intervals.pop(work.spec.key, None)
        return None

    async def _sample(self, spec: OffloadSpec, side: str, weight: int) -> Scrape:
        """The judged side's counters, and the other side's while the weight sends it traffic too."""
        plane = self._plane(spec)
        judged = await plane.samples(spec, side)
        baseline_side = other_side(side)
        if not (
            spec.strategy.gates.compare_with_other_side
            and serves_both_sides(weight)
            and plane.measures(baseline_side)
        ):
            return Scrape(judged)
        return Scrape(judged, await plane.samples(spec, baseline_side))

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
            outcome, default_reason = {
                Action.FINISH: (Phase.SUCCEEDED, "Succeeded"),
                Action.ROLL_BACK: (Phase.ROLLED_BACK, "GatesFailed"),
                Action.ABORT: (Phase.ROLLED_BACK, "Aborted"),
            }[decision.action]
            outcome_reason = outcome_reason or default_reason
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
        keep_lost_side = self._in_emergency(work)  # left as it is, so that it can come back
        if weight == plan.MAX_WEIGHT and replicas_of(work.home) != 0 and not keep_lost_side:
            # Everything goes away now: the home GPUs are free for training (and a replacement of
            # stranded home pods, if one was under way, has nothing left to replace).
            work.home = await self._deployments.scale_replacing(spec.namespace, spec.home_deployment, 0, None)
            self._event(
                work.offload, "Normal", "HomeScaledDown", "home Deployment scaled to 0; its GPUs are free"
            )
        if weight == plan.MIN_WEIGHT and not keep_lost_side and spec.spill_over is None:
            # (A spill-over Offload keeps its away replicas: spilling over, next, scales them.)
            away = await self._deployments.away(spec)
            kept = self._warmer.kept_after_move_home(work, in_emergency=keep_lost_side)  # the pilot light
            if away is not None and replicas_of(away) > kept:
                await self._deployments.scale(spec.namespace, deriving.away_name(spec), kept)
                self._event(
                    work.offload,
                    "Normal",
                    "AwayScaledDown",
                    f"away Deployment scaled to {kept} (the pilot light, spec.away.warmReplicas); the "
                    "other provider deployments are being deleted"
                    if kept
                    else "away Deployment scaled to 0; its provider deployments are being deleted",
                )
                return self._finalize_wait(work, "waiting for the away pods to be deleted")
            remaining = await self._deployments.away_pod_count(spec) - kept
            if remaining > 0:
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
        self._metrics.migration_ended(spec.namespace, spec.name, outcome.value, reason)
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

    # -- no migration runs: home pods replaced, spilling over, the serving side watched ---------

    async def _keep_serving(self, work: Pass) -> Requeue:
        """No migration runs: home pods stranded on unhealthy nodes are replaced first (while home serves
        any traffic), then the side serving all of it is watched. A spill-over Offload serves from
        both sides instead (`_spill_over`)."""
        if work.spec.spill_over is not None and not self._in_emergency(work):
            if work.spec.placement is Direction.TO_HOME and work.current.target_placement == "home":
                return await self._spill_over(work)
            if work.weight == plan.MAX_WEIGHT:  # moved away whole: the away side follows the total
                await self._keep_all_away(work)
        elif work.current.spill_over is not None:  # spec.spillOver was removed: say so, keep serving
            work.set(spill_over=None, replicas=None, selector=None)
            work.condition(SPILLING_CONDITION, "False", "NotConfigured", "spec.spillOver is not set")
        if work.weight == plan.MAX_WEIGHT or replicas_of(work.home) == 0 or self._in_emergency(work):
            return await self._watch_serving(work)
        replacing = await self._replace_stranded(work, replicas_of(work.home))
        if replacing:
            work.set(message=replacing)
            return POLL_SECONDS
        # Looked at again within watch_seconds even with the emergency check off: a home node turning
        # unhealthy wakes nothing here.
        requeue = await self._watch_serving(work)
        return watch_seconds(work.spec) if requeue is None else min(requeue, watch_seconds(work.spec))
