"""Only our node daemons can publish an away address: whoever else may label Nodes or write pod status
aims the router nowhere, on the real plane, while legitimate traffic flows.

All traffic is away, on two replicas of a local node. Three attackers, each ignored with a Warning
Event while no request of the load fails and the decoy they point at gets nothing:

1. A Node labelled like ours (`node-restriction.kubernetes.io/vk-provider=true`: whoever may create
   or label Nodes) with a pod of the Offload bound to it, whose status a ServiceAccount holding
   `pods/status` (as many operators do) writes: Ready, a decoy address, and the seal of a real away
   pod copied beside it. Before seals, the router took any pod of a node with our label
   (UnverifiedTrafficAddress now).
2. The same ServiceAccount rewrites a real away pod's address to the decoy, again and again, as its
   node puts it back (UnverifiedTrafficAddress for every rewrite the router sees; the node restores the
   address and the pod serves again).
3. A sealed marker for S3: a pod on the node labelled like ours whose address, marker
   (`aws-sigv4; service=s3`) and seal are all as one of our nodes would write them had its provider
   asked the router to sign for S3 (the test holds the key, as our nodes do). The seal verifies; the
   router still signs for SageMaker's runtime only (TrafficAuthRefused).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from tests.integration.all_away import (
    ONE_STEP_AWAY,
    away_pods,
    condition,
    describe,
    flip_all_away,
    load,
    more_requests,
    router_document,
    router_log_lines,
    wait_for_healthy_checks,
    warnings_on,
)
from tests.integration.daemons import TRAFFIC_KEY_SECRET
from tests.integration.identities import account_with_rules
from tests.integration.migration_rig import NAME, Rig, RigFor, router_route
from tests.integration.test_router_trust import decoy
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, failures
from vk_devtools.devcluster import cluster
from vk_provider.kit.kube import KubeApi
from vk_provider.kit.traffic_signature import keys_of, seal
from vk_provider.offload.names import (
    OFFLOAD_LABEL,
    TRAFFIC_ADDRESS_CONDITION,
    TRAFFIC_AUTH_CONDITION,
    TRAFFIC_AUTH_REFUSED_REASON,
    TRAFFIC_SIGNATURE_CONDITION,
    UNVERIFIED_TRAFFIC_ADDRESS_REASON,
    VIRTUAL_NODE_LABEL,
    VIRTUAL_NODE_LABEL_VALUE,
)

pytestmark = pytest.mark.usefixtures("traffic_rbac")

STATUS_WRITER = "status-writer"
IGNORED = "vk_provider_router_ignored_objects"
S3_MARKER = "aws-sigv4; service=s3; region=eu-west-1"
MORE_REQUESTS = 60
"""Requests the load must complete after each attack is seen: a few seconds of traffic at 20/s."""
REWRITE_INTERVAL_SECONDS = 0.2
"""How often the second attacker rewrites the address its node keeps putting back."""


STATUS_WRITER_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
]
"""What the second attacker holds: it may read pods and write their status, nothing else."""


def published(kind: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": "Published", "message": message}


async def stray_away_pod(
    api: KubeApi,
    writer: KubeApi,
    namespace: str,
    *,
    name: str,
    node: str,
    conditions_of: Callable[[str], list[dict[str, Any]]],
) -> str:
    """A pod of the Offload bound to `node`, made Running and Ready by the status writer with the
    conditions `conditions_of` its UID gives (no kubelet runs there to say otherwise); its UID."""
    created = await api.create(
        f"/api/v1/namespaces/{namespace}/pods",
        {
            "metadata": {"name": name, "labels": {OFFLOAD_LABEL: NAME}},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "example/app:1"}]},
        },
    )
    uid = str(created["metadata"]["uid"])
    ready = [{"type": kind, "status": "True"} for kind in ("Ready", "ContainersReady")]
    await writer.patch(
        f"/api/v1/namespaces/{namespace}/pods/{name}/status",
        {"status": {"phase": "Running", "conditions": [*ready, *conditions_of(uid)]}},
    )
    return uid


async def event_of(rig: Rig, uid: str, reason: str) -> list[dict[str, Any]]:
    found = await wait_for(
        lambda: warnings_on(rig, uid, reason),
        timeout_seconds=30,
        what=f"the router's {reason} Event:\n{rig.router.log_tail(20)}",
    )
    assert found is not None
    return found


async def away_usable(rig: Rig) -> int:
    route = await router_route(rig)
    return 0 if route is None else int(route["endpoints"]["away"]["usable"])


async def test_forged_addresses_get_nothing_whoever_may_label_nodes_or_write_pod_status(
    kube_api: client.ApiClient,
    control_plane: cluster.ClusterState,
    namespace: str,
    rig_for: RigFor,
    tmp_path: Path,
) -> None:
    app, decoy_hits = decoy()
    impostor_node = f"impostor-{uuid.uuid4().hex[:6]}"
    async with TestServer(app, host="127.0.0.1") as decoy_server, rig_for(ONE_STEP_AWAY) as rig:
        decoy_url = str(decoy_server.make_url("")).rstrip("/")
        writer = await account_with_rules(
            kube_api,
            control_plane,
            namespace,
            STATUS_WRITER,
            rules=STATUS_WRITER_RULES,
            path=tmp_path / "writer.kubeconfig",
        )
        labels = {VIRTUAL_NODE_LABEL: VIRTUAL_NODE_LABEL_VALUE, "type": "virtual-kubelet"}
        await rig.api.create("/api/v1/nodes", {"metadata": {"name": impostor_node, "labels": labels}})
        try:
            async with load(rig, rate=20) as generator:
                await flip_all_away(rig)
                await wait_for_healthy_checks(rig, 2)
                results = await _attack(rig, writer, generator, impostor_node, decoy_url)
                await generator.stop()
        finally:
            await writer.close()
            for name in ("impostor", "s3-impostor"):
                await rig.api.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": 0})
            await rig.api.delete(f"/api/v1/nodes/{impostor_node}")
    outcomes = generator.outcomes
    assert not failures(outcomes), describe(failures(outcomes))
    assert decoy_hits == [], decoy_hits
    sides = {rig.side_of(outcome.served_by) for outcome in outcomes}
    assert "unknown" not in sides, sides  # the decoy answers as "decoy/decoy"
    for reason, name, events, words in results:
        for event in events:
            assert event["type"] == "Warning"
            assert words in str(event["message"]), event["message"]
        # Routers of other tests that watch the whole cluster may warn too: this router's log says
        # it warned, once for a pod that stayed forged (once per rewrite it saw for the real one).
        warned = router_log_lines(rig, reason, f"{namespace}/{name}:")
        assert len(warned) == 1 if "impostor" in name else len(warned) >= 1, warned
    print(
        f"{len(outcomes)} requests, 0 failed, 0 to the decoy;",
        "; ".join(f"{name}: {reason}: {events[0]['message']}" for reason, name, events, _ in results),
    )


async def _attack(
    rig: Rig, writer: KubeApi, generator: LoadGenerator, node: str, decoy_url: str
) -> list[tuple[str, str, list[dict[str, Any]], str]]:
    """The three attacks in turn, each followed by more traffic; (reason, name, Events, words each
    Event must hold) of each pod the router warned about."""
    namespace = rig.namespace
    real = (await away_pods(rig))[0]
    real_name, real_uid = real["metadata"]["name"], real["metadata"]["uid"]
    real_address = condition(real, TRAFFIC_ADDRESS_CONDITION)["message"]
    copied_seal = condition(real, TRAFFIC_SIGNATURE_CONDITION)["message"]
    results = []

    # 1. A node labelled like ours, a pod there with a decoy address and a copied seal.
    uid = await stray_away_pod(
        rig.api,
        writer,
        namespace,
        name="impostor",
        node=node,
        conditions_of=lambda _uid: [
            published(TRAFFIC_ADDRESS_CONDITION, decoy_url),
            published(TRAFFIC_SIGNATURE_CONDITION, copied_seal),
        ],
    )
    events = await event_of(rig, uid, UNVERIFIED_TRAFFIC_ADDRESS_REASON)
    results.append((UNVERIFIED_TRAFFIC_ADDRESS_REASON, "impostor", events, "does not match"))
    metrics = await router_document(rig, "metrics")
    assert f'{IGNORED}{{reason="{UNVERIFIED_TRAFFIC_ADDRESS_REASON}"}} 1.0' in metrics, metrics
    await more_requests(generator, MORE_REQUESTS)

    # 2. The real pod's address rewritten through pods/status, until the router has said so.
    status_path = f"/api/v1/namespaces/{namespace}/pods/{real_name}/status"
    rewrites = 0
    deadline = time.monotonic() + 30
    while not await warnings_on(rig, real_uid, UNVERIFIED_TRAFFIC_ADDRESS_REASON):
        assert time.monotonic() < deadline, f"no Event after {rewrites} rewrites:\n{rig.router.log_tail(20)}"
        await writer.patch(
            status_path, {"status": {"conditions": [published(TRAFFIC_ADDRESS_CONDITION, decoy_url)]}}
        )
        rewrites += 1
        await asyncio.sleep(REWRITE_INTERVAL_SECONDS)  # an attacker's pace, not a wait (noqa: sleep-ok)

    async def restored() -> bool:
        pod = await rig.api.get(f"/api/v1/namespaces/{namespace}/pods/{real_name}")
        return (
            condition(pod, TRAFFIC_ADDRESS_CONDITION)["message"] == real_address
            and await away_usable(rig) == 2
        )

    await wait_for(
        restored, timeout_seconds=30, what="the node to restore the address and the router to use it"
    )
    events = await event_of(rig, real_uid, UNVERIFIED_TRAFFIC_ADDRESS_REASON)
    results.append((UNVERIFIED_TRAFFIC_ADDRESS_REASON, real_name, events, "does not match"))
    await more_requests(generator, MORE_REQUESTS)

    # 3. A marker for S3 under a seal that verifies: refused for the service, not for the seal.
    key = keys_of(await rig.api.get(_secret_path()))[0]
    uid = await stray_away_pod(
        rig.api,
        writer,
        namespace,
        name="s3-impostor",
        node=node,
        conditions_of=lambda uid: [
            published(TRAFFIC_ADDRESS_CONDITION, decoy_url),
            published(TRAFFIC_AUTH_CONDITION, S3_MARKER),
            published(TRAFFIC_SIGNATURE_CONDITION, seal(key, uid=uid, address=decoy_url, marker=S3_MARKER)),
        ],
    )
    events = await event_of(rig, uid, TRAFFIC_AUTH_REFUSED_REASON)
    assert not await warnings_on(rig, uid, UNVERIFIED_TRAFFIC_ADDRESS_REASON)  # its seal verified
    results.append((TRAFFIC_AUTH_REFUSED_REASON, "s3-impostor", events, "'s3'"))
    await more_requests(generator, MORE_REQUESTS)
    return results


def _secret_path() -> str:
    namespace, name = TRAFFIC_KEY_SECRET.split("/")
    return f"/api/v1/namespaces/{namespace}/secrets/{name}"
