"""A migration rig with all traffic away: what the router's trust and outage tests start from.

The Offload goes away in one step (weight 100, home scaled to 0), as the migration tests' flips end;
the router's `/-/status` and `/-/metrics` are read as an operator would.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from tests.integration.migration_rig import HOST, NAME, Rig, StartNode, build_rig, close_rig
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings, Outcome
from vk_devtools.devcluster import cluster
from vk_provider.offload.names import OFFLOAD_LABEL

ONE_STEP_AWAY = {
    "stepIntervalSeconds": 3,
    "toAwaySteps": [100],
    "gates": {"minRequestsPerInterval": 10},
    "progressDeadlineSeconds": 180,
}


@contextlib.asynccontextmanager
async def all_away_rig(
    *,
    kube_api: client.ApiClient,
    control_plane: cluster.ClusterState,
    namespace: str,
    start_node: StartNode,
    folder: Path,
) -> AsyncIterator[Rig]:
    """A rig whose Offload has just moved all traffic away (weight 100, home at 0 replicas)."""
    rig = await build_rig(
        kube_api=kube_api,
        control_plane=control_plane,
        namespace=namespace,
        start_node=start_node,
        folder=folder,
        strategy=ONE_STEP_AWAY,
    )
    try:
        yield rig
    finally:
        await close_rig(rig)


async def flip_all_away(rig: Rig) -> dict[str, Any]:
    await rig.patch_offload({"spec": {"placement": "away"}})
    done = await rig.wait_for_phase("Succeeded", "RolledBack", "Failed", timeout_seconds=180)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert done["status"]["awayWeight"] == 100
    home = await rig.deployment(NAME)
    assert home["spec"]["replicas"] == 0
    return done


def load(rig: Rig, rate: float) -> LoadGenerator:
    return LoadGenerator(
        LoadSettings(url=rig.router_url, host_header=HOST, rate=rate, stream_share=0.3, stream_tokens=4)
    )


def describe(outcomes: list[Outcome]) -> str:
    return "\n".join(
        f"{o.kind} status={o.status} by={o.served_by} failure={o.failure}" for o in outcomes[:10]
    )


async def router_document(rig: Rig, what: str = "status") -> Any:
    """The router's `/-/status` (JSON) or `/-/metrics` (text)."""
    async with aiohttp.ClientSession() as session, session.get(f"{rig.router_url}/-/{what}") as response:
        response.raise_for_status()
        return await response.json() if what == "status" else await response.text()


async def away_pods(rig: Rig) -> list[dict[str, Any]]:
    listing = await rig.api.get(
        f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": f"{OFFLOAD_LABEL}={NAME}"}
    )
    items: list[dict[str, Any]] = listing.get("items") or []
    return items


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition `kind` of a pod or node ({} when it has none)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), {})


async def wait_for_healthy_checks(rig: Rig, count: int) -> dict[str, Any]:
    """Until the router's active checks pass for `count` away endpoints; returns its status."""

    async def passing() -> dict[str, Any] | None:
        document: dict[str, Any] = await router_document(rig)
        healthy = [url for url, check in document["active_checks"].items() if check["healthy"]]
        return document if len(healthy) >= count else None

    return await wait_for(
        passing,
        timeout_seconds=60,
        what=f"the router's active checks to pass for {count} away endpoints:\n{rig.router.log_tail(20)}",
    )
