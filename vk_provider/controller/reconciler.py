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

After a migration, the controller keeps watching the side that serves all the traffic (see
`serving`): lost for longer than `strategy.emergency.graceSeconds`, it starts an **emergency
migration** to the other side (condition `Degraded`, reason `EmergencyMigration`, a Warning Event, a
metric): the other side is brought up and gets all the traffic as soon as it is ready, without
steps or gates (the lost side serves nothing worth protecting). The lost side is left as it is, so
it can come back; once every router sees it ready again for the grace period, a normal, gated
migration returns traffic to `spec.placement`.

Deletion: the controller puts a finalizer on every Offload. A deleted Offload is migrated home by its
strategy (at once when it already serves at home); only then is its route written onto the home
Service (`vk_provider.controller.routekeeping`: the routers keep sending its hosts home after it is
gone), the away Deployment scaled to 0, its pods left, the Deployment deleted and the finalizer
removed, which lets the Offload go. The condition `Deleting` says where that stands.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from vk_provider._kube.events import EventRecorder, EventType, InvolvedObject
from vk_provider.controller import deriving, spilling, warming
from vk_provider.controller.claims import RouteClaims
from vk_provider.controller.dataplanes import DataPlane, DataPlaneNotConfigured, DataPlanes
from vk_provider.controller.deployments import (
    Deployments,
    deployment_path,
    ready_replicas_of,
    replicas_of,
    service_path,
)
from vk_provider.controller.gates import Judgement, judge, judge_severe
from vk_provider.controller.httproutes import RouteProblem
from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.controller.routekeeping import RouteKeeper
from vk_provider.controller.routers import RouterUnreachable, RouteView
from vk_provider.controller.scrapes import Scrape, counted_since, serves_both_sides
from vk_provider.controller.serving import (
    NOT_SERVING_YET_REASON,
    LossClock,
    best_usable,
    has_served,
    needed_endpoints,
    other_side,
    routed,
    serving_side,
    worst_usable,
)
from vk_provider.controller.spilling import SPILLING_CONDITION
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, RawObject
from vk_provider.kit.timestamps import format_timestamp
from vk_provider.offload import homehealth, plan, spillover
from vk_provider.offload.names import (
    API_VERSION,
    FINALIZER,
    KIND,
    PROMOTE_ANNOTATION,
    SERVES_LABEL,
    offload_path,
)
from vk_provider.offload.plan import Action, Decision, Direction, MigrationState
from vk_provider.offload.spec import MAX_AWAY_REPLICAS, InvalidSpec, OffloadSpec, parse_offload
from vk_provider.offload.status import (
    RUNNING_PHASES,
    InvalidStatus,
    OffloadStatus,
    Phase,
    set_condition,
    status_patch,
    with_patch,
)
from vk_provider.policy.names import UNHEALTHY_TAINT_KEY
from vk_provider.runtime.queueing import Requeue

POLL_SECONDS = 1.0
"""How soon to look again while waiting on replicas or routers (their changes do not wake us)."""
MIN_WATCH_SECONDS = 1.0
MAX_WATCH_SECONDS = 10.0
"""How often the serving side is looked at after a migration (a lost side wakes nothing): a sixth of
the emergency grace period, within these bounds. Each look costs three or four API reads per Offload
(the pass's own) and one /-/status per router, so it is not done more often than the grace needs."""
EMERGENCY_REASON = "EmergencyMigration"
GATES_PASSING = {
    plan.Verdict.HEALTHY: "True",
    plan.Verdict.UNHEALTHY: "False",
    plan.Verdict.SEVERE: "False",
}
"""The GatesPassing condition's status for each verdict (not enough data: Unknown)."""
EMERGENCY_STEPS = (plan.MAX_WEIGHT,)
"""An emergency migration moves all the traffic at once: the side it leaves serves nothing."""
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
    samples: Scrape
    """The counters when the interval began."""
    window_started: float
    window_samples: Scrape
    """The start of the current short window in which the severe gate is checked."""


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
    gone: bool = False
    """The finalizer was removed: the Offload is about to disappear, nothing more is written."""

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

    @property
    def step_interval_seconds(self) -> int:
        """The running migration's, recorded when it started (a flip's own, perhaps), else the spec's."""
        return self.current.step_interval_seconds or self.spec.strategy.step_interval_seconds

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
        data_planes: DataPlanes,
        events: EventRecorder,
        *,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        claims: RouteClaims | None = None,
        metrics: ControllerMetrics | None = None,
        unhealthy_taint_key: str = UNHEALTHY_TAINT_KEY,
    ) -> None:
        self._claims = claims
        self._unhealthy_taint_key = unhealthy_taint_key
        """The taint the OffloadPolicy puts on a home node it judges unhealthy (see `homehealth`)."""
        self._api = api
        self._deployments = Deployments(api)
        self._warmer = warming.Warmer(self._deployments, self._event)
        self._routes = RouteKeeper(api, self._deployments.get, claims)
        self._data_planes = data_planes
        self._events = events
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        self._intervals: dict[str, IntervalStart] = {}
        self._metrics = metrics if metrics is not None else ControllerMetrics()
        self._lost = LossClock(monotonic)
        """Since when the serving side has been lost, per Offload."""
        self._back = LossClock(monotonic)
        """Since when the side left in an emergency has been ready again, per Offload."""

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
            # The whole first status, not just a phase: an Offload that starts out blocked (its route
            # claimed, its Deployment not there yet) must later read as serving home, or the pass
            # after the problem clears would take it for a move home and rescale the home side.
            annotations = (offload.get("metadata") or {}).get("annotations") or {}
            promotion = str(annotations.get(PROMOTE_ANNOTATION) or "")
            patch.update(status_patch(**first_status(generation, promotion)))
            patch.update(status_patch(message=message))
        metadata = offload.get("metadata") or {}
        self._event(offload, "Warning", reason, message)
        await self._api.patch(
            offload_path(metadata["namespace"], metadata["name"], status=True),
            {"status": patch},
            content_type=MERGE_PATCH,
        )

    async def _write(self, work: Pass) -> None:
        if not work.patch or work.gone:
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

    async def _let_go(self, work: Pass, phase: Phase) -> Requeue:
        """A deleted Offload with no migration running: released once all traffic is home."""
        if work.weight == plan.MIN_WEIGHT:
            return await self._release(work)
        if work.current.spill_over is not None and phase in (Phase.IDLE, Phase.SUCCEEDED):
            # Deleted while spilling over: traffic comes home by the strategy, then it lets go.
            work.set(spill_over=None, replicas=None, selector=None)
            return self._start(work)
        return IDLE_RESYNC_SECONDS  # blocked: `_note_deleting` says why and what to do

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

    def _announcer(self, work: Pass) -> Callable[[str, str], None]:
        return lambda reason, message: self._event(work.offload, "Normal", reason, message)

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
        try:
            lagging = await self._lagging_routers(spec, weight)
            if not lagging:
                samples = await self._sample(spec, side, weight)
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
            return min(float(work.step_interval_seconds), severe_poll_seconds(spec))
        return self._within_interval(work, started, samples)

    def _within_interval(self, work: Pass, started: IntervalStart, samples: Scrape) -> Requeue:
        """Judge the interval once it is over; until then, check each short window for a severe failure."""
        spec = work.spec
        remaining = work.step_interval_seconds - (self._monotonic() - started.started)
        if remaining <= 0:
            return self._judge(work, started, samples)
        severe = self._severe_window(work, started, samples)
        if severe is not None:
            return self._act_on_severe(work, severe)
        # Looked at every POLL_SECONDS, not once per window: a window that already holds enough
        # requests at a severe error rate need not run out before it counts.
        return min(remaining, severe_poll_seconds(spec))

    def _severe_window(self, work: Pass, started: IntervalStart, samples: Scrape) -> Judgement | None:
        """Judge the short window so far by the severe gate alone; a new window starts when it is over."""
        side = receiving_side(work.direction)
        gates = work.spec.strategy.gates
        severe_gate = gates.severe
        judgement = None
        counted, baseline = counted_since(samples, started.window_samples)
        if counted is not None:
            judgement = judge_severe(counted, gates, side, baseline)
        if judgement is None and self._monotonic() - started.window_started >= severe_gate.window_seconds:
            started.window_started, started.window_samples = self._monotonic(), samples
        return judgement

    def _act_on_severe(self, work: Pass, judgement: Judgement) -> Requeue:
        side = receiving_side(work.direction)
        work.set(last_check={**judgement.as_status(), "side": side, "at": format_timestamp(work.now)})
        work.condition("GatesPassing", "False", judgement.verdict.value, judgement.message)
        self._metrics.severe_rollback(work.spec.namespace, work.spec.name)
        decision = plan.next_step(work.state(), judgement.verdict)
        return self._decide(work, decision, judged=judgement.message, outcome_reason="SevereFailure")

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

    def _begin_interval(self, work: Pass, step_key: tuple[int, int, int], samples: Scrape) -> None:
        now = self._monotonic()
        self._intervals[work.spec.key] = IntervalStart(step_key, now, samples, now, samples)
        work.set(step_started_at=work.now)

    def _judge(self, work: Pass, started: IntervalStart, samples: Scrape) -> Requeue:
        """The interval is over: judge it and act on the plan's decision."""
        spec = work.spec
        side = receiving_side(work.direction)
        interval, baseline = counted_since(samples, started.samples)  # None unless the same routers
        judgement = judge(interval, spec.strategy.gates, side, baseline)
        work.set(last_check={**judgement.as_status(), "side": side, "at": format_timestamp(work.now)})
        work.condition(
            "GatesPassing",
            GATES_PASSING.get(judgement.verdict, "Unknown"),
            judgement.verdict.value,
            judgement.message,
        )
        if judgement.verdict is plan.Verdict.SEVERE:
            return self._act_on_severe(work, judgement)
        decision = plan.next_step(work.state(), judgement.verdict)
        if decision.action is not Action.HOLD:
            return self._decide(work, decision, judged=judgement.message)
        # Held: a new interval starts now, from the sample just taken.
        step_key = (started.step_key[0], started.step_key[1], decision.state.consecutive_failures)
        self._begin_interval(work, step_key, samples)
        interval_seconds = float(work.step_interval_seconds)
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

    def _plane(self, spec: OffloadSpec) -> DataPlane:
        return self._data_planes.of(spec)  # `reconcile` reported an unknown one before any step

    async def _views(self, spec: OffloadSpec, weight: int) -> list[RouteView]:
        """Every replica's view of the route, once the data plane was asked to carry `weight`."""
        plane = self._plane(spec)
        await plane.apply(spec, weight)
        return await plane.views(spec)

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

    # -- home pods on unhealthy nodes -------------------------------------------------------------

    async def _stranded_home(self, work: Pass) -> homehealth.HomePods:
        """The home pods, sorted into ready ones on healthy nodes and ones stranded on unhealthy nodes."""
        pods = await self._deployments.pods_of(work.home)
        bound = {str(node) for pod in pods if (node := (pod.get("spec") or {}).get("nodeName"))}
        nodes = await self._deployments.nodes(bound)
        return homehealth.classify(pods, homehealth.unhealthy_nodes(nodes, self._unhealthy_taint_key))

    async def _replace_stranded(self, work: Pass, base: int) -> str:
        """Replace home pods on unhealthy nodes, make before break (see `homehealth`): the reason the
        home side is not ready to serve yet, '' once no pod is stranded."""
        spec = work.spec
        recorded = homehealth.recorded_base(work.home)
        move = homehealth.plan_replacement(
            await self._stranded_home(work), base if recorded is None else recorded
        )
        for pod in move.drain:
            await self._deployments.mark_first_to_go(spec.namespace, pod)
        if replicas_of(work.home) != move.replicas or recorded != move.base:
            work.home = await self._deployments.scale_replacing(
                spec.namespace, spec.home_deployment, move.replicas, move.base
            )
        if move.waiting:
            if recorded is None:
                self._event(work.offload, "Warning", "ReplacingUnhealthyHome", move.waiting)
            work.condition("HomeHealthy", "False", "PodsOnUnhealthyNodes", move.waiting)
        elif recorded is not None:
            message = f"no home pod is left on an unhealthy node; the home Deployment runs {move.replicas}"
            self._event(work.offload, "Normal", "UnhealthyHomeReplaced", message)
            work.condition("HomeHealthy", "True", "Replaced", message)
        return move.waiting

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

    # -- spilling over: home as far as the home GPUs hold it, the overflow away -----------------

    async def _spill_over(self, work: Pass) -> Requeue:
        """Place the total replicas (home first), split the traffic by ready capacity, report it."""
        spec = work.spec
        spill = spec.spill_over
        assert spill is not None  # noqa: S101 (the caller checked)
        total = spec.total_replicas
        away = await self._deployments.away(spec)
        base = spillover.split_replicas(total, spill)
        if replicas_of(work.home) != base.home and homehealth.recorded_base(work.home) is None:
            work.home = await self._deployments.scale(spec.namespace, spec.home_deployment, base.home)
        replacing = await self._replace_stranded(work, base.home) if base.home else ""
        home_pods = await self._deployments.pods_of(work.home)
        for pod in spilling.unlabelled(home_pods, spec):
            await self._deployments.label_pod(spec.namespace, pod, SERVES_LABEL, spec.name)
        short = spillover.home_shortfall(
            unschedulable=spilling.unschedulable(home_pods),
            home_wanted=base.home,
            home_ready=ready_replicas_of(work.home),
            away_extra=replicas_of(away) - base.away,
        )
        split = spillover.split_replicas(total, spill, home_short=short)
        try:
            views = routed(await self._views(spec, work.weight))
        except RouterUnreachable:
            views = []
        agree = bool(views) and not spec.paused and all(view.away_weight == work.weight for view in views)
        step = spillover.spill_step(
            split=split,
            spill=spill,
            away_replicas=replicas_of(away),
            weight=work.weight,
            home_usable=worst_usable(views, "home") if views else 0,
            away_usable=worst_usable(views, "away") if views else 0,
            routers_agree=agree and not replacing,
        )
        if step.away_replicas != replicas_of(away) or (away is not None and step.away_replicas):
            # Created, scaled, or rolled to a changed home template (keep_away tells them apart).
            announce = self._announcer(work)
            away = await self._deployments.keep_away(
                spec, work.home, work.service, step.away_replicas, current=away, announce=announce
            )
        if step.weight != work.weight:
            message = (
                f"away weight {work.weight} -> {step.weight}: the ready replicas' share is "
                f"{step.capacity_weight}"
            )
            work.set(away_weight=step.weight, message=message)
            self._event(work.offload, "Normal", "SplitChanged", message)
        await self._report_spill(work, split, away, step)
        if replacing:
            work.set(message=replacing)
        return watch_seconds(spec) if step.settled and not replacing else POLL_SECONDS

    async def _keep_all_away(self, work: Pass) -> None:
        """A spill-over Offload moved away whole (the training policy's flip): every replica of the total
        runs away, as the autoscaler changes it; the side serving all of it is watched as ever."""
        spec = work.spec
        wanted = min(spec.total_replicas, MAX_AWAY_REPLICAS)
        away = await self._deployments.away(spec)
        if away is not None and replicas_of(away) != wanted:
            announce = self._announcer(work)
            away = await self._deployments.keep_away(
                spec, work.home, work.service, wanted, current=away, announce=announce
            )
        await self._report_spill(work, spillover.Split(0, wanted), away, None)

    async def _report_spill(
        self, work: Pass, split: spillover.Split, away: RawObject | None, step: spillover.SpillStep | None
    ) -> None:
        """The replicas (`_report_replicas`) and the SpillingOver condition, after a pass that spilled
        over (`step`) or kept every replica away (None)."""
        capacity = work.weight if step is None else step.capacity_weight
        home_ready, away_ready = await self._report_replicas(work, away, capacity)
        if step is None:
            message = f"every replica runs away ({replicas_of(away)}); spilling over resumes once it is home"
            work.condition(SPILLING_CONDITION, "False", "MovedAway", message)
            return
        work.condition(
            SPILLING_CONDITION, "True", "SpillingOver", spilling.describe(split, step, home_ready, away_ready)
        )

    async def _report_replicas(
        self, work: Pass, away: RawObject | None, capacity_weight: int
    ) -> tuple[int, int]:
        """status.replicas (the scale subresource's), status.selector and status.spillOver, as the two
        Deployments stand; returns the ready replicas of each side."""
        spec = work.spec
        home_ready, away_ready = ready_replicas_of(work.home), ready_replicas_of(away)
        cost = spilling.away_cost_per_hour(await self._deployments.away_pods(spec)) if away else None
        work.set(
            replicas=replicas_of(work.home) + replicas_of(away),
            selector=spilling.selector(spec),
            spill_over=spilling.spill_status(
                home_replicas=replicas_of(work.home),
                home_ready=home_ready,
                away_replicas=replicas_of(away),
                away_ready=away_ready,
                capacity_weight=capacity_weight,
                cost=cost,
            ),
        )
        return home_ready, away_ready

    async def _hold_for_stranded(self, work: Pass, wanted: int) -> Requeue | None:
        """Preparing a move home: None once no home pod is stranded on an unhealthy node; until then
        the replacement goes on, and traffic that still reaches home goes all away again."""
        replacing = await self._replace_stranded(work, wanted)
        if not replacing:
            return None
        if plan.MIN_WEIGHT < work.weight < plan.MAX_WEIGHT and not self._in_emergency(work):
            return self._retreat(work, replacing)
        # The weight (all away after a retreat) reaches a data plane that does not read the status too.
        with contextlib.suppress(RouterUnreachable):
            await self._plane(work.spec).apply(work.spec, work.weight)
        return self._waiting(work, "ReplacingUnhealthyHome", replacing)

    def _retreat(self, work: Pass, why: str) -> Requeue:
        """A migration home found home pods on unhealthy nodes: all traffic back away (the away side
        still runs every replica until the migration finalizes), and prepare again from there."""
        spec = work.spec
        state = plan.begin_from(
            work.direction,
            work.current.steps or spec.strategy.steps_toward(work.direction),
            plan.MAX_WEIGHT,
            failures_before_rollback=spec.strategy.failures_before_rollback,
        )
        moved = f"back from {work.weight} to" if work.weight != plan.MAX_WEIGHT else "stays at"
        message = (
            f"{why}: away weight {moved} {plan.MAX_WEIGHT} until the home side runs on healthy nodes only"
        )
        work.set(
            phase=Phase.PREPARING,
            away_weight=state.weight,
            step_index=state.step_index,
            last_good_weight=state.last_good_weight,
            consecutive_failures=0,
            progress_at=work.now,
            step_started_at=None,
            message=message,
        )
        self._intervals.pop(spec.key, None)
        work.condition("Progressing", "True", "UnhealthyHome", message)
        self._event(work.offload, "Warning", "UnhealthyHome", message)
        return 0.0

    # -- after a migration: the serving side lost, an emergency, the way back -------------------

    def _in_emergency(self, work: Pass) -> bool:
        """An emergency migration moved traffic off `spec.placement`; it stays off until that side is back."""
        degraded = condition_of(work.current, "Degraded")
        return degraded is not None and (degraded.get("status"), degraded.get("reason")) == (
            "True",
            EMERGENCY_REASON,
        )

    async def _desired_replicas(self, work: Pass, side: str) -> int:
        """The side's Deployment's replicas; the away one is also freed of an Offload owner on the way."""
        if side == "home":
            return replicas_of(work.home)
        away = await self._deployments.away(work.spec)
        if away is not None:
            await self._deployments.release_owner(work.spec, away)
        return replicas_of(away)

    async def _watch_serving(self, work: Pass) -> Requeue:
        """Look at the side serving all the traffic; lost for the grace period, start an emergency."""
        spec = work.spec
        emergency = spec.strategy.emergency
        side = serving_side(work.weight)
        if side is None or not emergency.enabled:
            if work.weight != plan.MIN_WEIGHT:
                await self._desired_replicas(work, "away")  # still drops an old ownerReference
            self._lost.forget(spec.key)
            return IDLE_RESYNC_SECONDS
        desired = await self._desired_replicas(work, side)
        if desired == 0:  # someone turned that side off on purpose: nothing is lost
            self._lost.forget(spec.key)
            return IDLE_RESYNC_SECONDS
        needed = needed_endpoints(desired, emergency.min_serving_percent)
        try:
            views = routed(await self._views(spec, work.weight))
        except RouterUnreachable:
            views = []
        if not views:
            # No view, no verdict: a router outage, or a route no router serves (e.g. it lost a
            # conflict over its host), is not the side's loss, and another side would not help.
            self._lost.forget(spec.key)
            return watch_seconds(spec)
        usable = best_usable(views, side)
        what = (
            f"the {side} side has {usable} usable endpoints on the best router, fewer than {needed} "
            f"(of {desired} replicas)"
        )
        migrated = work.current.migration_started_at is not None
        if usable >= needed or not has_served(condition_of(work.current, "Degraded"), migrated=migrated):
            self._lost.forget(spec.key)
            self._not_lost(work, side, serving=usable >= needed, why=what)
            return watch_seconds(spec)
        lost_for = self._lost.held_for(spec.key)
        if lost_for < emergency.grace_seconds:
            work.condition(
                "Degraded",
                "True",
                "ServingSideLost",
                f"{what}; an emergency migration {other_side(side)} starts "
                f"if it lasts {emergency.grace_seconds}s",
            )
            return min(watch_seconds(spec), emergency.grace_seconds - lost_for)
        self._lost.forget(spec.key)
        return self._start_emergency(work, side, f"{what} for {lost_for:.0f}s")

    def _not_lost(self, work: Pass, side: str, *, serving: bool, why: str) -> None:
        """Say why the serving side is not lost (Degraded=False): it serves (again), or it never has."""
        degraded = condition_of(work.current, "Degraded")
        if not serving:
            # Still coming up (a new Offload's first pods): nothing was lost, and an emergency would
            # only pay a provider for a service that has not started.
            work.condition("Degraded", "False", NOT_SERVING_YET_REASON, f"{why}; it has not served yet")
        elif degraded is not None and degraded.get("status") == "True":
            work.condition("Degraded", "False", "Recovered", f"the {side} side serves again")
        elif degraded is None or degraded.get("reason") == NOT_SERVING_YET_REASON:
            work.condition("Degraded", "False", "Serving", f"the {side} side serves")

    def _start_emergency(self, work: Pass, lost: str, why: str) -> Requeue:
        direction = Direction(other_side(lost))
        requeue = self._start(work, direction, EMERGENCY_STEPS)
        message = f"emergency migration {direction.value}: {why}"
        work.set(message=message)
        work.condition("Degraded", "True", EMERGENCY_REASON, message)
        self._event(work.offload, "Warning", EMERGENCY_REASON, message)
        self._metrics.emergency_migration(work.spec.namespace, work.spec.name, lost)
        return requeue

    async def _await_return(self, work: Pass) -> Requeue:
        """After an emergency: once the lost side is ready again for the grace period, go back, gated."""
        spec = work.spec
        lost = spec.placement.value
        desired = await self._desired_replicas(work, lost)
        if desired == 0:
            # Nothing can come back by itself: the migration's Preparing brings it up (or gives up
            # at the progress deadline, leaving traffic where it is).
            return self._return(work, f"the {lost} side has no replicas; bringing it up")
        needed = math.ceil(desired * spec.strategy.ready_threshold_percent / 100)
        try:
            views = routed(await self._views(spec, work.weight))
        except RouterUnreachable:
            views = []
        usable = worst_usable(views, lost) if views else 0
        if usable < needed:
            self._back.forget(spec.key)
            return watch_seconds(spec)
        back_for = self._back.held_for(spec.key)
        grace = spec.strategy.emergency.grace_seconds
        if back_for < grace:
            return min(watch_seconds(spec), grace - back_for)
        return self._return(
            work, f"every router has seen {needed} usable {lost} endpoints for {back_for:.0f}s"
        )

    def _return(self, work: Pass, why: str) -> Requeue:
        self._back.forget(work.spec.key)
        message = f"the emergency is over ({why}); moving back {work.spec.placement.value} by the strategy"
        work.condition("Degraded", "False", "Recovered", message)
        self._event(work.offload, "Normal", "EmergencyOver", message)
        return self._start(work)

    # -- deletion: home first, then let go ------------------------------------------------------

    async def _add_finalizer(self, spec: OffloadSpec) -> RawObject:
        """Put our finalizer on the Offload (the resourceVersion makes a concurrent change a conflict)."""
        return await self._api.patch(
            offload_path(spec.namespace, spec.name),
            {
                "metadata": {
                    "finalizers": [*spec.finalizers, FINALIZER],
                    "resourceVersion": spec.resource_version,
                }
            },
            content_type=MERGE_PATCH,
        )

    def _note_deleting(self, work: Pass) -> None:
        current = work.current
        if current.running:
            reason, message = "MigratingHome", f"deleted: moving traffic home first ({current.message})"
        elif work.weight != plan.MIN_WEIGHT and current.target_placement == "home":
            reason = "Blocked"
            message = (
                f"deleted, but the migration home ended {current.phase} at away weight {work.weight}; "
                "the away side keeps serving (fix the home side, or remove the finalizer "
                f"{FINALIZER} to let go of it anyway)"
            )
        else:
            return
        work.condition("Deleting", "True", reason, message)

    async def _release(self, work: Pass) -> Requeue:
        """Traffic is home: keep the route on the home Service, scale the away side to 0, wait for its
        pods, delete it, drop the finalizer."""
        spec = work.spec
        keeping = await self._routes.keep(spec, work.offload)
        if keeping is not None:  # a pass before letting go: the routers see the route before it is needed
            return self._releasing(work, keeping)
        away = await self._deployments.away(spec)
        if away is not None and replicas_of(away) != 0:
            await self._deployments.scale(spec.namespace, deriving.away_name(spec), 0)
            return self._releasing(work, "traffic is home; scaling the away Deployment to 0")
        remaining = await self._deployments.away_pod_count(spec)
        if remaining:
            return self._releasing(work, f"waiting for {remaining} away pods to be deleted at the provider")
        if away is not None and not await self._deployments.delete_away(spec):
            return self._releasing(work, f"deleting Deployment {deriving.away_name(spec)}")
        kept = [finalizer for finalizer in spec.finalizers if finalizer != FINALIZER]
        if len(kept) != len(spec.finalizers):
            await self._api.patch(
                offload_path(spec.namespace, spec.name),
                {"metadata": {"finalizers": kept or None, "resourceVersion": spec.resource_version}},
                content_type=MERGE_PATCH,
            )
            self._event(work.offload, "Normal", "Released", "traffic is home and nothing is left away")
        work.gone = True
        for memory in (self._lost, self._back):
            memory.forget(spec.key)
        self._intervals.pop(spec.key, None)
        return None

    async def _conflicted(
        self, spec: OffloadSpec, offload: RawObject, status: Mapping[str, Any], now: datetime, message: str
    ) -> Requeue:
        if spec.deleting:  # it serves nothing (the routers leave it out), so nothing moves before it goes
            return await self._release_now(spec, offload, status, now)
        await self._report_problem(offload, status, now, "RouteConflict", message)
        return IDLE_RESYNC_SECONDS

    async def _release_now(
        self, spec: OffloadSpec, offload: RawObject, status: Mapping[str, Any], now: datetime
    ) -> Requeue:
        """Let go of a deleted Offload that serves nothing (no home to move to, or no route)."""
        work = Pass(spec, offload, status, {}, {}, now)
        requeue = await self._release(work)
        await self._write(work)
        return requeue

    def _releasing(self, work: Pass, message: str) -> Requeue:
        work.condition("Deleting", "True", "ReleasingAway", message)
        work.set(message=f"deleted: {message}")
        return POLL_SECONDS


def first_status(generation: int, promotion: str | None) -> dict[str, Any]:
    """The status fields of an Offload the controller sees for the first time: serving at home."""
    return {
        "phase": Phase.IDLE,
        "target_placement": "home",
        "away_weight": 0,
        "last_good_weight": 0,
        "step_index": 0,
        "consecutive_failures": 0,
        "observed_generation": generation,
        "handled_promotion": promotion,
        "message": "serving at home",
    }


def severe_poll_seconds(spec: OffloadSpec) -> float:
    """How soon to look again within a step's interval: every second while the severe gate is on."""
    return POLL_SECONDS if spec.strategy.gates.severe.enabled else math.inf


def watch_seconds(spec: OffloadSpec) -> float:
    grace = spec.strategy.emergency.grace_seconds
    return min(MAX_WATCH_SECONDS, max(MIN_WATCH_SECONDS, grace / 6))


def leaving(spec: OffloadSpec) -> OffloadSpec:
    """The spec a deleted Offload is reconciled by: home, never paused (a pause would hold it forever),
    no longer spilling over (everything comes home before the away side goes)."""
    return dataclasses.replace(
        spec, placement=Direction.TO_HOME, paused=False, spill_over=None, replicas=None
    )


def condition_of(status: OffloadStatus, kind: str) -> Mapping[str, Any] | None:
    return next((item for item in status.conditions if item.get("type") == kind), None)
