"""Traffic survives the away node's daemon being down long enough for the node to go Unknown.

With all traffic away, the away node's daemon is killed (kill -9) and kept down for 90 s: well past
the test plane's 20 s node-monitor grace, so the node lifecycle controller marks the node Unknown and
its pods Ready=False (and taints it unreachable; the away pods tolerate that). The workloads run on,
so the router must keep serving them on its own active checks: 0 failed requests under load
throughout, and its `/-/status` and metrics say it kept the endpoints. Then the daemon comes back, the
node is Ready again, and the router stops relying on its checks.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from kubernetes_asyncio import client

from tests.integration.all_away import (
    ONE_STEP_AWAY,
    away_pods,
    condition,
    describe,
    flip_all_away,
    load,
    router_document,
    wait_for_healthy_checks,
)
from tests.integration.conftest import wait_for_node_ready
from tests.integration.migration_rig import NAME, RigFor
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import failures, window

pytestmark = pytest.mark.usefixtures("traffic_rbac")

OUTAGE_SECONDS = 90.0
RATE = 30.0
REPLICAS = 2


async def test_both_daemons_down_for_90s_loses_no_request(
    kube_api: client.ApiClient, rig_for: RigFor
) -> None:
    async with rig_for(ONE_STEP_AWAY) as rig:
        async with load(rig, rate=RATE) as generator:
            await flip_all_away(rig)
            await wait_for_healthy_checks(rig, REPLICAS)
            before = {pod["metadata"]["uid"] for pod in await away_pods(rig)}
            assert len(before) == REPLICAS

            rig.away.kill()
            killed_at = time.monotonic()
            node_path = f"/api/v1/nodes/{rig.away.node_name}"
            seen_unknown = seen_pods_not_ready = False
            most_kept = 0
            labels = f'name="{NAME}",namespace="{rig.namespace}"'
            gauge = f"vk_provider_router_endpoints_kept_on_active_checks{{{labels}}}"
            gauge_seen = ""
            # Watch the outage as an operator would, for as long as it lasts: the daemon stays down
            # for OUTAGE_SECONDS whatever happens, and every sample is checked.
            while time.monotonic() - killed_at < OUTAGE_SECONDS:
                node = await rig.api.get(node_path)
                seen_unknown |= condition(node, "Ready").get("status") == "Unknown"
                pods = await away_pods(rig)
                seen_pods_not_ready |= bool(pods) and all(
                    condition(pod, "Ready").get("status") == "False" for pod in pods
                )
                document = await router_document(rig)
                (route,) = [r for r in document["routes"] if r["name"] == NAME]
                kept = len(route["away_kept_on_active_checks"])
                if kept > most_kept:
                    most_kept = kept
                    metrics = await router_document(rig, "metrics")
                    gauge_seen = next((line for line in metrics.splitlines() if line.startswith(gauge)), "")
                assert rig.router.alive(), rig.router.log_tail()
                await asyncio.sleep(1)  # the sampling period of the watch above (noqa: sleep-ok)
            outage_end = time.monotonic()
            assert seen_unknown, "the node never went Unknown: the outage was not one"
            assert seen_pods_not_ready, "the node lifecycle controller never marked the away pods not Ready"
            assert most_kept == REPLICAS, document
            assert gauge_seen == f"{gauge} {float(REPLICAS)}", gauge_seen

            rig.away.start()
            await wait_for_node_ready(kube_api, rig.away, timeout_seconds=60)

            async def served_normally() -> bool:
                pods = await away_pods(rig)
                ready = all(condition(pod, "Ready").get("status") == "True" for pod in pods)
                document = await router_document(rig)
                (route,) = [r for r in document["routes"] if r["name"] == NAME]
                return ready and not route["away_kept_on_active_checks"]

            await wait_for(served_normally, timeout_seconds=60, what="the away pods Ready again, as before")
            after = {pod["metadata"]["uid"] for pod in await away_pods(rig)}
            assert after == before, "an away pod was evicted or replaced during the outage"
            await generator.stop()
        metrics = await router_document(rig, "metrics")
    outcomes = generator.outcomes
    during = window(outcomes, killed_at, outage_end)
    served_away = sum(1 for outcome in during if rig.side_of(outcome.served_by) == "away")
    assert not failures(outcomes), describe(failures(outcomes))
    assert len(during) >= RATE * OUTAGE_SECONDS * 0.8, len(during)
    assert served_away == len(during)
    assert 'vk_provider_router_active_checks_total{result="pass"}' in metrics
    # Shown with `pytest -rP`: the measured numbers, for the record.
    print(
        f"{len(outcomes)} requests, 0 failed; {len(during)} during the {OUTAGE_SECONDS:g}s outage, "
        f"all served away; {most_kept} endpoints kept on active checks; {gauge_seen}"
    )
