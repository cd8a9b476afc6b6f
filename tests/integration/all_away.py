"""A migration rig with all traffic away: what the router's trust and outage tests start from.

The Offload goes away in one step (weight 100, home scaled to 0), as the migration tests' flips end;
the router's `/-/status` and `/-/metrics` are read as an operator would.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.integration.migration_rig import NAME, Rig
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings, Outcome
from vk_provider.offload.names import OFFLOAD_LABEL

ONE_STEP_AWAY = {
    "stepIntervalSeconds": 3,
    "toAwaySteps": [100],
    "gates": {"minRequestsPerInterval": 10},
    "progressDeadlineSeconds": 180,
}
"""The strategy to pass `rig_for`: all traffic away in one step."""


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
        LoadSettings(url=rig.router_url, host_header=rig.host, rate=rate, stream_share=0.3, stream_tokens=4)
    )


async def served_at_least(generator: LoadGenerator, count: int) -> bool:
    """A `wait_for` probe: the load has had at least `count` answers (or failures)."""
    return len(generator.outcomes) >= count


def describe(outcomes: list[Outcome]) -> str:
    return "\n".join(
        f"{o.kind} status={o.status} by={o.served_by} failure={o.failure}" for o in outcomes[:10]
    )


async def router_document(rig: Rig, what: str = "status") -> Any:
    """The router's `/-/status` (JSON) or `/-/metrics` (text)."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{rig.router_admin_url}/-/{what}") as response,
    ):
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
