"""Which replica of a node's daemon runs the node: a leader Lease per virtual node.

Several replicas of `vk-provider node` for one virtual node share a Lease named
`vk-provider-node-<node name>`; only its holder registers the Node, heartbeats it, reconciles pods and
serves the kubelet API. A standby only keeps an apiserver connection and polls the Lease: it writes no
pod, no Node and makes no call to the provider, so two replicas never act on the same workloads.
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

from vk_provider._kube.leaderelection import LeaderElector
from vk_provider.kit.kube import KubeApi
from vk_provider.kit.kubeconfigs import SERVICE_ACCOUNT_NAMESPACE_FILE, pod_namespace
from vk_provider.node.settings import NodeSettings

FALLBACK_NAMESPACE = "kube-node-lease"
"""Outside a pod, with nothing configured: a namespace every cluster has (where nodes' heartbeat Leases
live), so that a first `vk-provider node` run by hand registers on a fresh cluster instead of waiting
forever for a vk-provider-system nobody created."""
LEASE_PREFIX = "vk-provider-node-"


def lease_name(node_name: str) -> str:
    """The Lease's name: the node's, prefixed (a node name is at most 253 characters, as a Lease's)."""
    return f"{LEASE_PREFIX}{node_name}"[:253].rstrip("-.")


def lease_namespace(settings: NodeSettings, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE) -> str:
    """The configured namespace; else the pod's own, where its Role lets it hold Leases; else
    kube-node-lease."""
    if settings.leader_election_namespace:
        return settings.leader_election_namespace
    return pod_namespace(namespace_file) or FALLBACK_NAMESPACE


def identity(settings: NodeSettings) -> str:
    """Unique per process: the host name (a pod's name) alone would let two replicas on one host both
    believe they hold the Lease."""
    return settings.leader_election_identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def elector(settings: NodeSettings, api: KubeApi) -> LeaderElector:
    retry = settings.leader_election_retry_period_seconds
    return LeaderElector(
        api,
        namespace=lease_namespace(settings),
        name=lease_name(settings.node_name),
        identity=identity(settings),
        lease_seconds=settings.leader_election_lease_duration_seconds,
        # As client-go: the leader renews every retry period and gives up at the renew deadline.
        renew_seconds=retry,
        retry_seconds=retry,
        renew_deadline_seconds=settings.leader_election_renew_deadline_seconds,
    )
