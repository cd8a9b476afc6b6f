"""The serving side watched after a migration; lost, an emergency migration; back, the way back.

After a migration, the controller keeps watching the side that serves all the traffic (see
`serving`): lost for longer than `strategy.emergency.graceSeconds`, it starts an **emergency
migration** to the other side (condition `Degraded`, reason `EmergencyMigration`, a Warning Event, a
metric): the other side is brought up and gets all the traffic as soon as it is ready, without
steps or gates (the lost side serves nothing worth protecting). The lost side is left as it is, so
it can come back; once every router sees it ready again for the grace period, a normal, gated
migration returns traffic to `spec.placement`.
"""

from __future__ import annotations

import math

from vk_provider.controller.deployments import replicas_of
from vk_provider.controller.passes import IDLE_RESYNC_SECONDS, Pass, condition_of
from vk_provider.controller.reconcilerbase import ReconcilerBase
from vk_provider.controller.routers import RouterUnreachable
from vk_provider.controller.serving import (
    NOT_SERVING_YET_REASON,
    best_usable,
    has_served,
    needed_endpoints,
    other_side,
    routed,
    serving_side,
    worst_usable,
)
from vk_provider.offload import plan
from vk_provider.offload.plan import Direction
from vk_provider.offload.spec import OffloadSpec
from vk_provider.runtime.queueing import Requeue

MIN_WATCH_SECONDS = 1.0
MAX_WATCH_SECONDS = 10.0
"""How often the serving side is looked at after a migration (a lost side wakes nothing): a sixth of
the emergency grace period, within these bounds. Each look costs three or four API reads per Offload
(the pass's own) and one /-/status per router, so it is not done more often than the grace needs."""
EMERGENCY_REASON = "EmergencyMigration"
EMERGENCY_STEPS = (plan.MAX_WEIGHT,)
"""An emergency migration moves all the traffic at once: the side it leaves serves nothing."""


class EmergencyWatch(ReconcilerBase):
    """The side serving all the traffic, watched after a migration: lost, an emergency; back, the way back."""

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


def watch_seconds(spec: OffloadSpec) -> float:
    grace = spec.strategy.emergency.grace_seconds
    return min(MAX_WATCH_SECONDS, max(MIN_WATCH_SECONDS, grace / 6))
