"""What our AdmissionCheck says about each Workload: a pure function of the Workloads, the pool and the clock.

For a policy and the checks it serves:

- Demand (`demand_gangs`). A Workload whose quota Kueue reserved and whose check of ours is `Pending`
  is a gang needing all its GPUs (none of its pods exist yet), flipped for at once: the demand is
  explicit, there is no noise to wait out. A Workload we let through (`Ready`) stays demand, with
  nothing unplaced, until it finishes: the reservation holds and inference does not come back while
  training runs.
- Verdicts (`judge`). `Ready` once the free GPUs of the usable home pool cover the Workload (oldest
  check first; each Ready takes its GPUs off what the next may have, and so do Workloads let through
  earlier whose pods are not all placed yet: `promised`), with `podSetUpdates` adding the
  reservation taint's toleration, and the pool's node selector when the pool is named by labels
  alone. A Workload that needs no GPU is `Ready` at once, with no update. `Retry` (Kueue releases the
  quota and requeues after `requeueAfterSeconds`) when even the whole usable pool is too small, or when
  the GPUs were not freed within `admissionRetryAfterSeconds` and nothing is moving to free them (no
  migration under way: none may move, or the one that was rolled back); the message names the
  shortfall. While a migration is under way the Workload waits however long its away side takes to
  start (a provider's cold start runs to minutes; the migration's own progress deadline bounds it),
  since a Retry then would drop the quota and make the policy bring the service home again. A
  shortage is never a reason for `Rejected`, which deactivates the Workload for good: only a Workload
  whose pod sets cannot be read is rejected, since waiting cannot mend it.
- While a Workload waits at the check, its message says what for (`waiting.Wait.message`: warming the
  away side of which Offload, shifting traffic, pods leaving, ...), the state left `Pending`; written
  only when the stage changes, not on every pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from vk_provider.policy.admission.names import PENDING, READY, REJECTED, RETRY
from vk_provider.policy.admission.workload import WorkloadView
from vk_provider.policy.decide import free_gpus, usable
from vk_provider.policy.model import Gang, Observed
from vk_provider.policy.spec import PolicySpec
from vk_provider.policy.waiting import Stage, Wait

WORKLOAD_KIND = "Workload"


@dataclasses.dataclass(frozen=True)
class Verdict:
    workload: WorkloadView
    check: str
    state: str
    message: str
    pod_set_updates: tuple[dict[str, Any], ...] = ()
    requeue_after_seconds: int | None = None


def _served(workload: WorkloadView, checks: Iterable[str], state: str) -> list[str]:
    return [check for check in checks if workload.state_of(check) == state]


def demand_gangs(checks: Sequence[str], workloads: Iterable[WorkloadView]) -> list[Gang]:
    gangs = []
    for workload in workloads:
        if workload.problem is not None or workload.gpus <= 0 or workload.finished:
            continue
        if workload.quota_reserved and _served(workload, checks, PENDING):
            unplaced = workload.gpus
        elif _served(workload, checks, READY):
            unplaced = 0
        else:
            continue
        gangs.append(
            Gang(WORKLOAD_KIND, workload.namespace, workload.name, workload.gpus, unplaced, immediate=True)
        )
    return gangs


def queued_gangs(
    workloads: Iterable[WorkloadView], queues_with_our_checks: set[tuple[str, str]]
) -> list[Gang]:
    """Workloads queued for a ClusterQueue that has one of our checks, before Kueue reserved their quota
    (so before they reach the check): `(namespace, LocalQueue)` pairs name those queues. Their GPUs are
    foreseen demand, nothing of them is pending yet."""
    return [
        Gang(WORKLOAD_KIND, workload.namespace, workload.name, workload.gpus, 0, foreseen_gpus=workload.gpus)
        for workload in workloads
        if workload.problem is None
        and workload.gpus > 0
        and workload.active
        and not workload.finished
        and not workload.quota_reserved
        and (workload.namespace, workload.queue or "") in queues_with_our_checks
    ]


def pod_set_updates(workload: WorkloadView, policy: PolicySpec) -> tuple[dict[str, Any], ...]:
    taint = policy.reservation
    toleration = {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
    pool = policy.pool_selector
    # A nodeSelector holds labels only; a pool chosen by expressions is left to the taint alone.
    selector = dict(pool.match_labels) if pool.match_labels and not pool.expressions else None
    updates = []
    for name in workload.pod_sets:
        update: dict[str, Any] = {"name": name, "tolerations": [toleration]}
        if selector:
            update["nodeSelector"] = selector
        updates.append(update)
    return tuple(updates)


def _waited(now: datetime, since: datetime | None) -> float:
    return 0.0 if since is None else max(0.0, (now - since).total_seconds())


def judge(
    now: datetime,
    policy: PolicySpec,
    checks: Sequence[str],
    workloads: Iterable[WorkloadView],
    observed: Observed,
    *,
    promised: int = 0,
    waits: Mapping[str, Wait] | None = None,
) -> list[Verdict]:
    """The checks to change now (a Workload left Pending is listed only when its message changes).
    `promised`: GPUs of Workloads already let through that their pods do not hold yet (they are about
    to take them); `waits`: per gang key, what each waiting gang waits for."""
    resource = policy.resource
    available = max(0, free_gpus(observed, policy) - promised)
    capacity = sum(node.allocatable for node in observed.nodes if usable(node, policy))
    retry_after = policy.timing.admission_retry_after_seconds
    waiting = []
    for workload in workloads:
        if not workload.quota_reserved or workload.finished:
            continue
        for check in _served(workload, checks, PENDING):
            since = workload.checks[check].since
            waiting.append((since or now, workload.created or now, workload.key, workload, check))
    verdicts = []
    for since, _, _, workload, check in sorted(waiting, key=lambda item: item[:3]):
        wait = (waits or {}).get(f"{WORKLOAD_KIND}:{workload.key}")
        if workload.problem is not None:
            message = f"cannot count the GPUs this Workload needs: {workload.problem}"
            verdicts.append(Verdict(workload, check, REJECTED, message))
        elif workload.gpus <= 0:
            verdicts.append(Verdict(workload, check, READY, f"needs no {resource}"))
        elif workload.gpus <= available:
            available -= workload.gpus
            message = f"{workload.gpus} {resource} free on healthy home nodes"
            verdicts.append(Verdict(workload, check, READY, message, pod_set_updates(workload, policy)))
        elif workload.gpus > capacity:
            message = (
                f"needs {workload.gpus} {resource}, more than the {capacity} of the usable home pool "
                f"(short {workload.gpus - capacity}): no flip can free that many"
            )
            verdicts.append(Verdict(workload, check, RETRY, message, requeue_after_seconds=retry_after))
        elif (waited := _waited(now, since)) >= retry_after and not _moving(wait):
            message = (
                f"waited {waited:.0f} s for {workload.gpus} {resource}; {available} free on healthy home "
                f"nodes (short {workload.gpus - available}): not enough inference could move away in time"
            )
            verdicts.append(Verdict(workload, check, RETRY, message, requeue_after_seconds=retry_after))
        elif wait is not None:
            message = wait.message()
            if workload.checks[check].message != message:
                verdicts.append(Verdict(workload, check, PENDING, message))
    return verdicts


def _moving(wait: Wait | None) -> bool:
    """Whether GPUs are on their way to the Workload: a migration or a scheduling under way."""
    return wait is not None and wait.stage is not Stage.NO_CANDIDATE
