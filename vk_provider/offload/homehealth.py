"""Home pods on unhealthy GPU nodes: which they are, and the make-before-break move that replaces them.

The OffloadPolicy taints a home node it judges unhealthy (a GPU above its maximum temperature, an Xid,
a failed row remap, ...) with `gpu.vk-provider.dev/unhealthy`. A NoSchedule taint only keeps new pods
off: a home pod already there would keep serving from the hot GPU for as long as it lives. The
migration controller treats such a pod as *stranded*:

- a migration home never lets traffic reach it: found at an away weight below 100, the weight goes
  back to 100 and the migration prepares again (the reconciler does that);
- it is replaced make before break: the home Deployment is scaled up by the number of stranded pods
  (the taint sends the new pods to healthy nodes) and, once as many pods as the Deployment runs are
  ready on healthy nodes, the stranded ones are marked to go first (`pod-deletion-cost`, which the
  ReplicaSet honours when it scales down) and the Deployment is scaled back to what it had;
- when no healthy capacity is left at home the replacements stay Pending, and the OffloadPolicy
  moves the service away (reason `UnhealthyHome`).

This module is the pure part of it: the classification of the home pods and the next move. The
replicas the Deployment had before the surge are kept in an annotation on it, so a restarted
controller resumes the replacement where it stood.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from vk_provider.offload.names import GROUP

REPLACING_ANNOTATION = f"{GROUP}/replicas-before-replacement"
"""On the home Deployment while stranded pods are replaced: its replicas before the surge."""
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
"""The ReplicaSet removes the pods with the lowest cost first when it scales down (among pods that are
equally ready); a stranded pod gets the lowest value there is."""
LOWEST_DELETION_COST = str(-(2**31))


@dataclasses.dataclass(frozen=True)
class HomePods:
    """The home Deployment's pods (those not being deleted), as the replacement sees them."""

    healthy_ready: int
    """Ready pods on nodes not tainted unhealthy."""
    stranded: tuple[str, ...] = ()
    """Names of the pods bound to an unhealthy node, ready or not."""
    stranded_nodes: tuple[str, ...] = ()
    """The unhealthy nodes they are on."""


@dataclasses.dataclass(frozen=True)
class Replacement:
    """What to do now: the home Deployment's replicas, the base to record, the pods to mark."""

    replicas: int
    base: int | None
    """The replicas before the surge, recorded on the Deployment; None: nothing to record (done)."""
    drain: tuple[str, ...] = ()
    """Stranded pods to mark with the lowest deletion cost before `replicas` is applied."""
    waiting: str = ""
    """Why the home side is not ready to serve yet; '' once no pod is stranded."""


def unhealthy_nodes(nodes: Iterable[Mapping[str, Any]], taint_key: str) -> frozenset[str]:
    """The names of the nodes carrying the unhealthy taint (any value, any effect)."""
    return frozenset(
        str((node.get("metadata") or {}).get("name"))
        for node in nodes
        if any(taint.get("key") == taint_key for taint in (node.get("spec") or {}).get("taints") or ())
    )


def classify(pods: Iterable[Mapping[str, Any]], unhealthy: frozenset[str]) -> HomePods:
    """Sort the home pods into ready ones on healthy nodes and stranded ones (pure)."""
    healthy_ready = 0
    stranded: list[str] = []
    nodes: set[str] = set()
    for pod in pods:
        metadata = pod.get("metadata") or {}
        if metadata.get("deletionTimestamp"):
            continue  # on its way out already: the EndpointSlice no longer counts it ready
        node = (pod.get("spec") or {}).get("nodeName")
        if node in unhealthy:
            stranded.append(str(metadata.get("name")))
            nodes.add(str(node))
        elif node and _ready(pod):
            healthy_ready += 1
    return HomePods(healthy_ready, tuple(sorted(stranded)), tuple(sorted(nodes)))


def plan_replacement(pods: HomePods, base: int) -> Replacement:
    """The next make-before-break move for a home side that should run `base` replicas (pure)."""
    if not pods.stranded:
        return Replacement(replicas=base, base=None)
    where = ", ".join(pods.stranded_nodes)
    count = len(pods.stranded)
    if pods.healthy_ready >= base:
        return Replacement(
            replicas=base,
            base=base,
            drain=pods.stranded,
            waiting=f"{base} home replicas ready on healthy nodes: removing the {count} on unhealthy "
            f"node(s) {where}",
        )
    return Replacement(
        replicas=base + count,
        base=base,
        waiting=f"{pods.healthy_ready} of {base} home replicas ready on healthy nodes; the {count} on "
        f"unhealthy node(s) {where} keep their place until their replacements are ready",
    )


def recorded_base(deployment: Mapping[str, Any] | None) -> int | None:
    """The replicas recorded before a surge that is still under way, None when there is none."""
    annotations = ((deployment or {}).get("metadata") or {}).get("annotations") or {}
    try:
        value = int(annotations[REPLACING_ANNOTATION])
    except (KeyError, TypeError, ValueError):
        return None
    return value if value >= 0 else None


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(
        condition.get("type") == "Ready" and condition.get("status") == "True"
        for condition in (pod.get("status") or {}).get("conditions") or ()
    )
