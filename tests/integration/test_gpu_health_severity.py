"""GPU health severity and the blast-radius cap on the real plane (the rig of `test_policy`, with the
dcgm-exporter stand-in as a pod on each of four pool nodes), under inference load throughout.

One policy, one setup, the scenarios in turn: a pending row remap is reported and taints nothing, a remap
failure taints at once, an informational Xid taints nothing, a fatal Xid taints; then three of the four
nodes turn hot at once with the cap at 25%: one is tainted (the one whose signal has lasted longest),
and a condition and an Event name the other two; last, an InfiniBand port of the fourth node, read by
the real interconnect exporter from a stand-in sysfs tree, counts symbol errors: the node is tainted
once they have climbed for degradingForSeconds, and the taint lifts after it has been quiet.

Persistence is short (degradingForSeconds 3) so the whole runs in well under two minutes. A pass
carries out its taints before it writes the status, so once the status reports a finding, a taint it
called for is already there: "no taint" is checked then, never after a fixed wait.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.integration.conftest import POLICY_GROUP
from tests.integration.test_policy import PolicyRig, host_of, policy_rig
from tests.integration.test_policy_signals import (
    exporter_health,
    pod_ip_when_ready,
    start_exporters,
    unhealthy_taint,
)
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import failures
from vk_devtools.standins import dcgm as standin
from vk_devtools.standins import interconnect
from vk_devtools.standins.sysfs import SysfsTree
from vk_provider.kit.kube import resource_path

pytestmark = [POLICY_GROUP, pytest.mark.integration, pytest.mark.usefixtures("policy_crd")]

DEGRADING_FOR_SECONDS = 3
HEALTH = {
    "degradingForSeconds": DEGRADING_FOR_SECONDS,
    "healthyForSeconds": 2,
    "xidLookbackSeconds": 4,
    "maxNonFatalShare": 0.25,
}
"""Short clocks; with 4 pool nodes, 0.25 leaves one slot for a non-fatal taint."""


async def node_entry(rig: PolicyRig, node: str) -> dict[str, Any]:
    status = (await rig.policy()).get("status") or {}
    return next(n for n in (status.get("pool") or {}).get("nodes") or () if n["name"] == node)


async def judged_by(rig: PolicyRig, node: str, signal: str, severity: str) -> dict[str, Any] | None:
    """The node's rule in the policy's status once it is `signal` at `severity`, else None."""
    rule = (await node_entry(rig, node)).get("rule") or {}
    return rule if (rule.get("signal"), rule.get("severity")) == (signal, severity) else None


async def tainted_with(rig: PolicyRig, node: str, value: str) -> dict[str, Any] | None:
    taint = await unhealthy_taint(rig, node)
    return taint if taint is not None and taint["value"] == value else None


async def none_tainted(rig: PolicyRig, nodes: list[str]) -> bool:
    return all(await asyncio.gather(*(_untainted(rig, node) for node in nodes)))


async def _untainted(rig: PolicyRig, node: str) -> bool:
    return await unhealthy_taint(rig, node) is None


async def start_interconnect_exporter(rig: PolicyRig, node: str, tree: SysfsTree) -> dict[str, Any]:
    """The real exporter as a pod on `node`, reading `tree` every second; the policy's settings for it."""
    labels = {"vk-provider.dev/test-interconnect": rig.tag}
    pod = interconnect.exporter_pod(f"interconnect-{node}", node, sysfs_root=tree.root, labels=labels)
    await rig.api.create(resource_path("v1", "pods", namespace=rig.namespace), pod)
    await pod_ip_when_ready(rig, pod["metadata"]["name"])
    return {"exporter": {"namespace": rig.namespace, "selector": {"matchLabels": labels}}}


async def climb(tree: SysfsTree, stop: asyncio.Event) -> None:
    """Symbol errors on mlx5_0 port 1, a few every 0.2 s, until told to stop: a link getting worse."""
    while not stop.is_set():
        tree.bump("mlx5_0", 1, "symbol_error", 5)
        try:
            await asyncio.wait_for(stop.wait(), timeout=0.2)
        except TimeoutError:
            continue


async def test_severity_decides_what_taints_and_the_cap_holds_back_the_rest(rig_args: dict[str, Any]) -> None:
    started = time.monotonic()
    async with (
        policy_rig(services={"chat": 2}, pool_gpus=(4, 4, 4, 4), **rig_args) as rig,
        rig.load(host_of("chat")) as generator,
    ):
        nodes = [daemon.node_name for daemon in rig.pool]
        urls = await start_exporters(rig, nodes)
        tree = SysfsTree(rig_args["folder"] / "sys")
        tree.add_port("mlx5_0", 1)
        links = await start_interconnect_exporter(rig, nodes[3], tree)
        await rig.create_policy(health=exporter_health(rig, interconnect=links, **HEALTH))
        pending, failed, app_error, fell_off = nodes

        async def report(what: str, node: str, signal: str, severity: str) -> dict[str, Any]:
            return await wait_for(
                lambda: judged_by(rig, node, signal, severity),
                timeout_seconds=30,
                what=lambda: f"{what} in the status of {node}:\n{rig.log()}",
            )

        # 1. A pending row remap: reported, informational, never tainted.
        await standin.set_gpu(urls[pending], 0, row_remap_pending=True)
        rule = await report("the pending row remap", pending, "RowRemapPending", "Informational")
        assert rule["action"] == "reported"
        assert await unhealthy_taint(rig, pending) is None

        # 2. A row-remap failure: fatal, tainted at once (no persistence to wait out).
        changed = time.monotonic()
        await standin.set_gpu(urls[failed], 1, row_remap_failure=True)
        await wait_for(
            lambda: tainted_with(rig, failed, "RowRemapFailure"),
            timeout_seconds=30,
            what=lambda: f"the RowRemapFailure taint:\n{rig.log()}",
        )
        failure_tainted = time.monotonic() - changed
        rule = await report("the remap failure", failed, "RowRemapFailure", "Fatal")
        assert rule["action"] == "tainted"

        # 3. An application's Xid (13): informational, reported, never tainted.
        await standin.set_gpu(urls[app_error], 2, xid=13)
        rule = await report("Xid 13", app_error, "Xid", "Informational")
        assert rule["detail"] == "GPU 2 raised Xid 13 (informational: graphics engine exception)"
        assert await unhealthy_taint(rig, app_error) is None

        # 4. The GPU fell off the bus (Xid 79): fatal, tainted, the status says by which rule.
        await standin.set_gpu(urls[fell_off], 3, xid=79)
        await wait_for(
            lambda: tainted_with(rig, fell_off, "Xid"),
            timeout_seconds=30,
            what=lambda: f"the Xid taint:\n{rig.log()}",
        )
        rule = await report("Xid 79", fell_off, "Xid", "Fatal")
        assert rule["detail"] == "GPU 3 raised Xid 79 (fatal: GPU fallen off the bus)"
        # The fatal taints took no slot of the cap: nothing was held back for them.
        assert (await rig.condition("HealthCapReached")).get("status") == "False"

        # Everything heals: the taints come off once the Xid is past its lookback and the nodes have
        # been quiet for healthyForSeconds.
        await asyncio.gather(
            standin.set_gpu(urls[pending], 0, row_remap_pending=False),
            standin.set_gpu(urls[failed], 1, row_remap_failure=False),
            standin.set_gpu(urls[app_error], 2, xid=0),
            standin.set_gpu(urls[fell_off], 3, xid=0),
        )
        await wait_for(
            lambda: none_tainted(rig, nodes),
            timeout_seconds=60,
            what=lambda: f"every unhealthy taint lifted:\n{rig.log()}",
        )

        # 5. Three of the four nodes hot at once (degrading), the cap at 25% of 4 nodes: one slot.
        hot = nodes[:3]
        await asyncio.gather(*(standin.set_gpu(urls[node], "all", temperature=85) for node in hot))

        async def cap_reached() -> dict[str, Any] | None:
            condition = await rig.condition("HealthCapReached")
            return condition if condition.get("status") == "True" else None

        condition = await wait_for(
            cap_reached, timeout_seconds=30, what=lambda: f"HealthCapReached True:\n{rig.log()}"
        )
        taints = {node: await unhealthy_taint(rig, node) for node in nodes}
        pulled = [node for node, taint in taints.items() if taint is not None]
        assert len(pulled) == 1, taints
        assert taints[pulled[0]] is not None
        assert taints[pulled[0]]["value"] == "Temperature"
        held_back = sorted(set(hot) - set(pulled))
        named = condition["message"].rpartition("not pulled: ")[2]
        assert sorted(named.split(", ")) == held_back, condition
        # The slot went to the node whose signal has lasted longest (then by name).
        entries = {node: await node_entry(rig, node) for node in hot}
        first = min(hot, key=lambda node: (entries[node]["rule"]["since"], node))
        assert pulled == [first], entries
        for node in held_back:
            assert entries[node]["rule"]["action"] == "held back"
            assert entries[node]["heldBack"] is True

        async def cap_event() -> list[Any]:
            return [
                event
                for event in await rig.events("HealthCapReached", "OffloadPolicy")
                if all(node in event["message"] for node in held_back)
            ]

        events = await wait_for(cap_event, timeout_seconds=30, what="a HealthCapReached Event")
        assert events[0]["type"] == "Warning"
        assert pulled[0] not in events[0]["message"]

        # Cooled down: the taint lifts, and nothing is held back any more.
        await asyncio.gather(*(standin.set_gpu(urls[node], "all", temperature=45) for node in hot))

        async def within_cap() -> bool:
            return (await rig.condition("HealthCapReached")).get("status") == "False"

        await wait_for(within_cap, timeout_seconds=30, what=lambda: f"HealthCapReached False:\n{rig.log()}")
        await wait_for(
            lambda: none_tainted(rig, nodes),
            timeout_seconds=30,
            what=lambda: f"the Temperature taint lifted:\n{rig.log()}",
        )

        # 6. Symbol errors climbing on an InfiniBand port: Interconnect (degrading) taints the node once
        #    they have climbed for degradingForSeconds, and the taint lifts once the port is quiet.
        flaky = nodes[3]
        stop = asyncio.Event()
        climbing = asyncio.create_task(climb(tree, stop))
        began = time.monotonic()
        try:
            await wait_for(
                lambda: tainted_with(rig, flaky, "Interconnect"),
                timeout_seconds=30,
                what=lambda: f"the Interconnect taint:\n{rig.log()}",
            )
            link_tainted = time.monotonic() - began
            rule = await report("the symbol errors", flaky, "Interconnect", "Degrading")
            assert rule["detail"].startswith("mlx5_0 port 1: "), rule
            assert "symbol errors/s > 0/s" in rule["detail"]
        finally:
            stop.set()
            await climbing
        assert link_tainted >= DEGRADING_FOR_SECONDS, f"tainted {link_tainted:.1f} s after the errors began"
        quiet = time.monotonic()
        await wait_for(
            lambda: none_tainted(rig, [flaky]),
            timeout_seconds=30,
            what=lambda: f"the Interconnect taint lifted:\n{rig.log()}",
        )
        link_lifted = time.monotonic() - quiet

        await generator.stop()
        lost = failures(generator.outcomes)
        assert not lost, [(o.kind, o.status, o.failure) for o in lost[:10]]
        assert "Traceback" not in rig.controller.log_tail(400)
        print(
            f"remap failure -> taint {failure_tainted:.1f} s; cap: pulled {pulled[0]}, held back "
            f"{', '.join(held_back)}; symbol errors -> Interconnect taint {link_tainted:.1f} s "
            f"(degradingForSeconds {DEGRADING_FOR_SECONDS}), quiet -> lifted {link_lifted:.1f} s; "
            f"{len(generator.outcomes)} requests, 0 failed; "
            f"{time.monotonic() - started:.0f} s in all"
        )
