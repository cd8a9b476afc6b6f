"""Another virtual-kubelet's node (AKS's virtual node, ACI) is not ours: nothing goes to it.

Beside the rig's nodes a Node like AKS's virtual node is registered straight through the API (labels
`type=virtual-kubelet` and the rig's away role, taint `virtual-kubelet.io/provider=azure:NoSchedule`,
Ready, with GPUs), kept Ready by renewing its Lease. The Offload is given what the old CRD default
stored (a toleration of `virtual-kubelet.io/provider`) and a selector both nodes match; it flips all
away under load: every away pod lands on our node (the stored toleration now reads as ours, and the
foreign node's taint is not tolerated), and no request fails. Then a pod of the Offload is bound to the
foreign node and its status says Running with a traffic address (as our nodes publish it, in a status
condition) that points at a decoy: the router leaves it out of its table (its `/-/status` does not
list it, the decoy gets nothing) and posts one Warning Event on it naming the node, not one per resync.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from tests.integration.all_away import (
    ONE_STEP_AWAY,
    away_pods,
    describe,
    flip_all_away,
    load,
    more_requests,
    router_document,
    router_log_lines,
    wait_for_healthy_checks,
    warnings_on,
)
from tests.integration.migration_rig import NAME, Rig, RigFor
from tests.integration.nodes import healthy_node
from tests.integration.test_router_trust import decoy
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, failures
from vk_provider.kit.kube import MERGE_PATCH
from vk_provider.offload.names import (
    FOREIGN_NODE_REASON,
    OFFLOAD_LABEL,
    TRAFFIC_ADDRESS_CONDITION,
    VIRTUAL_NODE_LABEL,
)

AKS_TAINT = {"key": "virtual-kubelet.io/provider", "value": "azure", "effect": "NoSchedule"}
AKS_CAPACITY = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}
OLD_DEFAULT_TOLERATION = {"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}
ROLE = "vk-provider.dev/role"
INTRUDER = "intruder"

pytestmark = pytest.mark.usefixtures("traffic_rbac")


async def aks_like_node_labels(rig: Rig) -> dict[str, str]:
    """The generic virtual-kubelet labels, and the rig's away role: the Offload's selector matches."""
    away = await rig.api.get(f"/api/v1/nodes/{rig.away.node_name}")
    return {"type": "virtual-kubelet", "kubernetes.io/role": "agent", ROLE: away["metadata"]["labels"][ROLE]}


def bound_pod(name: str, node: str) -> dict[str, Any]:
    """A pod of the Offload (its label) bound to `node`, as if scheduled there."""
    return {
        "metadata": {"name": name, "labels": {OFFLOAD_LABEL: NAME}},
        "spec": {
            "nodeName": node,
            "tolerations": [AKS_TAINT | {"operator": "Equal"}],
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "server", "image": "vk-provider/tokens"}],
        },
    }


def running_with_address(address: str) -> dict[str, Any]:
    """The status our node daemons publish for a serving away pod: Running, Ready, the traffic address."""
    ready = [
        {"type": kind, "status": "True"}
        for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    published = {
        "type": TRAFFIC_ADDRESS_CONDITION,
        "status": "True",
        "reason": "Published",
        "message": address,
    }
    return {"status": {"phase": "Running", "podIP": "198.18.0.9", "conditions": [*ready, published]}}


async def test_nothing_goes_to_another_virtual_kubelets_node(
    rig_for: RigFor, namespace: str, kube_api: client.ApiClient
) -> None:
    app, decoy_hits = decoy()
    async with TestServer(app, host="127.0.0.1") as decoy_server, rig_for(ONE_STEP_AWAY) as rig:
        decoy_url = str(decoy_server.make_url("")).rstrip("/")
        foreign_node = healthy_node(
            kube_api,
            labels=await aks_like_node_labels(rig),
            taints=[AKS_TAINT],
            capacity=AKS_CAPACITY,
            prefix="virtual-node-aci-linux",
        )
        async with foreign_node as foreign:
            generator, placed, events = await _flip_away_beside(rig, foreign, decoy_url)
    outcomes = generator.outcomes
    assert not failures(outcomes), describe(failures(outcomes))
    assert decoy_hits == [], decoy_hits
    assert {rig.side_of(outcome.served_by) for outcome in outcomes} <= {"home", "away"}
    for event in events:
        assert event["type"] == "Warning"
        assert foreign in str(event["message"])
        assert VIRTUAL_NODE_LABEL in str(event["message"])
    # Routers of other tests that watch the whole cluster may warn too: this router's log says it
    # warned exactly once.
    ours = router_log_lines(rig, FOREIGN_NODE_REASON, INTRUDER)
    assert len(ours) == 1, ours
    print(
        f"{len(outcomes)} requests, 0 failed, 0 to the decoy; away pods on {sorted(set(placed.values()))}; "
        f"event: {events[0]['message']}"
    )


async def _flip_away_beside(
    rig: Rig, foreign: str, decoy_url: str
) -> tuple[LoadGenerator, dict[str, str], list[dict[str, Any]]]:
    """Flip away under load with the old default toleration; then bind the intruder to `foreign`.
    Returns the load's generator (stopped), where the away pods went, and the router's Events."""
    # What an Offload created under the old CRD default holds, with a selector both nodes match.
    selector = await aks_like_node_labels(rig)
    del selector["kubernetes.io/role"]
    await rig.patch_offload(
        {"spec": {"away": {"nodeSelector": selector, "tolerations": [OLD_DEFAULT_TOLERATION]}}}
    )
    async with load(rig, rate=20) as generator:
        await flip_all_away(rig)
        await wait_for_healthy_checks(rig, 2)
        placed: dict[str, str] = {
            pod["metadata"]["name"]: pod["spec"].get("nodeName") for pod in await away_pods(rig)
        }
        assert set(placed.values()) == {rig.away.node_name}, placed

        path = f"/api/v1/namespaces/{rig.namespace}/pods/{INTRUDER}"
        created = await rig.api.create(
            f"/api/v1/namespaces/{rig.namespace}/pods", bound_pod(INTRUDER, foreign)
        )
        uid = created["metadata"]["uid"]
        await rig.api.patch(path + "/status", running_with_address(decoy_url), content_type=MERGE_PATCH)
        events = await wait_for(
            lambda: warnings_on(rig, uid, FOREIGN_NODE_REASON),
            timeout_seconds=30,
            what=f"the router's {FOREIGN_NODE_REASON} Event:\n{rig.router.log_tail(20)}",
        )
        # Resyncs: each change of the pod wakes a rebuild that reads it again; no second Event.
        for round_ in range(3):
            await rig.api.patch(
                path, {"metadata": {"annotations": {"touched": str(round_)}}}, content_type=MERGE_PATCH
            )
            # An absence (no second Event) shows only over a window: a second per resync.
            await asyncio.sleep(1)  # one resync window (noqa: sleep-ok)
        document = await router_document(rig)
        assert decoy_url not in document["active_checks"], document["active_checks"]
        (route,) = [r for r in document["routes"] if r["name"] == NAME]
        assert route["endpoints"]["away"]["usable"] == 2, route
        await more_requests(generator, 60)
        await generator.stop()
    # No kubelet will ever confirm its end: deleted at once, before its node goes.
    await rig.api.delete(path, {"gracePeriodSeconds": 0})
    assert events is not None
    return generator, placed, events
