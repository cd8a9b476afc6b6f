"""What the policy sees of the cluster at one moment, as plain values: the input of `decide`.

Observation (`vk_provider.policy.observe`) builds these from the apiserver; the tests build them by
hand. Everything `decide` must remember across passes and across controller restarts is either here
(read back from the resources: an Offload's annotations and status, a node's taints and its
policy-taints annotation) or in `History` (read back from the policy's own status).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta

from vk_provider.policy.health import Verdict
from vk_provider.policy.severity import Finding

HOUR = timedelta(hours=1)


@dataclasses.dataclass(frozen=True)
class Gang:
    """Training that needs the pool: a PodGroup, a Job's pods, or the pods sharing a label value."""

    kind: str
    """`Pods` (grouped pods), `PodGroup` (a native scheduling.k8s.io PodGroup) or `Workload` (Kueue)."""
    namespace: str
    name: str
    gpus: int
    """GPUs all its members request, placed or not."""
    unplaced_gpus: int
    """GPUs its members that the scheduler could not place request."""
    immediate: bool = False
    """Its demand is explicit (a Kueue Workload waiting on our AdmissionCheck): flipOutAfterSeconds
    does not apply, there is no noise to wait out."""
    foreseen_gpus: int = 0
    """GPUs its declared size still adds beyond its members seen (a Job's pods not yet created, a
    PodGroup short of minCount, a Workload not yet given quota): demand foreseen, not yet due."""

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True)
class NodeHealth:
    """The health judgement of one pool node (from `vk_provider.policy.health`, or healthy without it)."""

    healthy: bool = True
    counts: bool = True
    """Healthy for long enough (`healthyForSeconds`) to take work again."""
    reason: str | None = None
    detail: str = ""
    since: datetime | None = None
    findings: tuple[Finding, ...] = ()
    """Every signal found on the node, informational ones too."""
    rule: Finding | None = None
    """The finding that judged it (unhealthy, held back, pending, or only reported)."""
    verdict: Verdict = Verdict.CLEAR
    held_back: bool = False
    """A degrading signal would pull it, but the pool's cap on non-fatal taints has no slot left."""


@dataclasses.dataclass(frozen=True)
class PoolNode:
    name: str
    allocatable: int
    """The pool resource's allocatable count."""
    used: int
    """GPUs the pods bound here (not finished) request."""
    taints: frozenset[str] = frozenset()
    """Keys of its NoSchedule/NoExecute taints."""
    taint_values: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Their values, by key (the unhealthy taint's value is its reason)."""
    policy_taints: frozenset[str] = frozenset()
    """Keys the policy put there (the node's policy-taints annotation): the only ones it may remove."""
    blocked: bool = False
    """Unschedulable (cordoned) or tainted by others with a taint training does not tolerate."""
    health: NodeHealth = NodeHealth()

    @property
    def free(self) -> int:
        return max(0, self.allocatable - self.used)


@dataclasses.dataclass(frozen=True)
class OffloadView:
    namespace: str
    name: str
    placement: str
    """`spec.placement`: where it should be."""
    phase: str | None = None
    target: str | None = None
    """`status.targetPlacement`: where the current or last migration goes."""
    home_gpus: int = 0
    """GPUs its home replicas need (replicas at home, or recorded before scaling to 0, x per pod)."""
    home_gpus_held: int = 0
    """GPUs its home pods request now (bound, not finished)."""
    home_gpus_unhealthy: int = 0
    """GPUs of those home pods bound to pool nodes judged or tainted unhealthy (part of `home_gpus_held`)."""
    order: int = 0
    auto: bool = True
    hold_until: datetime | None = None
    hold_next_flip: bool = False
    flipped_by: str | None = None
    policy_flips: tuple[datetime, ...] = ()
    """When a policy flipped it (its policy-flips annotation, written with the flip itself)."""
    last_change: datetime | None = None
    """The last time anyone changed its placement (a policy flip or its migration's start)."""
    warm_until: datetime | None = None
    """Its warm-up annotation: until when its away side is kept warm (None: none, or unreadable)."""
    warmed_by: str | None = None
    progress_reason: str | None = None
    """The reason of its Progressing condition (WaitingForReplicas, StepApplied, Finalizing, ...)."""
    progress_message: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def running(self) -> bool:
        return self.phase in ("Preparing", "Shifting", "Paused", "Finalizing")

    def held(self, now: datetime) -> bool:
        return self.hold_next_flip or (self.hold_until is not None and self.hold_until > now)

    def flips_within_hour(self, now: datetime) -> int:
        return sum(1 for moment in self.policy_flips if now - moment < HOUR)


@dataclasses.dataclass(frozen=True)
class Observed:
    gangs: tuple[Gang, ...] = ()
    nodes: tuple[PoolNode, ...] = ()
    offloads: tuple[OffloadView, ...] = ()
    foreseen: tuple[Gang, ...] = ()
    """Training that will need the pool but is no demand yet (nothing of it is pending): a Kueue
    Workload queued for one of our checks before its quota, a PodGroup none of whose pods exist. Only
    `foreseen_gpus` counts; they warm the away side, they never flip."""


@dataclasses.dataclass(frozen=True)
class History:
    """What the policy remembers between passes (kept in its status, so a new leader reads it back)."""

    shortfall_since: Mapping[str, datetime] = dataclasses.field(default_factory=dict)
    """Per gang key: since when it has had a shortfall."""
    demand_since: Mapping[str, datetime] = dataclasses.field(default_factory=dict)
    """Per gang key: since when the gang has been seen at all."""
    demand_gone_since: datetime | None = None
    """Since when no gang has been seen (None while there is one, or before any was ever seen)."""
