"""Home pods stranded on unhealthy nodes: replaced, make before break, while home serves traffic; a
move home that finds any sends all traffic back away until the home side runs on healthy nodes only.

Which pods are stranded and the next move of a replacement are `vk_provider.offload.homehealth`'s
(pure); this part carries them out against the home Deployment and says so on the Offload.
"""

from __future__ import annotations

import contextlib

from vk_provider.controller.deployments import replicas_of
from vk_provider.controller.passes import Pass
from vk_provider.controller.reconcilerbase import ReconcilerBase
from vk_provider.controller.routers import RouterUnreachable
from vk_provider.offload import homehealth, plan
from vk_provider.offload.status import Phase
from vk_provider.runtime.queueing import Requeue


class UnhealthyHome(ReconcilerBase):
    """The home side's pods on unhealthy nodes, replaced; a move home held or sent back until they are."""

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
