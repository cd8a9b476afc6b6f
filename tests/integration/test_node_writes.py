"""What a pod costs the apiserver, on the real control plane: from bound to Running, the node writes the
pod once (one status write, no metadata write), as the kubelet does, and posts no more Events for it
than the kubelet would.

Counted from the apiserver's own `apiserver_request_total` (by verb, resource and subresource), read
before the pods are created and after the node has gone quiet; the test namespace holds only these
pods, created bound (spec.nodeName), so no scheduler and no controller writes them.

The kubelet, for the same transition of a one-container pod, posts Pulling, Pulled, Created and Started
(Pulled alone, "already present", when it has the image), and the scheduler posts Scheduled: 4 Events of
the kubelet's per container, 5 with the scheduler's.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.integration.conftest import Kubectl
from tests.integration.daemons import NodeDaemon
from tests.integration.nodes import TOLERATE_ALL
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.integration

StartNode = Callable[..., Awaitable[NodeDaemon]]
PODS = 40
KUBELET_EVENTS_PER_CONTAINER = 4
"""Pulling, Pulled, Created, Started: what the kubelet posts for a container it starts."""
QUIET_SECONDS = 3.0
"""How long the node's pod writes must stand still before they are counted as final: a reconcile that
repeats a write does so within a pass or two of the pod's last change."""

_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')

RequestKey = tuple[str, str, str]
"""(verb, resource, subresource) as the apiserver labels its requests."""


def request_totals(kubectl: Kubectl) -> Counter[RequestKey]:
    """The apiserver's requests so far, by verb, resource and subresource, over every code and scope."""
    totals: Counter[RequestKey] = Counter()
    for line in kubectl("get", "--raw", "/metrics").stdout.splitlines():
        sample = _SAMPLE.match(line)
        if sample is None:
            continue
        labels = dict(_LABEL.findall(sample["labels"]))
        key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))
        totals[key] += int(float(sample["value"]))
    return totals


def pod_requests(totals: Counter[RequestKey]) -> Counter[RequestKey]:
    """The writes to pods (any subresource) and to events."""
    return Counter(
        {
            key: count
            for key, count in totals.items()
            if key[1] in ("pods", "events") and key[0] not in ("GET", "LIST", "WATCH")
        }
    )


def bound_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "tolerations": TOLERATE_ALL,
            "containers": [{"name": "main", "image": "example/app:1"}],
        },
    }


async def test_a_pod_costs_one_status_write_and_no_more_events_than_the_kubelet_from_bound_to_running(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, kubectl: Kubectl
) -> None:
    daemon = await start_node("mock", capacity={"cpu": "64", "memory": "256Gi", "pods": str(PODS * 2)})
    core = client.CoreV1Api(kube_api)
    before = pod_requests(request_totals(kubectl))
    for number in range(PODS):
        await core.create_namespaced_pod(namespace, bound_pod(f"p{number}", daemon.node_name))

    async def all_running() -> bool:
        pods = (await core.list_namespaced_pod(namespace)).items
        return len(pods) == PODS and all(pod.status.phase == "Running" for pod in pods)

    await wait_for(all_running, timeout_seconds=120, what=f"{PODS} pods to be Running")

    last: dict[str, Any] = {"sample": None, "since": time.monotonic()}

    async def writes_stand_still() -> Counter[RequestKey] | None:
        sample = pod_requests(request_totals(kubectl))
        if sample != last["sample"]:
            last.update(sample=sample, since=time.monotonic())
            return None
        return sample if time.monotonic() - last["since"] >= QUIET_SECONDS else None

    after = await wait_for(writes_stand_still, timeout_seconds=60, what="the pod writes to stand still")
    delta = after - before
    writes = {
        f"{verb} {resource}/{subresource}".rstrip("/"): count
        for (verb, resource, subresource), count in delta.items()
    }
    print(f"requests for {PODS} pods: {writes}")

    events = (await core.list_namespaced_event(namespace)).items
    ours: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for event in events:
        if event.source and event.source.component == "vk-provider":
            ours[event.involved_object.uid] += event.count or 1
            reasons[event.reason] += event.count or 1
    print(f"events of ours: {len(events)} objects, {sum(ours.values())} counted, by reason {dict(reasons)}")

    assert delta[("POST", "pods", "")] == PODS  # the test's own creations
    assert delta[("PATCH", "pods", "status")] + delta[("PUT", "pods", "status")] == PODS, writes
    assert delta[("PATCH", "pods", "")] + delta[("PUT", "pods", "")] == 0, writes
    assert max(ours.values(), default=0) <= KUBELET_EVENTS_PER_CONTAINER, reasons
