"""The policy's decision: a pure function of the policy, what is observed, what it remembers and the clock.

`decide(now, policy, observed, history)` returns the actions to take and the history to remember. It
reads nothing and writes nothing; `vk_provider.policy.actuate` carries the actions out. Its rules:

Flip out. A gang's shortfall is the GPUs its unplaced members request minus the free GPUs of the
usable home pool (healthy long enough, not blocked by others) minus the GPUs that Offloads already on
their way out still hold (they are about to be freed: counting them is what keeps a new leader, or
the next pass, from flipping a second Offload for the same gang). Once a gang's shortfall has lasted
`flipOutAfterSeconds` (at once for a gang whose demand is explicit: a Kueue Workload waiting on our
AdmissionCheck), the policy flips the fewest candidate Offloads whose home GPUs cover the
largest such shortfall (among as few, the set moving the fewest GPUs beyond it, then the first in
flip order, then namespace/name), taken among the candidates kept warm (warm-until ahead) when those
alone cover it. A candidate is placed home
(and not migrating), selected, automatic, not held by a person, not within `minHomeSeconds` of its
last move and under `maxFlipsPerHour`. When no set of candidates covers it nothing moves: moving
inference away would not let the gang start. The reservation taint goes on the pool's nodes in the
same pass, before any home side can scale down.

Flip back. When no gang has been seen for `flipBackAfterSeconds` and the minimum time away has
passed, the reservation taint comes off, then the Offloads this policy moved away come home one at a
time (the next only once the previous is home), each only when the usable pool has free GPUs for all
its home replicas. Demand that returns while one is coming home sends it away again (the migration
controller treats the reversed placement as an abort).

Warm up. Demand that is foreseeable but not yet due warms the away side of the Offloads a flip would
move, so the flip then only shifts traffic: gangs whose shortfall is still within
`flipOutAfterSeconds`, what gangs have declared but not yet created (`Gang.foreseen_gpus`: a Job's
pods to come, a PodGroup short of minCount, a Kueue Workload queued before its quota) and the open
windows of `spec.warmUp.schedule`. While there is such a sign, the GPUs all gangs' unplaced members,
the declared ones and the open windows want, less the free home GPUs and those Offloads on their way
out are freeing, are the foreseen shortfall; the Offloads are chosen as a flip chooses them (the
same candidates, `choose_fewest`, those already warm first), and get warm-until = now +
`holdSeconds`, rewritten only once less than half of it is left (not on every pass). A pass that
flips warms nothing: the next one sees the pool as the flip leaves it.

Health. A node judged unhealthy gets the unhealthy taint (value: the reason); once it has been
healthy for `healthyForSeconds` the taint comes off. Every taint the policy removes is one its node
annotation says it put there: never one someone else set. The taint only keeps new pods off: home
pods of an Offload already on such a node are replaced on healthy nodes by the migration controller
(make before break, `vk_provider.offload.homehealth`), as long as the usable pool has the GPUs for
them. When it has not (the healthy GPUs that pods of it hold, plus the free ones, fall short of what
its home side needs), the policy moves the Offload away (reason UnhealthyHome), during a move home
too, if it is selected, automatic, not held and under `maxFlipsPerHour`; it comes home, as any
Offload the policy moved, once there is no demand and healthy GPUs for all its home replicas.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from datetime import datetime, timedelta

from vk_provider.policy.model import Gang, History, Observed, OffloadView, PoolNode
from vk_provider.policy.schedule import scheduled_gpus, window_open
from vk_provider.policy.spec import PolicySpec

MAX_COMBINATIONS = 20_000
"""Subsets tried when choosing the fewest Offloads; beyond this the greedy choice (largest first) is used."""


class Action(enum.StrEnum):
    FLIP_OUT = "FlipOut"
    FLIP_BACK = "FlipBack"
    SKIP = "Skip"
    DEFER = "Defer"
    RESERVE = "Reserve"
    RELEASE = "Release"
    TAINT_UNHEALTHY = "TaintUnhealthy"
    UNTAINT_UNHEALTHY = "UntaintUnhealthy"
    DEMAND_DETECTED = "DemandDetected"
    WARM = "Warm"


class Reason(enum.StrEnum):
    GPU_PRESSURE = "GPUPressure"
    DEMAND_RETURNED = "DemandReturned"
    DEMAND_GONE = "DemandGone"
    MANUAL_HOLD = "ManualHold"
    AUTO_OFF = "AutoOff"
    DWELL = "Dwell"
    RATE_LIMITED = "RateLimited"
    NO_CANDIDATE = "NoCandidate"
    DEMAND_PRESENT = "DemandPresent"
    UNHEALTHY_CAPACITY = "UnhealthyCapacity"
    UNHEALTHY_HOME = "UnhealthyHome"
    MIGRATING = "Migrating"
    FORESEEN_DEMAND = "ForeseenDemand"
    SCHEDULED = "Scheduled"


@dataclasses.dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    offloads: tuple[str, ...] = ()
    """`namespace/name` of the Offloads acted on (or skipped)."""
    nodes: tuple[str, ...] = ()
    message: str = ""
    gpus: int = 0
    """For flips: the GPUs the chosen Offloads free or need; for demand: the shortfall."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    decisions: tuple[Decision, ...]
    history: History


def usable(node: PoolNode, policy: PolicySpec) -> bool:
    """Whether the node's free GPUs can take work: healthy for long enough, untainted unhealthy, not
    blocked by others. The reservation taint does not count: training tolerates it."""
    return node.health.counts and not node.blocked and policy.health.taint_key not in node.taints


def free_gpus(observed: Observed, policy: PolicySpec) -> int:
    return sum(node.free for node in observed.nodes if usable(node, policy))


def releasing_gpus(observed: Observed) -> int:
    """GPUs home pods of Offloads on their way away still hold: freed once their migration ends. A
    migration that rolled back or failed frees nothing: its home side keeps serving."""
    return sum(
        offload.home_gpus_held
        for offload in observed.offloads
        if offload.placement == "away" and offload.phase not in ("RolledBack", "Failed")
    )


def shortfall(gang: Gang, free: int) -> int:
    return max(0, gang.unplaced_gpus - free)


def decide(now: datetime, policy: PolicySpec, observed: Observed, history: History) -> Outcome:
    free = free_gpus(observed, policy)
    releasing = releasing_gpus(observed)
    short = {gang.key: shortfall(gang, free + releasing) for gang in observed.gangs}
    new_history = History(
        shortfall_since={
            key: history.shortfall_since.get(key, now) for key, value in short.items() if value > 0
        },
        demand_since={gang.key: history.demand_since.get(gang.key, now) for gang in observed.gangs},
        demand_gone_since=None if observed.gangs else (history.demand_gone_since or now),
    )
    if policy.paused:
        return Outcome((), new_history)
    decisions: list[Decision] = []
    decisions += _health(observed, policy)
    evacuated = _evacuate(now, policy, observed)
    decisions += evacuated
    for gang in observed.gangs:
        if gang.key not in history.demand_since:
            decisions.append(
                Decision(
                    Action.DEMAND_DETECTED,
                    "TrainingDemandDetected",
                    message=f"{gang.kind} {gang.namespace}/{gang.name} requests {gang.gpus} GPUs "
                    f"({gang.unplaced_gpus} unplaced; {free} free at home)",
                    gpus=gang.unplaced_gpus,
                )
            )
    if any(decision.action is Action.FLIP_OUT for decision in evacuated):
        # This pass's view of the pool is about to change; demand and flips back are judged on the next.
        return Outcome(tuple(decisions), new_history)
    if observed.gangs:
        decisions += _abort_flip_back(now, policy, observed, short)
        decisions += _flip_out(now, policy, observed, new_history, short)
    else:
        decisions += _flip_back(now, policy, observed, new_history)
    if not any(decision.action is Action.FLIP_OUT for decision in decisions):
        decisions += _warm(now, policy, observed, new_history, available=free + releasing, short=short)
    return Outcome(tuple(decisions), new_history)


def _health(observed: Observed, policy: PolicySpec) -> list[Decision]:
    key = policy.health.taint_key
    decisions = []
    for node in observed.nodes:
        reason = node.health.reason or "Unhealthy"
        # Ours with another reason (85 °C, then an Xid): the value is brought up to date.
        stale = key in node.policy_taints and node.taint_values.get(key) != reason
        if not node.health.healthy and (key not in node.taints or stale):
            decisions.append(
                Decision(
                    Action.TAINT_UNHEALTHY,
                    reason,
                    nodes=(node.name,),
                    message=node.health.detail,
                )
            )
        elif node.health.counts and key in node.taints and key in node.policy_taints:
            decisions.append(Decision(Action.UNTAINT_UNHEALTHY, "Healthy", nodes=(node.name,)))
    return decisions


def _evacuate(now: datetime, policy: PolicySpec, observed: Observed) -> list[Decision]:
    """Offloads with home pods on unhealthy nodes that healthy home GPUs cannot replace: move away."""
    # Free GPUs an inference pod may take: the reservation taint keeps replacements off a reserved node.
    free = sum(
        node.free
        for node in observed.nodes
        if usable(node, policy) and policy.reservation.key not in node.taints
    )
    decisions: list[Decision] = []
    stranded = (o for o in observed.offloads if o.placement == "home" and o.home_gpus_unhealthy > 0)
    for offload in sorted(stranded, key=_order):
        healthy_held = offload.home_gpus_held - offload.home_gpus_unhealthy
        lacking = offload.home_gpus - healthy_held - free
        if lacking <= 0:
            continue  # the migration controller replaces them at home, make before break
        message = (
            f"{offload.home_gpus_unhealthy} GPUs of its home pods are on unhealthy nodes, and the healthy "
            f"pool lacks {lacking} of the {offload.home_gpus} its home side needs"
        )
        # Unlike a flip for training, no dwell time applies: the GPUs it is on are failing now.
        reason = _skip_reason(offload, policy, now, dwell=False)
        if reason is not None:
            decisions.append(
                Decision(Action.SKIP, reason, offloads=(offload.key,), message=message, gpus=lacking)
            )
            continue
        decisions.append(
            Decision(
                Action.FLIP_OUT,
                Reason.UNHEALTHY_HOME,
                offloads=(offload.key,),
                message=f"{message}: moving away",
                gpus=offload.home_gpus,
            )
        )
    return decisions


def _is_mine(offload: OffloadView, policy: PolicySpec) -> bool:
    return offload.flipped_by == f"policy/{policy.name}"


def _rate_limited(offload: OffloadView, policy: PolicySpec, now: datetime) -> bool:
    return offload.flips_within_hour(now) >= policy.timing.max_flips_per_hour


def _last_policy_flip(offload: OffloadView) -> datetime | None:
    return max(offload.policy_flips, default=None)


def _reserve(observed: Observed, policy: PolicySpec) -> list[Decision]:
    key = policy.reservation.key
    # A node already carrying the key got it from someone else (or from us, recorded): never claimed.
    nodes = tuple(node.name for node in observed.nodes if key not in node.taints)
    if not nodes:
        return []
    return [
        Decision(Action.RESERVE, "TrainingDemand", nodes=nodes, message=f"{key}:{policy.reservation.effect}")
    ]


def _abort_flip_back(
    now: datetime, policy: PolicySpec, observed: Observed, short: dict[str, int]
) -> list[Decision]:
    """Offloads this policy is bringing home while demand is back: send them away again."""
    if not any(short.values()):
        return []
    returning = [
        offload
        for offload in observed.offloads
        if _is_mine(offload, policy)
        and offload.placement == "home"
        and offload.running
        and offload.auto
        and not offload.held(now)
        and not _rate_limited(offload, policy, now)
    ]
    if not returning:
        return []
    return [
        *_reserve(observed, policy),
        Decision(
            Action.FLIP_OUT,
            Reason.DEMAND_RETURNED,
            offloads=tuple(offload.key for offload in returning),
            message="training demand returned while coming home: moving away again",
            gpus=sum(offload.home_gpus for offload in returning),
        ),
    ]


def _skip_reason(
    offload: OffloadView, policy: PolicySpec, now: datetime, *, dwell: bool = True
) -> Reason | None:
    """Why a home Offload cannot be flipped out now (None: it can); `dwell`: `minHomeSeconds` applies."""
    if not offload.auto:
        return Reason.AUTO_OFF
    if offload.held(now):
        return Reason.MANUAL_HOLD
    if (
        dwell
        and offload.last_change is not None
        and now - offload.last_change < timedelta(seconds=policy.timing.min_home_seconds)
    ):
        return Reason.DWELL
    if _rate_limited(offload, policy, now):
        return Reason.RATE_LIMITED
    return None


def is_due(gang: Gang, policy: PolicySpec, history: History, short: dict[str, int], now: datetime) -> bool:
    """Whether the gang's shortfall calls for a flip now (it has lasted `flipOutAfterSeconds`, or its
    demand is explicit); `history` is this pass's."""
    if short.get(gang.key, 0) <= 0:
        return False
    after = timedelta(seconds=policy.timing.flip_out_after_seconds)
    return gang.immediate or now - history.shortfall_since[gang.key] >= after


def _flip_candidates(
    now: datetime, policy: PolicySpec, observed: Observed
) -> tuple[list[OffloadView], list[Decision]]:
    """The Offloads a flip out may move (home, idle, with home GPUs, not skipped), in flip order, and
    the skips of the others."""
    at_home = [o for o in observed.offloads if o.placement == "home" and not o.running and o.home_gpus > 0]
    candidates: list[OffloadView] = []
    skips: list[Decision] = []
    for offload in sorted(at_home, key=_order):
        reason = _skip_reason(offload, policy, now)
        if reason is None:
            candidates.append(offload)
        else:
            skips.append(Decision(Action.SKIP, reason, offloads=(offload.key,), gpus=offload.home_gpus))
    return candidates, skips


def _prefer_warm(candidates: list[OffloadView], need: int, now: datetime) -> list[OffloadView] | None:
    """`choose_fewest`, among the candidates whose away side is warm first when they cover `need`: a
    warmed Offload only shifts traffic, a cold one makes the gang wait for its cold start."""
    warm = [offload for offload in candidates if offload.warm_until is not None and offload.warm_until > now]
    return choose_fewest(warm, need) or choose_fewest(candidates, need)


def _flip_out(
    now: datetime, policy: PolicySpec, observed: Observed, history: History, short: dict[str, int]
) -> list[Decision]:
    due = [gang for gang in observed.gangs if is_due(gang, policy, history, short, now)]
    if not due:
        return []
    gang = max(due, key=lambda g: (short[g.key], g.key))
    need = short[gang.key]
    candidates, decisions = _flip_candidates(now, policy, observed)
    chosen = _prefer_warm(candidates, need, now)
    what = f"{gang.kind} {gang.namespace}/{gang.name}"
    if chosen is None:
        available = sum(offload.home_gpus for offload in candidates)
        decisions.append(
            Decision(
                Action.SKIP,
                Reason.NO_CANDIDATE,
                message=f"{what} is short {need} GPUs; the Offloads that may move hold {available}",
                gpus=need,
            )
        )
        return decisions
    freed = sum(offload.home_gpus for offload in chosen)
    return [
        *decisions,
        *_reserve(observed, policy),
        Decision(
            Action.FLIP_OUT,
            Reason.GPU_PRESSURE,
            offloads=tuple(offload.key for offload in chosen),
            message=f"{what} is short {need} GPUs; moving away frees {freed}",
            gpus=freed,
        ),
    ]


def foreseen(
    now: datetime, policy: PolicySpec, observed: Observed, history: History, short: dict[str, int]
) -> list[tuple[str, int]]:
    """The signs of demand not yet due, each with the GPUs it foresees: gangs short within
    `flipOutAfterSeconds`, the members gangs declared but have not created, the open schedule windows."""
    signs: list[tuple[str, int]] = []
    for gang in observed.gangs:
        if short[gang.key] > 0 and not is_due(gang, policy, history, short, now):
            signs.append((f"{_what(gang)} is short, not yet for flipOutAfterSeconds", gang.unplaced_gpus))
    for gang in (*observed.gangs, *observed.foreseen):
        if gang.foreseen_gpus > 0:
            signs.append((f"{_what(gang)} declares GPUs it has not requested yet", gang.foreseen_gpus))
    for run in policy.warm_up.schedule:
        if window_open(now, run):
            signs.append((f"the run scheduled at {run.cron!r} (UTC)", run.gpus))
    return signs


def _what(gang: Gang) -> str:
    return f"{gang.kind} {gang.namespace}/{gang.name}"


def _warm(
    now: datetime,
    policy: PolicySpec,
    observed: Observed,
    history: History,
    *,
    available: int,
    short: dict[str, int],
) -> list[Decision]:
    """Warm the away side of the Offloads a flip would choose for the foreseen shortfall."""
    if not policy.warm_up.enabled:
        return []
    signs = foreseen(now, policy, observed, history, short)
    if not signs:
        return []
    # Every gang's unplaced members take free GPUs first, due or not; the foreseen rest needs more.
    unplaced = sum(gang.unplaced_gpus for gang in observed.gangs)
    declared = sum(gang.foreseen_gpus for gang in (*observed.gangs, *observed.foreseen))
    wanted = unplaced + declared + scheduled_gpus(now, policy.warm_up.schedule)
    need = wanted - available
    if need <= 0:
        return []
    candidates, _ = _flip_candidates(now, policy, observed)
    chosen = _prefer_warm(candidates, need, now)  # as the flip will choose
    if chosen is None:
        return []  # no flip could cover it either: warming would spend for nothing
    hold = timedelta(seconds=policy.warm_up.hold_seconds)
    stale = [offload for offload in chosen if _needs_warming(offload, now, hold)]
    if not stale:
        return []
    scheduled_only = all(text.startswith("the run scheduled") for text, _ in signs)
    reasons = "; ".join(f"{text} ({gpus})" for text, gpus in signs)
    return [
        Decision(
            Action.WARM,
            Reason.SCHEDULED if scheduled_only else Reason.FORESEEN_DEMAND,
            offloads=tuple(offload.key for offload in stale),
            message=f"{wanted} GPUs foreseen, {need} more than the home pool has free: {reasons}",
            gpus=need,
        )
    ]


def _needs_warming(offload: OffloadView, now: datetime, hold: timedelta) -> bool:
    """Whether its warm-until must be (re)written: absent, or less than half the hold left. A later
    warm-until someone else wrote is left alone (it lasts longer already)."""
    return offload.warm_until is None or offload.warm_until - now < hold / 2


def _order(offload: OffloadView) -> tuple[int, str, str]:
    return (offload.order, offload.namespace, offload.name)


def choose_fewest(candidates: list[OffloadView], need: int) -> list[OffloadView] | None:
    """The fewest candidates whose home GPUs sum to `need` or more; among as few, the one moving the
    fewest GPUs beyond `need` (inference stays home where it can), then the first in flip order. None
    when all of them together do not cover `need`."""
    if sum(offload.home_gpus for offload in candidates) < need:
        return None
    ordered = sorted(candidates, key=_order)
    largest = sorted((offload.home_gpus for offload in ordered), reverse=True)
    # The k largest cover `need` exactly when some k-subset does: the least such k.
    count = next(k for k in range(1, len(largest) + 1) if sum(largest[:k]) >= need)
    subsets = itertools.islice(itertools.combinations(ordered, count), MAX_COMBINATIONS)
    covering = [subset for subset in subsets if sum(offload.home_gpus for offload in subset) >= need]
    if covering:
        # combinations() yields subsets in flip order, and min() keeps the first of equal ones.
        return list(min(covering, key=lambda subset: sum(offload.home_gpus for offload in subset)))
    by_size = sorted(ordered, key=lambda offload: -offload.home_gpus)
    return sorted(by_size[:count], key=_order)


def _flip_back(now: datetime, policy: PolicySpec, observed: Observed, history: History) -> list[Decision]:
    gone = history.demand_gone_since
    if gone is None or now - gone < timedelta(seconds=policy.timing.flip_back_after_seconds):
        return []
    away = sorted((o for o in observed.offloads if _is_mine(o, policy) and o.placement == "away"), key=_order)
    min_away = timedelta(seconds=policy.timing.min_away_seconds)
    decisions: list[Decision] = []
    ready = [o for o in away if (last := _last_policy_flip(o)) is None or now - last >= min_away]
    if away and not ready:
        return [
            Decision(
                Action.DEFER,
                Reason.DWELL,
                offloads=tuple(o.key for o in away),
                message=f"away for less than minAwaySeconds ({policy.timing.min_away_seconds} s)",
            )
        ]
    key = policy.reservation.key
    released = tuple(node.name for node in observed.nodes if key in node.taints and key in node.policy_taints)
    if released:
        decisions.append(Decision(Action.RELEASE, Reason.DEMAND_GONE, nodes=released))
    coming = [o for o in observed.offloads if _is_mine(o, policy) and o.placement == "home" and o.running]
    if coming:
        return [*decisions, Decision(Action.DEFER, Reason.MIGRATING, offloads=tuple(o.key for o in coming))]
    for offload in ready:
        if not offload.auto:
            decisions.append(Decision(Action.DEFER, Reason.AUTO_OFF, offloads=(offload.key,)))
            continue
        if offload.held(now):
            decisions.append(Decision(Action.DEFER, Reason.MANUAL_HOLD, offloads=(offload.key,)))
            continue
        if offload.running or _rate_limited(offload, policy, now):
            reason = Reason.MIGRATING if offload.running else Reason.RATE_LIMITED
            decisions.append(Decision(Action.DEFER, reason, offloads=(offload.key,)))
            continue
        free = free_gpus(observed, policy)
        if free < offload.home_gpus:
            decisions.append(
                Decision(
                    Action.DEFER,
                    Reason.UNHEALTHY_CAPACITY,
                    offloads=(offload.key,),
                    message=f"needs {offload.home_gpus} healthy GPUs at home, {free} are free",
                    gpus=offload.home_gpus,
                )
            )
            return decisions  # one at a time, in order: the next waits for this one
        decisions.append(
            Decision(
                Action.FLIP_BACK,
                Reason.DEMAND_GONE,
                offloads=(offload.key,),
                message=f"no training demand for {policy.timing.flip_back_after_seconds} s",
                gpus=offload.home_gpus,
            )
        )
        return decisions
    return decisions
