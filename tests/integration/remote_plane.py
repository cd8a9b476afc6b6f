"""A second real control plane, playing the remote cluster of the `kubernetes` provider.

Started from the same cached binaries as the main plane, in a folder of its own and on ports of its
own, with one `local` virtual node inside it so that the remote pods really run (as processes on this
host, on a /24 of the dev pod network routed to the host, so the remote pod IPs answer from here).
The node keeps its virtual node taint (`vk-provider.dev/virtual-node`): the provider's `tolerations`
and `node_selector` settings put remote pods on it, as they would put them on a GPU pool of a real
remote cluster.

It is started once per module that asks for it (the `remote_plane` fixture of
test_kubernetes_provider.py), and stopped after that module: the other tests do not pay for it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.integration.daemons import NodeDaemon
from tests.integration.migration_rig import pod_range
from vk_devtools.devcluster import cluster, podnetwork
from vk_devtools.devcluster.building import BinaryCache

NODE_READY_TIMEOUT_SECONDS = 90
POLL_SECONDS = 0.25


@dataclasses.dataclass(frozen=True)
class RemotePlane:
    state: cluster.ClusterState
    node: NodeDaemon
    start_seconds: float
    """How long the plane and its node took to be ready (reported at the end of the run)."""

    @property
    def kubeconfig(self) -> Path:
        return self.state.kubeconfig

    @property
    def node_name(self) -> str:
        return self.node.node_name

    def provider_settings(self, **overrides: Any) -> dict[str, Any]:
        """The `kubernetes` provider settings that put remote pods on this plane's local node."""
        return {
            "kubeconfig_file": str(self.kubeconfig),
            "node_selector": {"kubernetes.io/hostname": self.node_name},
            "tolerations": [
                {"key": "vk-provider.dev/virtual-node", "operator": "Exists", "effect": "NoSchedule"}
            ],
            **overrides,
        }

    def kubectl(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.state.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *arguments]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if check and completed.returncode != 0:
            raise AssertionError(f"remote kubectl {' '.join(arguments)} failed: {completed.stderr}")
        return completed


def start_remote_plane(directory: Path) -> Iterator[RemotePlane]:
    """Start the plane and its local node in `directory`; stop both when the generator is closed."""
    started = time.monotonic()
    cache = BinaryCache.default()
    bin_dir = cache.ensure(wait=True, out=sys.stderr)
    settings = cluster.ClusterSettings(
        directory=directory / "plane",
        use_preferred_ports=False,
        local_node=False,  # started below, with a pod range of its own
        demo=False,
    )
    result = cluster.up(
        settings, bin_dir=bin_dir, kubernetes_version=cache.pins.kubernetes_version, out=sys.stderr
    )
    node: NodeDaemon | None = None
    try:
        podnetwork.ensure_local_route()
        node = NodeDaemon(
            folder=directory / "node",
            provider="local",
            node_name=f"remote-local-{uuid.uuid4().hex[:6]}",
            kubeconfig=str(result.state.kubeconfig),
            # The remote cluster's own node: no router reads what it publishes, and this plane has no
            # vk-provider-system namespace, so its traffic key lives where a bare node keeps it.
            traffic_key_secret="default/vk-provider-traffic-key",
            provider_config={
                "address_range": pod_range(),
                "restart_backoff_initial_seconds": 0.5,
                "restart_backoff_max_seconds": 2,
            },
        )
        _start_marked(node, settings.directory)
        plane = RemotePlane(state=result.state, node=node, start_seconds=0.0)
        _wait_until_ready(plane)
        plane = dataclasses.replace(plane, start_seconds=time.monotonic() - started)
        print(f"remote plane ready in {plane.start_seconds:.1f}s", file=sys.stderr, flush=True)
        yield plane
    finally:
        if node is not None:
            if node.alive():
                _remove_remote_pods(result.state, node)
                node.stop()
            node.close()
        cluster.down(settings.directory)  # also ends workloads the node left running (see _start_marked)


def _start_marked(node: NodeDaemon, plane_directory: Path) -> None:
    """Start the node with the dev cluster's mark, which its workloads inherit: `cluster.down` then ends
    any the node did not stop (a test that failed half-way), as it does for `vk-provider dev` nodes."""
    previous = os.environ.get(cluster.DEV_CLUSTER_MARK)
    os.environ[cluster.DEV_CLUSTER_MARK] = str(plane_directory)
    try:
        node.start()
    finally:
        if previous is None:
            del os.environ[cluster.DEV_CLUSTER_MARK]
        else:
            os.environ[cluster.DEV_CLUSTER_MARK] = previous


def _remove_remote_pods(state: cluster.ClusterState, node: NodeDaemon) -> None:
    """Delete every pod on the remote node and wait until the node has stopped them all."""
    plane = RemotePlane(state=state, node=node, start_seconds=0.0)
    on_node = ("--all-namespaces", f"--field-selector=spec.nodeName={node.node_name}")
    plane.kubectl("delete", "pods", *on_node, "--grace-period=1", "--wait=false", check=False)
    deadline = time.monotonic() + NODE_READY_TIMEOUT_SECONDS
    while plane.kubectl("get", "pods", *on_node, "-o", "name", check=False).stdout.strip():
        if time.monotonic() > deadline:
            print(f"remote pods still on {node.node_name}; cluster.down ends them", file=sys.stderr)
            return
        time.sleep(POLL_SECONDS)  # a poll with a deadline, no event loop here (noqa: sleep-ok)


def _wait_until_ready(plane: RemotePlane) -> None:
    """Poll the node's Ready condition (a session fixture has no event loop for `wait_for`)."""
    deadline = time.monotonic() + NODE_READY_TIMEOUT_SECONDS
    ready = '{.status.conditions[?(@.type=="Ready")].status}'
    while (
        plane.kubectl("get", "node", plane.node_name, "-o", f"jsonpath={ready}", check=False).stdout != "True"
    ):
        if not plane.node.alive() or time.monotonic() > deadline:
            raise AssertionError(f"the remote plane's node did not become Ready:\n{plane.node.log_tail()}")
        time.sleep(POLL_SECONDS)  # a poll with a deadline, no event loop here (noqa: sleep-ok)
