"""What a pod costs the apiserver, on the real control plane: from bound to Running, the node writes the
pod once (one status write, no metadata write), as the kubelet does, and posts no more Events for it
than the kubelet would.

Counted from the apiserver's own `apiserver_request_total` (by verb, resource and subresource), read
before the pods are created and after the node has gone quiet, on a plane of this module's own (the
counters are plane-wide); the test namespace holds only these pods, created bound (spec.nodeName), so
no scheduler and no controller writes them.

The kubelet, for the same transition of a one-container pod, posts Pulling, Pulled, Created and Started
(Pulled alone, "already present", when it has the image), and the scheduler posts Scheduled: 4 Events of
the kubelet's per container, 5 with the scheduler's.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, watch

from tests.integration.conftest import Kubectl, kubectl_for, start_test_plane
from tests.integration.daemons import NodeDaemon
from tests.integration.nodes import TOLERATE_ALL
from tests.integration.runpod_fleet import gpu_pod, runpod_config
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster
from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.kit.placement import CHOSEN_CONDITION, GPU_TYPES_ANNOTATION

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterState]:
    """A plane of this module's own, in place of the run's shared one: these tests count every pod
    and event write the apiserver serves, which on a shared plane includes other workers' tests."""
    directory = tmp_path_factory.mktemp("quiet-plane")
    state = start_test_plane(directory)
    try:
        yield state
    finally:
        cluster.down(directory)


@pytest.fixture(scope="module")
def kubectl(control_plane: cluster.ClusterState) -> Kubectl:
    return kubectl_for(control_plane)


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


async def settled_requests(kubectl: Kubectl, before: Counter[RequestKey]) -> Counter[RequestKey]:
    """The pod and event writes since `before`, once they have stood still for `QUIET_SECONDS`."""
    last: dict[str, Any] = {"sample": None, "since": time.monotonic()}

    async def writes_stand_still() -> Counter[RequestKey] | None:
        sample = pod_requests(request_totals(kubectl))
        if sample != last["sample"]:
            last.update(sample=sample, since=time.monotonic())
            return None
        return sample if time.monotonic() - last["since"] >= QUIET_SECONDS else None

    after = await wait_for(writes_stand_still, timeout_seconds=60, what="the pod writes to stand still")
    delta = after - before
    print("requests:", {" ".join(key).rstrip(): count for key, count in sorted(delta.items())})
    return delta


async def our_events_per_pod(core: client.CoreV1Api, namespace: str) -> Counter[str]:
    """How many times our node reported something about each pod (an Event's count included)."""
    ours: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for event in (await core.list_namespaced_event(namespace)).items:
        if event.source and event.source.component == "vk-provider":
            ours[event.involved_object.uid] += event.count or 1
            reasons[event.reason] += event.count or 1
    print(f"events of ours: {sum(ours.values())} for {len(ours)} pods, by reason {dict(reasons)}")
    return ours


class PodUpdates:
    """Counts the updates of each pod of a namespace its watchers receive (MODIFIED events), by name.

    The watch starts from the resourceVersion of a list made on entry, so it receives every change made
    after entering, however late its stream opens: a watch without one starts whenever the request
    lands, and on a loaded machine the node's first status write of a pod created meanwhile came before
    it, shown as part of an ADDED event, one update short."""

    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        self.counts: Counter[str] = Counter()
        self._core = core
        self._namespace = namespace
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PodUpdates:
        listed = await self._core.list_namespaced_pod(self._namespace)
        self._task = asyncio.create_task(self._watch(listed.metadata.resource_version))
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _watch(self, since: str) -> None:
        async with watch.Watch() as stream:
            async for event in stream.stream(
                self._core.list_namespaced_pod, self._namespace, resource_version=since
            ):
                if event["type"] == "MODIFIED":
                    self.counts[event["object"].metadata.name] += 1


def pod_writes(delta: Counter[RequestKey], subresource: str) -> int:
    return delta[("PATCH", "pods", subresource)] + delta[("PUT", "pods", subresource)]


async def test_a_pod_costs_one_status_write_and_no_more_events_than_the_kubelet_from_bound_to_running(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, kubectl: Kubectl
) -> None:
    daemon = await start_node("mock", capacity={"cpu": "64", "memory": "256Gi", "pods": str(PODS * 2)})
    core = client.CoreV1Api(kube_api)
    before = pod_requests(request_totals(kubectl))
    async with PodUpdates(core, namespace) as updates:
        for number in range(PODS):
            await core.create_namespaced_pod(namespace, bound_pod(f"p{number}", daemon.node_name))

        async def all_running() -> bool:
            pods = (await core.list_namespaced_pod(namespace)).items
            return len(pods) == PODS and all(pod.status.phase == "Running" for pod in pods)

        await wait_for(all_running, timeout_seconds=120, what=f"{PODS} pods to be Running")
        delta = await settled_requests(kubectl, before)
    ours = await our_events_per_pod(core, namespace)

    assert delta[("POST", "pods", "")] == PODS  # the test's own creations
    assert pod_writes(delta, "status") == PODS, delta
    assert pod_writes(delta, "") == 0, delta
    assert set(updates.counts.values()) == {1}, updates.counts  # what every watcher of pods receives
    assert len(ours) == PODS
    assert max(ours.values()) <= KUBELET_EVENTS_PER_CONTAINER


PLACED_PODS = 4


@pytest.fixture
async def runpod_fake() -> AsyncIterator[FakeRunPod]:
    async with FakeRunPod(provisioning_seconds=0.3, starting_seconds=0.3) as fake:
        yield fake


@pytest.fixture
def start_runpod_node(runpod_fake: FakeRunPod, start_node: StartNode, tmp_path: Path) -> StartNode:
    """Starts a `runpod` node on the stand-in. Set up after it, `start_node` is torn down before it: the
    daemon drains its pods while the stand-in still answers."""

    async def start() -> NodeDaemon:
        return await start_node("runpod", provider_config=runpod_config(runpod_fake, tmp_path / "runpod"))

    return start


async def test_a_pod_placed_by_price_records_its_placement_without_a_metadata_write(
    start_runpod_node: StartNode, kube_api: client.ApiClient, namespace: str, kubectl: Kubectl
) -> None:
    """On the RunPod stand-in, which reports a pod Provisioning, then ContainerCreating, then Running:
    one status write per transition, as the kubelet writes a pod's status, the placement in the first,
    and no metadata write."""
    daemon = await start_runpod_node()
    core = client.CoreV1Api(kube_api)
    before = pod_requests(request_totals(kubectl))
    annotations = {GPU_TYPES_ANNOTATION: "RTX-4090"}
    async with PodUpdates(core, namespace) as updates:
        for number in range(PLACED_PODS):
            await core.create_namespaced_pod(
                namespace, gpu_pod(f"gpu{number}", daemon.node_name, annotations=annotations)
            )

        async def all_placed_and_running() -> bool:
            pods = (await core.list_namespaced_pod(namespace)).items
            return len(pods) == PLACED_PODS and all(
                pod.status.phase == "Running"
                and any(c.type == CHOSEN_CONDITION for c in pod.status.conditions or ())
                for pod in pods
            )

        await wait_for(all_placed_and_running, timeout_seconds=120, what="the pods to run, placed")
        delta = await settled_requests(kubectl, before)
    ours = await our_events_per_pod(core, namespace)

    print("pod updates:", dict(updates.counts))
    assert pod_writes(delta, "") == 0, delta
    # One status write per state the node sees the provider report (Provisioning, which a quick pod may
    # pass before the node looks, ContainerCreating, Running), each a change every watcher receives:
    # none repeated, none rewritten without a change.
    assert sorted(updates.counts) == [f"gpu{number}" for number in range(PLACED_PODS)]
    assert set(updates.counts.values()) <= {2, 3}, updates.counts
    assert pod_writes(delta, "status") == sum(updates.counts.values()), delta
    assert len(ours) == PLACED_PODS
    assert max(ours.values()) <= KUBELET_EVENTS_PER_CONTAINER
