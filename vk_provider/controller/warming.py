"""Away replicas kept warm while an Offload serves at home, so that a flip away need not wait for a
cold start (minutes at a provider: the machine found, the image pulled, the model loaded).

Two reasons to keep them:

- the **pilot light**, `spec.away.warmReplicas`: always, while home serves all the traffic;
- a **warm-up**, the `offload.vk-provider.dev/warm-until` annotation (written by the OffloadPolicy when
  training demand is foreseeable, or by a person): until that time, the replicas a move away would
  run. Once it passes without a flip, the away side goes back to the pilot light (an Event says so).

Either way the away weight stays 0: the routers send the warm replicas nothing, they only stand ready.
The away Deployment is the one a migration derives (`Deployments.keep_away`, the same template hash),
so a flip finds its replicas ready and its Preparing passes at once.

The decisions are pure (`serves_at_home`, `warm_target`); `Warmer` carries them out and says what it
did in `status.warm`, the `AwayWarm` condition and Events, each Event once per transition: the status
as read is the memory of the last pass.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from vk_provider._kube.events import EventType
from vk_provider.controller.deployments import Announce, Deployments, ready_replicas_of, replicas_of
from vk_provider.kit.kube import RawObject
from vk_provider.kit.timestamps import format_timestamp, parse_timestamp
from vk_provider.offload.names import WARM_UNTIL_ANNOTATION
from vk_provider.offload.plan import Direction
from vk_provider.offload.spec import MAX_AWAY_REPLICAS, OffloadSpec
from vk_provider.offload.status import OffloadStatus
from vk_provider.runtime.queueing import Requeue

WARM_CONDITION = "AwayWarm"
WARMING_POLL_SECONDS = 5.0
"""How soon to look again while warm replicas are not all ready (a Deployment's change wakes nothing):
often enough for the status to follow a cold start, which takes tens of seconds at the least."""
EXPIRY_MARGIN_SECONDS = 0.5
"""Looked at again this long after a warm-up's end, so the pass that acts on it finds it passed."""


COLD = {"replicas": 0, "ready": 0, "reason": "Cold"}
"""`status.warm` once nothing is wanted warm and the away side was found (or made) cold."""


class WarmReason(enum.StrEnum):
    """`status.warm.reason`: why the away side runs the replicas it does while home serves."""

    WARM_UP = "WarmUp"
    PILOT_LIGHT = "PilotLight"
    COLD = "Cold"


@dataclasses.dataclass(frozen=True)
class WarmTarget:
    """The away replicas wanted warm now, and why."""

    replicas: int
    reason: WarmReason
    until: datetime | None = None
    """The warm-until annotation's time as read (ahead of now only while reason is WARM_UP)."""
    ignored: str = ""
    """Why the warm-until annotation was ignored ('' when it was read, or is absent)."""


class WarmingPass(Protocol):
    """What the warmer needs of a reconcile pass (`passes.Pass`)."""

    spec: OffloadSpec
    offload: RawObject
    home: RawObject
    service: RawObject
    now: datetime

    @property
    def current(self) -> OffloadStatus: ...

    def set(self, **fields: Any) -> None: ...

    def condition(self, kind: str, status: str, reason: str, message: str) -> None: ...


PostEvent = Callable[[RawObject, EventType, str, str], None]
"""(the Offload, type, reason, message): an Event about the Offload."""


def move_away_replicas(spec: OffloadSpec, home_replicas: int) -> int:
    """The away replicas a move away runs: `spec.away.replicas`, else the home side's count (at least
    1); a spill-over Offload moves every replica it runs."""
    if spec.spill_over is not None:
        return max(1, min(spec.total_replicas, MAX_AWAY_REPLICAS))
    if spec.away.replicas is not None:
        return spec.away.replicas
    return home_replicas or 1


def serves_at_home(spec: OffloadSpec, status: OffloadStatus, *, in_emergency: bool) -> bool:
    """Whether the Offload serves at home as it is meant to (all traffic home, going nowhere): the only
    state in which away replicas are kept warm. A spill-over Offload's away replicas serve instead,
    and a deleted one lets go of its away side."""
    return (
        spec.placement is Direction.TO_HOME
        and status.target_placement == Direction.TO_HOME.value
        and not status.away_weight
        and not spec.deleting
        and spec.spill_over is None
        and not in_emergency
    )


def warm_target(spec: OffloadSpec, now: datetime, home_replicas: int) -> WarmTarget:
    """The away replicas to keep warm while the Offload serves at home: a move away's count while a
    warm-up runs (never fewer than the pilot light), else the pilot light."""
    pilot = spec.away.warm_replicas
    until = parse_timestamp(spec.warm_until) if spec.warm_until else None
    ignored = ""
    if spec.warm_until and until is None:
        ignored = (
            f"annotation {WARM_UNTIL_ANNOTATION} {spec.warm_until!r} is not an RFC 3339 time; it is ignored"
        )
    if until is not None and now < until:
        wanted = max(pilot, move_away_replicas(spec, home_replicas))
        if wanted:
            return WarmTarget(wanted, WarmReason.WARM_UP, until)
    return WarmTarget(pilot, WarmReason.PILOT_LIGHT if pilot else WarmReason.COLD, until, ignored)


def warm_status(target: WarmTarget, ready: int) -> dict[str, Any]:
    """`status.warm` in the API's spelling (`until` None removes it from the stored status)."""
    running_until = target.until if target.reason is WarmReason.WARM_UP else None
    return {
        "replicas": target.replicas,
        "ready": ready,
        "until": None if running_until is None else format_timestamp(running_until),
        "reason": target.reason.value,
    }


class Warmer:
    """Keeps the away side of Offloads that serve at home at their warm count, and reports it."""

    def __init__(self, deployments: Deployments, event: PostEvent) -> None:
        self._deployments = deployments
        self._event = event

    def kept_after_move_home(self, work: WarmingPass, *, in_emergency: bool) -> int:
        """How many away replicas a migration that ends with all traffic home leaves running."""
        if not serves_at_home(work.spec, work.current, in_emergency=in_emergency):
            return 0
        return warm_target(work.spec, work.now, _home_replicas(work)).replicas

    async def keep(self, work: WarmingPass, *, in_emergency: bool, announce: Announce) -> Requeue:
        """No migration runs: hold the away side at its warm count while home serves; say so.
        `announce` posts what `Deployments.keep_away` did (a created Deployment)."""
        spec = work.spec
        if spec.spill_over is not None:
            return None  # its away replicas serve: spilling over scales them
        if not serves_at_home(spec, work.current, in_emergency=in_emergency):
            self.leave(work, "traffic is not all home")
            return None
        target = warm_target(spec, work.now, _home_replicas(work))
        ready = 0
        if target.replicas or work.current.warm != COLD:
            away = await self._deployments.away(spec)
            # Counted as read: a Deployment just scaled reports no ready replicas until its controller
            # catches up, and a pilot light left running by a warm-up's end never stopped being ready.
            ready = min(ready_replicas_of(away), target.replicas)
            if target.replicas or replicas_of(away):
                # Created, scaled, or rolled to a changed home template, as a migration derives it.
                await self._deployments.keep_away(
                    spec, work.home, work.service, target.replicas, current=away, announce=announce
                )
        # (Else a pass before found nothing warm and nothing wanted: not reading the away Deployment
        # again keeps an Offload without warmth at the API reads it cost before warmth existed.)
        self._report(work, target, ready)
        return next_look(work.now, target, ready)

    def leave(self, work: WarmingPass, why: str) -> None:
        """A migration starts, or traffic is not all home: nothing is kept warm for its own sake (the
        migration scales the away side itself); `status.warm` goes, the condition says why."""
        if work.current.warm is not None:
            work.set(warm=None)
        if any(item.get("type") == WARM_CONDITION for item in work.current.conditions):
            message = f"{why}: away replicas are kept warm only while home serves all the traffic"
            work.condition("AwayWarm", "False", "NotAtHome", message)

    def _report(self, work: WarmingPass, target: WarmTarget, ready: int) -> None:
        previous = work.current.warm or {}
        condition = next((c for c in work.current.conditions if c.get("type") == WARM_CONDITION), {})
        status = warm_status(target, ready)
        if {key: value for key, value in status.items() if value is not None} != dict(previous):
            work.set(warm=status)
        self._announce_transition(work, target, previous)
        if target.ignored and condition.get("reason") != "InvalidWarmUntil":
            self._event(work.offload, "Warning", "InvalidWarmUntil", target.ignored)
        what = self._describe(work.spec, target, ready)
        if target.ignored:
            work.condition("AwayWarm", "False", "InvalidWarmUntil", f"{target.ignored}; {what}")
        elif not target.replicas:
            work.condition("AwayWarm", "False", "Cold", what)
        elif ready < target.replicas:
            work.condition("AwayWarm", "False", "Warming", what)
        else:
            warm_up = target.reason is WarmReason.WARM_UP
            work.condition("AwayWarm", "True", "WarmUp" if warm_up else "PilotLight", what)
            if condition.get("status") != "True":
                self._event(work.offload, "Normal", "AwayWarm", f"{what}: a flip away only shifts traffic")

    def _announce_transition(
        self, work: WarmingPass, target: WarmTarget, previous: Mapping[str, Any]
    ) -> None:
        """WarmUpStarted when a warm-up begins, WarmUpExpired when one ends without a flip."""
        was_warming_up = previous.get("reason") == WarmReason.WARM_UP.value
        if target.reason is WarmReason.WARM_UP and not was_warming_up:
            by = f" for {work.spec.warmed_by}" if work.spec.warmed_by else ""
            until = format_timestamp(target.until) if target.until else "?"
            message = f"warming {target.replicas} away replicas until {until}{by}; home keeps all the traffic"
            self._event(work.offload, "Normal", "WarmUpStarted", message)
        elif was_warming_up and target.reason is not WarmReason.WARM_UP:
            ended = f"the warm-up until {previous.get('until', '?')}"
            how = (
                "passed without a flip"
                if target.until is not None and work.now >= target.until
                else "was withdrawn"
            )
            back = f"{target.replicas} (spec.away.warmReplicas)" if target.replicas else "0"
            self._event(work.offload, "Normal", "WarmUpExpired", f"{ended} {how}: away scaled back to {back}")

    @staticmethod
    def _describe(spec: OffloadSpec, target: WarmTarget, ready: int) -> str:
        if not target.replicas:
            return "no away replica is kept warm (spec.away.warmReplicas is 0 and no warm-up runs)"
        if target.reason is WarmReason.WARM_UP:
            by = f" for {spec.warmed_by}" if spec.warmed_by else ""
            until = format_timestamp(target.until) if target.until else "?"
            why = f"warm-up until {until}{by}"
        else:
            why = "pilot light, spec.away.warmReplicas"
        return f"{ready} of {target.replicas} away replicas ready ({why})"


def next_look(now: datetime, target: WarmTarget, ready: int) -> Requeue:
    """When the warmer wants to look again: just after a running warm-up ends, and every few seconds
    while warm replicas are not all ready (None: nothing to wait for)."""
    seconds = math.inf
    if target.reason is WarmReason.WARM_UP and target.until is not None:
        seconds = max(0.0, (target.until - now).total_seconds()) + EXPIRY_MARGIN_SECONDS
    if ready < target.replicas:
        seconds = min(seconds, WARMING_POLL_SECONDS)
    return None if math.isinf(seconds) else seconds


def _home_replicas(work: WarmingPass) -> int:
    """The home side's replicas, or those it had before a move away scaled it to 0."""
    return replicas_of(work.home) or work.current.home_replicas or 0


def earliest(*requeues: Requeue) -> Requeue:
    """The soonest of several passes' wishes to look again (None: no wish)."""
    wanted = [seconds for seconds in requeues if seconds is not None]
    return min(wanted) if wanted else None
