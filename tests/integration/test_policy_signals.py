"""The policy's GPU signals end to end on the real control plane (the rig of `test_policy`): GPU health
through the dcgm-exporter stand-in running as a pod on each pool node, native PodGroups as training
demand, and exporters that cannot be read.

The device plugin's signal (allocatable below capacity) is played by PATCHing the Node's
status.allocatable, as the kubelet would; the pool's node daemons then run with a long status interval
so they do not write their full allocatable back meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.integration.conftest import POLICY_GROUP
from tests.integration.gangs import gang_member, scheduled_condition, working_for
from tests.integration.test_policy import (
    GPU,
    PolicyRig,
    host_of,
    policy_rig,
    training_job,
    wait_for_placement,
)
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import failures
from vk_devtools.standins import dcgm as standin
from vk_provider.kit.kube import MERGE_PATCH, RawObject, resource_path
from vk_provider.policy.names import RESERVED_TAINT_KEY
from vk_provider.policy.podgroups import API_VERSION

pytestmark = [POLICY_GROUP, pytest.mark.integration, pytest.mark.usefixtures("policy_crd")]

UNHEALTHY_TAINT_KEY = "gpu.vk-provider.dev/unhealthy"
GANG = "pretrain"
TRAINING_SECONDS = 300
"""How long the health test's training Job would run: far past the story it holds the service away
for, which deletes it instead."""
RESERVATION_TOLERATION = {"key": RESERVED_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def exporter_selector(rig: PolicyRig) -> dict[str, Any]:
    return {"matchLabels": {"vk-provider.dev/test-exporter": rig.tag}}


async def pod_ip_when_ready(rig: PolicyRig, name: str, *, ready: bool = True) -> str:
    path = f"{resource_path('v1', 'pods', namespace=rig.namespace)}/{name}"

    async def address() -> str | None:
        pod = await rig.api.get(path)
        status = pod.get("status") or {}
        is_ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
        )
        running = status.get("phase") == "Running"
        return status.get("podIP") if running and (is_ready or not ready) else None

    return str(await wait_for(address, timeout_seconds=60, what=f"pod {name} running with an address"))


async def start_exporters(rig: PolicyRig, nodes: list[str]) -> dict[str, str]:
    """A stand-in exporter pod on each of `nodes` (4 GPUs, the test's exporter label); node -> its URL."""
    labels = exporter_selector(rig)["matchLabels"]
    pods = resource_path("v1", "pods", namespace=rig.namespace)
    names = {node: f"dcgm-{node}" for node in nodes}
    for node, name in names.items():
        await rig.api.create(pods, standin.exporter_pod(name, node, gpus=4, labels=labels))
    return {
        node: f"http://{await pod_ip_when_ready(rig, name)}:{standin.EXPORTER_PORT}"
        for node, name in names.items()
    }


def exporter_health(rig: PolicyRig, **settings: Any) -> dict[str, Any]:
    return {
        "dcgmExporter": {"namespace": rig.namespace, "selector": exporter_selector(rig)},
        **settings,
    }


async def unhealthy_taint(rig: PolicyRig, node: str) -> dict[str, Any] | None:
    found = await rig.node(node)
    return next((t for t in found["spec"].get("taints") or () if t["key"] == UNHEALTHY_TAINT_KEY), None)


async def node_events(rig: PolicyRig, reason: str, node: str) -> list[RawObject]:
    return [e for e in await rig.events(reason, "Node") if e["involvedObject"]["name"] == node]


async def pool_node_status(rig: PolicyRig, node: str) -> dict[str, Any]:
    status = (await rig.policy()).get("status") or {}
    return next(n for n in (status.get("pool") or {}).get("nodes") or () if n["name"] == node)


async def pool_node_reason(rig: PolicyRig, node: str, reason: str) -> dict[str, Any] | None:
    """The node's entry in the policy's status once it gives `reason`, else None."""
    entry = await pool_node_status(rig, node)
    return entry if entry.get("reason") == reason else None


async def set_allocatable(rig: PolicyRig, node: str, gpus: int) -> None:
    await rig.api.patch(
        f"/api/v1/nodes/{node}/status",
        {"status": {"allocatable": {GPU: str(gpus)}}},
        content_type=MERGE_PATCH,
    )


async def test_a_hot_then_failed_then_short_gpu_taints_its_node_and_the_service_comes_home_onto_healthy_gpus(
    rig_args: dict[str, Any],
) -> None:
    async with (
        policy_rig(services={"chat": 4}, node_status_interval_seconds=3600, **rig_args) as rig,
        rig.load(host_of("chat")) as generator,
    ):
        healthy, sick = rig.pool[0].node_name, rig.pool[1].node_name
        urls = await start_exporters(rig, [healthy, sick])
        # Temperature is degrading: tainted at once (no persistence) and within the cap (1 of 2 nodes).
        await rig.create_policy(
            health=exporter_health(
                rig, healthyForSeconds=5, xidLookbackSeconds=15, degradingForSeconds=0, maxNonFatalShare=0.5
            )
        )
        await rig.api.create(
            # Longer than the health story below takes even on a slow machine: the Job is deleted
            # once the node is short (the service comes home as demand ends, however it ends).
            f"/apis/batch/v1/namespaces/{rig.namespace}/jobs",
            training_job(rig, "pretrain", 6, TRAINING_SECONDS),
        )
        await wait_for_placement(rig, "chat", "away")

        async def taint_valued(value: str) -> dict[str, Any] | None:
            taint = await unhealthy_taint(rig, sick)
            return taint if taint is not None and taint["value"] == value else None

        changed = time.monotonic()
        await standin.set_gpu(urls[sick], 2, temperature=85)
        await wait_for(
            lambda: taint_valued("Temperature"),
            timeout_seconds=30,
            what=lambda: f"the Temperature taint:\n{rig.log()}",
        )
        hot_tainted = time.monotonic() - changed
        await wait_for(
            lambda: node_events(rig, "NodeUnhealthy", sick), timeout_seconds=30, what="a NodeUnhealthy Event"
        )
        hot_event = time.monotonic() - changed
        # The taint and the Event come before the pass writes the policy's status: wait for it too.
        entry = await wait_for(
            lambda: pool_node_reason(rig, sick, "Temperature"), timeout_seconds=30, what="status reason"
        )
        assert (entry["temperatureCelsius"], entry["healthy"]) == (85, False), entry
        assert "reason" not in await pool_node_status(rig, healthy)
        assert await unhealthy_taint(rig, healthy) is None

        changed = time.monotonic()
        await standin.set_gpu(urls[sick], 2, temperature=50)
        await standin.set_gpu(urls[sick], 1, xid=79)  # fell off the bus
        await wait_for(
            lambda: taint_valued("Xid"), timeout_seconds=30, what=lambda: f"the Xid taint:\n{rig.log()}"
        )
        xid_tainted = time.monotonic() - changed
        await wait_for(
            lambda: pool_node_reason(rig, sick, "Xid"), timeout_seconds=30, what="status reason Xid"
        )

        # The exporter reports no Xid any more, the device plugin reports a GPU gone: once the Xid is
        # older than xidLookbackSeconds (15 s), allocatable below capacity is the reason.
        changed = time.monotonic()
        await standin.set_gpu(urls[sick], "all", xid=0)
        await set_allocatable(rig, sick, 3)
        await wait_for(
            lambda: taint_valued("DevicePluginUnhealthy"),
            timeout_seconds=60,
            what=lambda: f"the DevicePluginUnhealthy taint:\n{rig.log()}",
        )
        short_tainted = time.monotonic() - changed
        job_path = f"/apis/batch/v1/namespaces/{rig.namespace}/jobs/pretrain"
        job = await rig.api.get(job_path)
        assert not (job.get("status") or {}).get("succeeded"), "the Job ended before the node was short"

        # Training is over: the demand ends now rather than when the Job's pods would have finished.
        await rig.api.delete(job_path, body={"propagationPolicy": "Background"})
        await wait_for_placement(rig, "chat", "home")
        pods = (
            await rig.api.get(f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": "app=chat"})
        )["items"]
        placed = [pod["spec"].get("nodeName") for pod in pods if not pod["metadata"].get("deletionTimestamp")]
        assert placed == [healthy] * 4, placed
        assert (await taint_valued("DevicePluginUnhealthy")) is not None
        await generator.stop()
        failed = failures(generator.outcomes)
        assert not failed, [(o.kind, o.status, o.failure) for o in failed[:10]]

        restored = time.monotonic()
        await set_allocatable(rig, sick, 4)

        async def untainted() -> bool:
            return await unhealthy_taint(rig, sick) is None

        await wait_for(
            untainted, timeout_seconds=60, what=lambda: f"the unhealthy taint lifted:\n{rig.log()}"
        )
        lifted = time.monotonic() - restored
        assert lifted >= 5, f"lifted {lifted:.1f} s after the node was healthy, before healthyForSeconds (5)"
        # The Event is posted by the recorder after the taint's patch, asynchronously: wait for it too.
        await wait_for(
            lambda: node_events(rig, "NodeHealthy", sick), timeout_seconds=30, what="a NodeHealthy Event"
        )
        assert "Traceback" not in rig.controller.log_tail(400)
        print(
            f"85 °C -> Temperature taint {hot_tainted:.1f} s, NodeUnhealthy Event {hot_event:.1f} s; "
            f"Xid 79 -> Xid taint {xid_tainted:.1f} s; allocatable 3 (Xid cleared) -> DevicePluginUnhealthy "
            f"{short_tainted:.1f} s (lookback 15 s); allocatable restored -> taint lifted {lifted:.1f} s "
            f"(healthyForSeconds 5); {len(generator.outcomes)} requests, 0 failed"
        )


async def test_an_unschedulable_native_pod_group_moves_the_service_out_and_is_then_scheduled(
    rig_args: dict[str, Any],
) -> None:
    async with policy_rig(services={"chat": 4}, **rig_args) as rig, rig.load(host_of("chat")) as generator:
        await rig.create_policy(demand={"podGroups": {"enabled": True}})
        groups = resource_path(API_VERSION, "podgroups", namespace=rig.namespace)
        pods = resource_path("v1", "pods", namespace=rig.namespace)
        created = time.monotonic()
        # 4 of the 8 GPUs are free; the gang needs 6 all at once, so the scheduler places none of it.
        await rig.api.create(
            groups, {"metadata": {"name": GANG}, "spec": {"schedulingPolicy": {"gang": {"minCount": 6}}}}
        )
        for rank in range(6):
            await rig.api.create(
                pods, gang_member(f"rank-{rank}", GANG, rig.pool_label, [RESERVATION_TOLERATION])
            )

        async def flipped() -> bool:
            return str((await rig.offload("chat"))["spec"]["placement"]) == "away"

        await wait_for(
            flipped, timeout_seconds=120, what=lambda: f"the policy to flip chat out:\n{rig.log()}"
        )
        flip_after = time.monotonic() - created
        demand = (await rig.policy())["status"]["demand"]
        assert [(g["kind"], g["name"], g["gpus"]) for g in demand["gangs"]] == [("PodGroup", GANG, 6)], demand
        assert (await rig.condition("TrainingDemand"))["status"] == "True"
        members = (await rig.api.get(pods, query={"labelSelector": f"gang={GANG}"}))["items"]
        assert not [p["metadata"]["name"] for p in members if p["spec"].get("nodeName")], "a partial gang"

        async def scheduled() -> bool:
            group = await rig.api.get(f"{groups}/{GANG}")
            return scheduled_condition(group).get("status") == "True"

        await wait_for(scheduled, timeout_seconds=180, what=lambda: f"the PodGroup scheduled:\n{rig.log()}")
        scheduled_after = time.monotonic() - created

        # The PodGroup's condition can be written a moment before the last binding lands.
        async def all_bound() -> list[Any] | None:
            found = (await rig.api.get(pods, query={"labelSelector": f"gang={GANG}"}))["items"]
            return found if len(found) == 6 and all(p["spec"].get("nodeName") for p in found) else None

        members = await wait_for(all_bound, timeout_seconds=30, what="all 6 gang members bound")
        assert {p["spec"]["nodeName"] for p in members} <= {daemon.node_name for daemon in rig.pool}
        for daemon in rig.pool:
            node = await rig.node(daemon.node_name)
            assert any(t["key"] == RESERVED_TAINT_KEY for t in node["spec"].get("taints") or ()), node["spec"]

        async def demand_gone() -> dict[str, Any] | None:
            condition = await rig.condition("TrainingDemand")
            return condition if condition.get("status") == "False" else None

        await wait_for(demand_gone, timeout_seconds=60, what=lambda: f"TrainingDemand False:\n{rig.log()}")
        demand_gone_after = time.monotonic() - created
        assert not ((await rig.policy())["status"].get("demand") or {}).get("gangs")
        await wait_for_placement(rig, "chat", "away")
        await generator.stop()
        failed = failures(generator.outcomes)
        assert not failed, [(o.kind, o.status, o.failure) for o in failed[:10]]
        print(
            f"PodGroup created -> chat flipped out {flip_after:.1f} s; -> group scheduled "
            f"{scheduled_after:.1f} s; -> TrainingDemand False {demand_gone_after:.1f} s; "
            f"{len(generator.outcomes)} requests, 0 failed"
        )


async def test_an_unreachable_and_a_malformed_exporter_are_said_and_move_nothing(
    rig_args: dict[str, Any],
) -> None:
    async with policy_rig(services={"chat": 4}, **rig_args) as rig:
        malformed_node, unreachable_node = rig.pool[0].node_name, rig.pool[1].node_name
        urls = await start_exporters(rig, [malformed_node])
        await standin.serve_malformed(urls[malformed_node])
        silent = f"dcgm-silent-{rig.tag}"
        await rig.api.create(
            resource_path("v1", "pods", namespace=rig.namespace),
            {
                "metadata": {"name": silent, "labels": exporter_selector(rig)["matchLabels"]},
                "spec": {
                    "nodeName": unreachable_node,
                    "tolerations": [{"operator": "Exists"}],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {  # has the exporter's labels, listens on nothing
                            "name": "exporter",
                            "image": "local",
                            "command": working_for(600),
                        }
                    ],
                },
            },
        )
        await pod_ip_when_ready(rig, silent, ready=False)
        await rig.create_policy(health=exporter_health(rig, healthyForSeconds=5))
        created = time.monotonic()

        async def metrics_condition(status: str, reason: str) -> dict[str, Any] | None:
            condition = await rig.condition("GpuMetricsAvailable")
            wanted = condition.get("status") == status and condition.get("reason") == reason
            return condition if wanted else None

        async def both_named() -> dict[str, Any] | None:
            condition = await metrics_condition("False", "ExporterUnavailable")
            named = (
                condition
                and f"dcgm-{malformed_node}" in condition["message"]
                and silent in condition["message"]
            )
            return condition if named else None

        condition = await wait_for(
            both_named,
            timeout_seconds=60,
            what=lambda: f"GpuMetricsAvailable False naming both:\n{rig.log()}",
        )
        assert condition is not None
        said_after = time.monotonic() - created
        assert "malformed metrics" in condition["message"], condition
        assert "unreachable" in condition["message"], condition
        events = await wait_for(
            lambda: rig.events("ExporterUnavailable", "OffloadPolicy"),
            timeout_seconds=30,
            what="an ExporterUnavailable Event on the policy",
        )
        assert {e["type"] for e in events} == {"Warning"}, events
        # Several policy intervals (1 s) past flipOutAfterSeconds (3 s): time for a wrong move to show.
        await asyncio.sleep(6)  # sampling that nothing happens (noqa: sleep-ok)
        for daemon in rig.pool:
            assert await unhealthy_taint(rig, daemon.node_name) is None
            assert "reason" not in await pool_node_status(rig, daemon.node_name)
        assert (await rig.offload("chat"))["spec"]["placement"] == "home"
        assert not await rig.events("FlipOutStarted", "OffloadPolicy")
        assert (await rig.condition("TrainingDemand")).get("status") != "True"
        assert rig.controller.alive()
        assert "Traceback" not in rig.controller.log_tail(400)

        repaired = time.monotonic()
        await standin.serve_malformed(urls[malformed_node], False)
        await rig.api.delete(f"{resource_path('v1', 'pods', namespace=rig.namespace)}/{silent}")
        await wait_for(
            lambda: metrics_condition("True", "Scraped"),
            timeout_seconds=60,
            what=lambda: f"GpuMetricsAvailable True/Scraped again:\n{rig.log()}",
        )
        scraped_after = time.monotonic() - repaired
        assert (await pool_node_status(rig, malformed_node))["temperatureCelsius"] == 45
        assert "Traceback" not in rig.controller.log_tail(400)
        print(
            f"policy created -> GpuMetricsAvailable False naming both exporters {said_after:.1f} s; "
            f"stand-in repaired, silent pod deleted -> True/Scraped {scraped_after:.1f} s; "
            f"condition was: {condition['message']}"
        )
