"""A bare Node object that the control plane treats as healthy, for tests that need somewhere to schedule.

Nothing runs pods on it: it exists so the scheduler and the endpoint controllers have a real Node,
and its Lease is renewed in the background so the node-lifecycle controller keeps it Ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from kubernetes_asyncio import client

LEASE_DURATION_SECONDS = 40
TOLERATE_ALL = [{"operator": "Exists"}]
"""A toleration of every taint: pods placed on a virtual node directly, whatever its taints."""
RENEW_INTERVAL_SECONDS = 5.0


def micro_time(moment: datetime | None = None) -> str:
    """The MicroTime format the apiserver parses: always six fractional digits and a zone."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


DEFAULT_CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "10"}


def node_body(
    name: str,
    labels: dict[str, str],
    *,
    taints: list[dict[str, str]] | None = None,
    capacity: dict[str, str] | None = None,
) -> dict[str, object]:
    now = micro_time()
    capacity = capacity or DEFAULT_CAPACITY
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": {"taints": taints or []},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "TestNodeReady",
                    "message": "a test node with a renewed lease",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        },
    }


@contextlib.asynccontextmanager
async def healthy_node(
    api: client.ApiClient,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    capacity: dict[str, str] | None = None,
    prefix: str = "test-node",
) -> AsyncIterator[str]:
    """Create a Ready node with a unique name and label (and `taints`, `capacity`), keep its lease
    fresh, delete it afterwards."""
    core = client.CoreV1Api(api)
    coordination = client.CoordinationV1Api(api)
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    body = node_body(
        name, {"vk-provider.dev/test-node": name, **(labels or {})}, taints=taints, capacity=capacity
    )
    node = await core.create_node(body)

    async def renew() -> None:
        lease = {
            "metadata": {
                "name": name,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node.metadata.uid}
                ],
            },
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "renewTime": micro_time(),
            },
        }
        await coordination.create_namespaced_lease("kube-node-lease", lease)
        while True:
            await asyncio.sleep(RENEW_INTERVAL_SECONDS)
            await coordination.patch_namespaced_lease(
                name, "kube-node-lease", {"spec": {"renewTime": micro_time()}}
            )

    renewing = asyncio.create_task(renew(), name=f"renew lease of {name}")
    try:
        yield name
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        await core.delete_node(name)
