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


async def warnings_on(rig: Rig, uid: str, reason: str) -> list[dict[str, Any]] | None:
    """The Events `reason` about the object `uid` in the rig's namespace; None while there are none
    (for `wait_for`)."""
    listing = await rig.api.get(
        f"/api/v1/namespaces/{rig.namespace}/events",
        query={"fieldSelector": f"involvedObject.uid={uid},reason={reason}"},
    )
    items: list[dict[str, Any]] = listing.get("items") or []
    return items or None


def router_log_lines(rig: Rig, *words: str) -> list[str]:
    """The lines of this rig's router log holding every one of `words`. Routers of other tests that
    watch the whole cluster may post Events about the same objects: the log tells this router's own."""
    lines = rig.router.log_path.read_text().splitlines()
    return [line for line in lines if all(word in line for word in words)]


async def more_requests(generator: LoadGenerator, count: int, *, timeout_seconds: float = 30) -> None:
    """Until the load has completed `count` more requests than it has now."""
    target = len(generator.outcomes) + count

    async def done() -> bool:
        return len(generator.outcomes) >= target

    await wait_for(done, timeout_seconds=timeout_seconds, what=f"{count} more requests")
