"""Read what one policy decides on from the apiserver: its Offloads, the home pool, the training gangs.

One pass lists the pool's nodes, every unfinished pod (cluster-wide: training may run in any
namespace) and the selected Offloads with their home Deployments, then reduces them to the plain
values of `vk_provider.policy.model`. Problems that make the policy unusable as written (it selects
no Offload, the pool has no node or no GPU, no node knows the resource) come back as `problems`, so
the caller reports them and moves nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.offload import homehealth
from vk_provider.offload.names import WARM_UNTIL_ANNOTATION, WARMED_BY_ANNOTATION, offloads_path
from vk_provider.policy import pods as podinfo
from vk_provider.policy.actuate import POLICY_FLIPS_ANNOTATION, flip_times
from vk_provider.policy.model import Gang, NodeHealth, Observed, OffloadView, PoolNode
from vk_provider.policy.names import (
    AUTO_ANNOTATION,
    FLIP_ORDER_ANNOTATION,
    FLIPPED_BY_ANNOTATION,
    HOLD_UNTIL_ANNOTATION,
    HOLD_UNTIL_NEXT_FLIP,
    POLICY_TAINTS_ANNOTATION,
)
from vk_provider.policy.signals import HealthReport, HealthSource, PodGroupSource
from vk_provider.policy.spec import PolicySpec

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclasses.dataclass(frozen=True)
class Problem:
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class Observation:
    observed: Observed
    nodes: Sequence[RawObject]
    offloads: Mapping[str, RawObject]
    """`namespace/name` -> the Offload as read (for its uid in Events)."""
    health: HealthReport
    problems: tuple[Problem, ...] = ()
    pod_groups_unavailable: str | None = None
    """Why native PodGroups could not be read (an older cluster, the API off, forbidden); None if read."""


async def observe(
    api: KubeApi, policy: PolicySpec, now: datetime, *, health: HealthSource, podgroups: PodGroupSource
) -> Observation:
    nodes = await _items(api, resource_path("v1", "nodes"), policy.pool_selector.query())
    pods = await _items(
        api, resource_path("v1", "pods"), None, field_selector="status.phase!=Succeeded,status.phase!=Failed"
    )
    offloads = await _offloads(api, policy)
    report = await health.judge(now, nodes, policy)
    problems = list(_pool_problems(policy, nodes))
    if not offloads:
        where = policy.offload_selector.query() or "everything"
        if not policy.namespace_selector.empty:
            where += f"; namespaces {policy.namespace_selector.query()}"
        problems.append(Problem("NoOffloadsSelected", f"spec.offloads selects no Offload ({where})"))
    pool = {node["metadata"]["name"] for node in nodes}
    jobs = await _items(api, resource_path("batch/v1", "jobs"), None)
    gangs = with_declared_jobs(_gangs(policy, pods, pool), jobs, policy)
    gangs = _merged(gangs, await podgroups.demand(policy))
    # Each node and each Offload reads only its own pods: grouped once, not scanned per node and per
    # Offload (200 nodes and 1,000 Offloads over 10,000 pods made a pass seconds of CPU).
    index = PodIndex(pods)
    pool_nodes = tuple(
        _pool_node(
            policy,
            node,
            index.on_node(node["metadata"]["name"]),
            report.nodes.get(node["metadata"]["name"]),
        )
        for node in nodes
    )
    unhealthy = {
        node.name for node in pool_nodes if not node.health.healthy or policy.health.taint_key in node.taints
    }
    views = []
    for _, offload in sorted(offloads.items()):
        deployment = await _home_deployment(api, offload)
        selector = ((deployment or {}).get("spec") or {}).get("selector") or {}
        selected = index.selected(offload["metadata"]["namespace"], selector)
        views.append(_offload_view(policy, offload, deployment, selected, pool, unhealthy=unhealthy))
    observed = Observed(
        gangs=tuple(sorted(gangs, key=lambda gang: gang.key)), nodes=pool_nodes, offloads=tuple(views)
    )
    return Observation(
        observed, nodes, offloads, report, tuple(problems), pod_groups_unavailable=podgroups.unavailable()
    )


class PodIndex:
    """One pass's pods, grouped so that each node and each Offload reads only its own: by node at once,
    by a label key the first time an Offload's selector asks for it."""

    def __init__(self, pods: Sequence[RawObject]) -> None:
        self._pods = pods
        self._by_node: dict[str, list[RawObject]] = defaultdict(list)
        for pod in pods:
            if node := (pod.get("spec") or {}).get("nodeName"):
                self._by_node[str(node)].append(pod)
        self._by_label: dict[str, dict[tuple[str, str], list[RawObject]]] = {}

    def on_node(self, name: str) -> Sequence[RawObject]:
        return self._by_node.get(name, ())

    def selected(self, namespace: str, selector: Mapping[str, Any]) -> Sequence[RawObject]:
        """The pods of `namespace` carrying one of the selector's `matchLabels` (a superset of those it
        selects; none for a selector without them, which `_selects` refuses too)."""
        wanted: Mapping[str, str] = selector.get("matchLabels") or {}
        if not wanted:
            return ()
        key, value = min(wanted.items())
        grouped = self._by_label.get(key)
        if grouped is None:
            grouped = defaultdict(list)
            for pod in self._pods:
                metadata = pod.get("metadata") or {}
                labels = metadata.get("labels") or {}
                if key in labels:
                    grouped[(str(metadata.get("namespace", "")), str(labels[key]))].append(pod)
            self._by_label[key] = grouped
        return grouped.get((namespace, str(value)), ())


async def _items(
    api: KubeApi, path: str, selector: str | None, *, field_selector: str | None = None
) -> list[RawObject]:
    query: dict[str, str] = {}
    if selector:
        query["labelSelector"] = selector
    if field_selector:
        query["fieldSelector"] = field_selector
    listing = await api.get(path, query=query)
    items: list[RawObject] = listing.get("items") or []
    return items


async def _offloads(api: KubeApi, policy: PolicySpec) -> dict[str, RawObject]:
    items = await _items(api, offloads_path(), policy.offload_selector.query())
    if not policy.namespace_selector.empty:
        namespaces = await _items(api, resource_path("v1", "namespaces"), policy.namespace_selector.query())
        allowed = {namespace["metadata"]["name"] for namespace in namespaces}
        items = [item for item in items if item["metadata"]["namespace"] in allowed]
    return {f"{item['metadata']['namespace']}/{item['metadata']['name']}": item for item in items}


async def _home_deployment(api: KubeApi, offload: RawObject) -> RawObject | None:
    name = ((offload.get("spec") or {}).get("home") or {}).get("deployment")
    if not isinstance(name, str) or not name:
        return None
    try:
        return await api.get(
            resource_path("apps/v1", "deployments", namespace=offload["metadata"]["namespace"], name=name)
        )
    except KubeApiError as error:
        if error.not_found:
            return None
        raise


def _pool_problems(policy: PolicySpec, nodes: Sequence[RawObject]) -> list[Problem]:
    selector = policy.pool_selector.query()
    if not nodes:
        return [Problem("NoHomeNodes", f"no node matches spec.homePool.nodeSelector ({selector})")]
    known = [n for n in nodes if policy.resource in ((n.get("status") or {}).get("capacity") or {})]
    if not known:
        seen = sorted(
            {key for n in nodes for key in ((n.get("status") or {}).get("capacity") or {}) if "/" in key}
        )
        return [
            Problem(
                "UnknownResource",
                f"no node of the home pool ({selector}) advertises {policy.resource}"
                f" (their extended resources: {', '.join(seen) or 'none'})",
            )
        ]
    if sum(_count(n, "capacity", policy.resource) for n in nodes) == 0:
        return [Problem("NoHomeGpus", f"the home pool ({selector}) has no {policy.resource}")]
    return []


def _count(node: RawObject, field: str, resource: str) -> int:
    value = ((node.get("status") or {}).get(field) or {}).get(resource)
    return 0 if value is None else podinfo.whole(podinfo.quantity(value))


def policy_taints(node: RawObject) -> frozenset[str]:
    """The taint keys the node's annotation says the policy put there (unreadable: none)."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(POLICY_TAINTS_ANNOTATION)
    try:
        keys = json.loads(raw) if raw else []
    except ValueError:
        return frozenset()
    return frozenset(key for key in keys if isinstance(key, str)) if isinstance(keys, list) else frozenset()


def _pool_node(
    policy: PolicySpec, node: RawObject, pods: Sequence[RawObject], health: NodeHealth | None
) -> PoolNode:
    """The node as the policy weighs it; `pods` are those bound to it (others are skipped anyway)."""
    name = node["metadata"]["name"]
    spec = node.get("spec") or {}
    taints = [t for t in spec.get("taints") or () if t.get("effect") in BLOCKING_EFFECTS]
    ours = {policy.reservation.key, policy.health.taint_key}
    used = sum(
        podinfo.pod_gpus(pod, policy.resource)
        for pod in pods
        if (pod.get("spec") or {}).get("nodeName") == name
    )
    return PoolNode(
        name=name,
        allocatable=_count(node, "allocatable", policy.resource),
        used=used,
        taints=frozenset(str(t.get("key", "")) for t in taints),
        taint_values={str(t.get("key", "")): str(t.get("value", "")) for t in taints},
        policy_taints=policy_taints(node),
        blocked=bool(spec.get("unschedulable")) or any(t.get("key") not in ours for t in taints),
        health=health or NodeHealth(),
    )


def _gangs(policy: PolicySpec, pods: Sequence[RawObject], pool: set[str]) -> list[Gang]:
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for pod in pods:
        gpus = podinfo.pod_gpus(pod, policy.resource)
        if gpus <= 0 or podinfo.priority(pod) < policy.demand.min_priority:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node not in pool:
            continue  # training running elsewhere holds none of the pool
        metadata = pod["metadata"]
        if metadata.get("deletionTimestamp") and not node:
            continue  # a pending pod being deleted will never need GPUs
        key = (
            metadata["namespace"],
            podinfo.gang_name(pod, policy.demand.group_by, policy.demand.group_label),
        )
        totals[key][0] += gpus
        if podinfo.unschedulable(pod):
            totals[key][1] += gpus
    return [
        Gang("Pods", namespace, name, gpus, unplaced)
        for (namespace, name), (gpus, unplaced) in totals.items()
    ]


def with_declared_jobs(gangs: list[Gang], jobs: Sequence[RawObject], policy: PolicySpec) -> list[Gang]:
    """Pod gangs of a Job, with the GPUs its pods still to be created will request (`foreseen_gpus`):
    the Job runs `parallelism` pods at once (fewer when fewer completions are left), each requesting
    what its template does. A suspended Job creates none (Kueue holds it: its Workload is the sign)."""
    by_name = {(job["metadata"]["namespace"], job["metadata"]["name"]): job for job in jobs}
    result = []
    for gang in gangs:
        job = by_name.get((gang.namespace, gang.name))
        spec = (job or {}).get("spec") or {}
        if job is None or spec.get("suspend"):
            result.append(gang)
            continue
        running = int(spec.get("parallelism", 1) or 0)
        if (completions := spec.get("completions")) is not None:
            succeeded = int(((job.get("status") or {}).get("succeeded")) or 0)
            running = min(running, max(0, int(completions) - succeeded))
        per_pod = podinfo.template_gpus(((spec.get("template") or {}).get("spec")) or {}, policy.resource)
        missing = max(0, running * per_pod - gang.gpus)
        result.append(dataclasses.replace(gang, foreseen_gpus=missing) if missing else gang)
    return result


def _merged(pod_gangs: list[Gang], group_gangs: list[Gang]) -> list[Gang]:
    """Pod gangs and PodGroup gangs, one per namespace/name: a PodGroup's pods grouped by it are the
    same gang, counted once, by whichever sees more of it unplaced; the PodGroup when both see as much,
    since it is the scheduler's own word that the gang waits whole (and what a person looks for)."""
    merged = {(gang.namespace, gang.name): gang for gang in pod_gangs}
    for gang in group_gangs:
        known = merged.get((gang.namespace, gang.name))
        if known is None or gang.unplaced_gpus >= known.unplaced_gpus:
            merged[(gang.namespace, gang.name)] = gang
    return list(merged.values())


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    wanted = selector.get("matchLabels") or {}
    return bool(wanted) and all(labels.get(key) == value for key, value in wanted.items())


def _offload_view(
    policy: PolicySpec,
    offload: RawObject,
    deployment: RawObject | None,
    pods: Sequence[RawObject],
    pool: set[str],
    *,
    unhealthy: set[str],
) -> OffloadView:
    metadata = offload["metadata"]
    annotations = metadata.get("annotations") or {}
    status = offload.get("status") or {}
    per_pod, replicas, held, held_unhealthy = 0, 0, 0, 0
    if deployment is not None:
        dspec = deployment.get("spec") or {}
        per_pod = podinfo.template_gpus((dspec.get("template") or {}).get("spec") or {}, policy.resource)
        # While the migration controller replaces home pods stranded on unhealthy nodes, the
        # Deployment runs more than it needs: what it needs is the count recorded before.
        replicas = homehealth.recorded_base(deployment) or int(dspec.get("replicas") or 0)
        replicas = replicas or int(status.get("homeReplicas") or 0)
        selector = dspec.get("selector") or {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if (
                pod["metadata"]["namespace"] != metadata["namespace"]
                or node not in pool
                or not _selects(selector, pod["metadata"].get("labels") or {})
            ):
                continue
            gpus = podinfo.pod_gpus(pod, policy.resource)
            held += gpus
            if node in unhealthy and not pod["metadata"].get("deletionTimestamp"):
                held_unhealthy += gpus
    hold = annotations.get(HOLD_UNTIL_ANNOTATION)
    hold_until = parse_timestamp(hold) if hold and hold != HOLD_UNTIL_NEXT_FLIP else None
    flips = tuple(sorted(flip_times(annotations.get(POLICY_FLIPS_ANNOTATION))))
    started = parse_timestamp(status.get("migrationStartedAt"))
    changes = [moment for moment in (*flips, started) if moment is not None]
    progressing = next(
        (
            condition
            for condition in status.get("conditions") or ()
            if isinstance(condition, Mapping) and condition.get("type") == "Progressing"
        ),
        {},
    )
    return OffloadView(
        namespace=metadata["namespace"],
        name=metadata["name"],
        placement=str((offload.get("spec") or {}).get("placement", "home")),
        phase=status.get("phase"),
        target=status.get("targetPlacement"),
        home_gpus=per_pod * replicas,
        home_gpus_held=held,
        home_gpus_unhealthy=held_unhealthy,
        order=_order(annotations.get(FLIP_ORDER_ANNOTATION)),
        auto=str(annotations.get(AUTO_ANNOTATION, "on")).lower() != "off",
        hold_until=hold_until,
        # A hold the policy cannot read is still a person's hold: kept until they flip again.
        hold_next_flip=bool(hold) and hold_until is None,
        flipped_by=annotations.get(FLIPPED_BY_ANNOTATION),
        policy_flips=flips,
        last_change=max(changes, default=None),
        # An unreadable warm-until is no warm-up (the migration controller says so on the Offload).
        warm_until=parse_timestamp(annotations.get(WARM_UNTIL_ANNOTATION)),
        warmed_by=annotations.get(WARMED_BY_ANNOTATION),
        progress_reason=progressing.get("reason") if progressing.get("status") == "True" else None,
        progress_message=str(progressing.get("message", "")) if progressing.get("status") == "True" else "",
    )


def _order(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
