"""The deletion path: a deleted Offload goes home first, then the controller lets go of it.

The controller puts a finalizer on every Offload. A deleted Offload is migrated home by its
strategy (at once when it already serves at home); only then is its route written onto the home
Service (`vk_provider.controller.routekeeping`: the routers keep sending its hosts home after it is
gone), the away Deployment scaled to 0, its pods left, the Deployment deleted and the finalizer
removed, which lets the Offload go. The condition `Deleting` says where that stands.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from vk_provider.controller import deriving
from vk_provider.controller.deployments import replicas_of
from vk_provider.controller.passes import IDLE_RESYNC_SECONDS, POLL_SECONDS, Pass
from vk_provider.controller.reconcilerbase import ReconcilerBase
from vk_provider.kit.kube import MERGE_PATCH, RawObject
from vk_provider.offload import plan
from vk_provider.offload.names import FINALIZER, offload_path
from vk_provider.offload.plan import Direction
from vk_provider.offload.spec import OffloadSpec
from vk_provider.offload.status import Phase
from vk_provider.runtime.queueing import Requeue


class Deletion(ReconcilerBase):
    """A deleted Offload: home first, then the route kept, the away side gone and the finalizer removed."""

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

    async def _let_go(self, work: Pass, phase: Phase) -> Requeue:
        """A deleted Offload with no migration running: released once all traffic is home."""
        if work.weight == plan.MIN_WEIGHT:
            return await self._release(work)
        if work.current.spill_over is not None and phase in (Phase.IDLE, Phase.SUCCEEDED):
            # Deleted while spilling over: traffic comes home by the strategy, then it lets go.
            work.set(spill_over=None, replicas=None, selector=None)
            return self._start(work)
        return IDLE_RESYNC_SECONDS  # blocked: `_note_deleting` says why and what to do

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


def leaving(spec: OffloadSpec) -> OffloadSpec:
    """The spec a deleted Offload is reconciled by: home, never paused (a pause would hold it forever),
    no longer spilling over (everything comes home before the away side goes)."""
    return dataclasses.replace(
        spec, placement=Direction.TO_HOME, paused=False, spill_over=None, replicas=None
    )
