"""Spilling over: home as far as the home GPUs hold it, the overflow away.

The decisions are `vk_provider.offload.spillover`'s (pure), what they are read from and reported with
`vk_provider.controller.spilling`'s; this part places the total replicas (home first), splits the
traffic by ready capacity and reports both sides on the Offload's status, for the autoscaler.
"""

from __future__ import annotations

from vk_provider.controller import spilling
from vk_provider.controller.deployments import ready_replicas_of, replicas_of
from vk_provider.controller.emergency import watch_seconds
from vk_provider.controller.passes import POLL_SECONDS, Pass
from vk_provider.controller.reconcilerbase import ReconcilerBase
from vk_provider.controller.routers import RouterUnreachable
from vk_provider.controller.serving import routed, worst_usable
from vk_provider.controller.spilling import SPILLING_CONDITION
from vk_provider.kit.kube import RawObject
from vk_provider.offload import homehealth, spillover
from vk_provider.offload.names import SERVES_LABEL
from vk_provider.offload.spec import MAX_AWAY_REPLICAS
from vk_provider.runtime.queueing import Requeue


class SpillingOver(ReconcilerBase):
    """A spill-over Offload's replicas placed, its traffic split by ready capacity, both reported."""

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
