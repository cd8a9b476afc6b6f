"""What an uninstall leaves behind, found and said: Offloads not yet gone, and the pods still bound to
virtual nodes (each a workload at a provider, which costs until it is deleted there).

Pure functions of the objects read, so that the messages are unit-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from vk_provider.kit.kube import RawObject
from vk_provider.offload.names import FINALIZER, OFFLOAD_LABEL, VIRTUAL_NODE_SELECTOR
from vk_provider.offloadcli import homing, rendering

VIRTUAL_NODES = VIRTUAL_NODE_SELECTOR
"""The label every vk-provider virtual node carries and no other virtual-kubelet's does
(`vk_provider.node.nodeobject.labels`): the pods of an AKS virtual node are not ours to wait for."""


def node_names(listing: RawObject) -> set[str]:
    return {str((node.get("metadata") or {}).get("name")) for node in listing.get("items") or []}


def _owned_by_daemonset(pod: RawObject) -> bool:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(owner.get("kind") == "DaemonSet" for owner in owners)


def provider_pods(pods: Iterable[RawObject], virtual_nodes: set[str]) -> list[RawObject]:
    """The pods bound to a virtual node, but those of DaemonSets: a DaemonSet that tolerates the
    virtual nodes' taint puts a pod on each, and it goes with the node, not with the Offloads."""
    return [
        pod
        for pod in pods
        if (pod.get("spec") or {}).get("nodeName") in virtual_nodes and not _owned_by_daemonset(pod)
    ]


def describe_pod(pod: RawObject) -> str:
    metadata = pod.get("metadata") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    offload = (metadata.get("labels") or {}).get(OFFLOAD_LABEL)
    whose = (
        f"away pod of Offload {offload}"
        if offload
        else "not an Offload's: uninstall does not delete it; delete it or what created it"
    )
    state = (
        "terminating" if metadata.get("deletionTimestamp") else (pod.get("status") or {}).get("phase", "?")
    )
    return f"pod {metadata.get('namespace')}/{metadata.get('name')} on node {node} ({state}; {whose})"


def describe_offload(offload: RawObject) -> str:
    """One line: where it is, what the controller last said, and what holds a deleted one."""
    spec = rendering.spec_of(offload)
    status = rendering.status_of(offload)
    parts = [
        f"placement {spec.get('placement', homing.HOME)}",
        f"phase {status.phase or 'none'}",
        f"away weight {rendering.weight_text(offload)}",
    ]
    if homing.is_deleting(offload):
        finalizers = (offload.get("metadata") or {}).get("finalizers") or []
        parts.append("deleted, held by finalizer " + ", ".join(finalizers) if finalizers else "deleted")
    deleting = rendering.condition_of(offload, "Deleting")
    message = (deleting or {}).get("message") or status.message
    line = f"Offload {homing.key_of(offload)}: {', '.join(parts)}"
    return f"{line}: {message}" if message else line


def needs_controller(offload: RawObject) -> bool:
    """Whether only the controller can let this Offload go: it carries the controller's finalizer, or
    serves (or may serve) away, which only a migration home ends."""
    finalizers = (offload.get("metadata") or {}).get("finalizers") or []
    return FINALIZER in finalizers or not homing.is_home(offload)


def listing_lines(offloads: Sequence[RawObject], pods: Sequence[RawObject]) -> list[str]:
    return [
        *(f"  {describe_offload(item)}" for item in offloads),
        *(f"  {describe_pod(pod)}" for pod in pods),
    ]
