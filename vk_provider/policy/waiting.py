"""Why each training gang still waits for GPUs, and for how long: a pure function of what is observed.

A gang waits while members of it are unplaced. What it waits for is read from the Offloads this policy
moved away for demand, by the stage of their migrations (the Offload's phase and its Progressing
condition): `WarmingAway` (Preparing: the away replicas are starting), `ShiftingTraffic` (Shifting or
Paused), `PodsLeaving` (Finalizing, or done while home pods still hold GPUs). Without a move under way:
`Scheduling` when the free home GPUs already cover it (the scheduler has not bound it yet),
`PodsLeaving` when GPUs being freed by other moves cover it,
`Confirming` while its shortfall has lasted less than `flipOutAfterSeconds` (the policy waits out
noise; a warm-up may run meanwhile), else `NoCandidate` (no Offload the policy may move would cover
it). The policy's status, its metrics and the Kueue check's message all say the same thing.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Mapping
from datetime import datetime

from vk_provider.policy.decide import free_gpus, is_due, releasing_gpus, shortfall
from vk_provider.policy.model import Gang, History, Observed, OffloadView
from vk_provider.policy.names import flipped_by_policy
from vk_provider.policy.spec import PolicySpec


class Stage(enum.StrEnum):
    WARMING_AWAY = "WarmingAway"
    SHIFTING_TRAFFIC = "ShiftingTraffic"
    PODS_LEAVING = "PodsLeaving"
    SCHEDULING = "Scheduling"
    CONFIRMING = "Confirming"
    NO_CANDIDATE = "NoCandidate"


STAGES = tuple(Stage)
_DOING = {
    Stage.WARMING_AWAY: "warming the away side of {}",
    Stage.SHIFTING_TRAFFIC: "shifting traffic off {}",
    Stage.PODS_LEAVING: "the home pods of {} are leaving",
}


@dataclasses.dataclass(frozen=True)
class Wait:
    stage: Stage
    seconds: float
    offloads: tuple[str, ...] = ()
    """The Offloads whose migrations it waits on (`namespace/name`)."""
    detail: str = ""
    """What the migration controller says of the first of them (its Progressing message)."""

    def message(self) -> str:
        """One line for people: the Kueue check's message while the Workload waits."""
        if self.stage in _DOING:
            detail = f" ({self.detail})" if self.detail else ""
            return f"waiting for GPUs: {_DOING[self.stage].format(', '.join(self.offloads))}{detail}"
        if self.stage is Stage.SCHEDULING:
            return "waiting for GPUs: they are free, the scheduler has not placed the pods yet"
        if self.stage is Stage.CONFIRMING:
            return "waiting for GPUs: the shortfall has not lasted flipOutAfterSeconds yet"
        return "waiting for GPUs: no Offload the policy may move would free enough"


def _stage_of(offload: OffloadView) -> Stage | None:
    if offload.phase == "Preparing":
        return Stage.WARMING_AWAY
    if offload.phase in ("Shifting", "Paused"):
        return Stage.SHIFTING_TRAFFIC
    if offload.phase == "Finalizing" or (
        offload.phase not in ("RolledBack", "Failed") and offload.home_gpus_held > 0
    ):
        return Stage.PODS_LEAVING
    return None


def waits(
    now: datetime,
    policy: PolicySpec,
    observed: Observed,
    history: History,
    *,
    flipped_out: Collection[str] = (),
) -> dict[str, Wait]:
    """Per gang key, the wait of each gang with unplaced members; `history` is this pass's, and
    `flipped_out` the Offloads this pass moved away: observed at home still, their migrations start now
    (their away side is prepared first), so a gang waiting on them is never told no Offload would move."""
    free = free_gpus(observed, policy)
    releasing = releasing_gpus(observed)
    short = {gang.key: shortfall(gang, free + releasing) for gang in observed.gangs}
    mine = flipped_by_policy(policy.name)
    moving = [o for o in observed.offloads if o.flipped_by == mine and o.placement == "away"]
    staged = [(stage, o) for o in moving if (stage := _stage_of(o)) is not None]
    staged += [(Stage.WARMING_AWAY, o) for o in observed.offloads if o.key in flipped_out and o not in moving]
    result: dict[str, Wait] = {}
    for gang in observed.gangs:
        if gang.unplaced_gpus <= 0:
            continue
        seconds = _waited(now, gang, history)
        if staged:
            # The earliest stage is what the gang waits on: later ones follow by themselves.
            stage = min((stage for stage, _ in staged), key=STAGES.index)
            these = [o for s, o in staged if s is stage]
            result[gang.key] = Wait(stage, seconds, tuple(o.key for o in these), these[0].progress_message)
        elif gang.unplaced_gpus <= free:
            result[gang.key] = Wait(Stage.SCHEDULING, seconds)
        elif short[gang.key] <= 0:  # covered by GPUs other moves are freeing
            result[gang.key] = Wait(Stage.PODS_LEAVING, seconds)
        elif not is_due(gang, policy, history, short, now):
            result[gang.key] = Wait(Stage.CONFIRMING, seconds)
        else:
            result[gang.key] = Wait(Stage.NO_CANDIDATE, seconds)
    return result


def _waited(now: datetime, gang: Gang, history: History) -> float:
    since = history.demand_since.get(gang.key, now)
    return max(0.0, (now - since).total_seconds())


def by_stage(found: Mapping[str, Wait]) -> dict[str, int]:
    """How many gangs wait at each stage (every stage listed, 0 when none)."""
    counts = dict.fromkeys(STAGES, 0)
    for wait in found.values():
        counts[wait.stage] += 1
    return {str(stage): count for stage, count in counts.items()}
