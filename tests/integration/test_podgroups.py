"""Native gang demand on the real plane: a PodGroup that cannot fit is demand until enough GPUs exist.

The plane runs with the GenericWorkload gate and scheduling.k8s.io/v1beta1 (devcluster.cluster), so
kube-scheduler places the PodGroup's pods all together or not at all.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.integration.gangs import gang_member, scheduled_condition
from tests.integration.migration_rig import StartNode, pod_range
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import podnetwork
from vk_provider.kit.kube import KubeApi, resource_path
from vk_provider.policy.podgroups import API_VERSION, PodGroupDemands, unschedulable_pod_groups

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
GANG = "train"


async def start_gpu_node(start_node: StartNode, name: str, labels: dict[str, str]) -> str:
    daemon = await start_node(
        "local",
        node_name=name,
        no_taint=True,
        labels=labels,
        provider_config={"capacity": {GPU: "4"}, "address_range": pod_range()},
    )
    return str(daemon.node_name)


async def test_an_unschedulable_gang_is_demand_until_its_gpus_exist(
    start_node: StartNode, api: KubeApi, namespace: str
) -> None:
    podnetwork.ensure_local_route()
    tag = uuid.uuid4().hex[:6]
    pool = {"vk-provider.dev/test-pool": f"gang-{tag}"}
    await start_gpu_node(start_node, f"gang-a-{tag}", pool)
    groups = resource_path(API_VERSION, "podgroups", namespace=namespace)
    await api.create(
        groups,
        {"metadata": {"name": GANG}, "spec": {"schedulingPolicy": {"gang": {"minCount": 6}}}},
    )
    for rank in range(6):
        await api.create(
            resource_path("v1", "pods", namespace=namespace), gang_member(f"rank-{rank}", GANG, pool)
        )

    async def demand() -> PodGroupDemands:  # empty, so falsy, until the scheduler gave up on the gang
        demands = await unschedulable_pod_groups(api, GPU, namespace=namespace)
        assert demands.unavailable is None, demands.unavailable
        return demands

    [gang] = await wait_for(demand, timeout_seconds=60, what="the gang to be reported unschedulable")
    group = await api.get(f"{groups}/{GANG}")
    assert scheduled_condition(group)["reason"] == "Unschedulable"
    assert "minCount (6) cannot be satisfied" in scheduled_condition(group)["message"]
    assert (gang.namespace, gang.name, gang.min_count) == (namespace, GANG, 6)
    assert (gang.gpus, gang.pods, gang.unplaced) == (6, 6, 6)
    assert gang.since is not None
    pods = (await api.get(resource_path("v1", "pods", namespace=namespace)))["items"]
    assert not [pod["metadata"]["name"] for pod in pods if pod["spec"].get("nodeName")], (
        "a partial gang was bound"
    )

    await start_gpu_node(start_node, f"gang-b-{tag}", pool)
    gpus_arrived = time.monotonic()

    async def all_bound() -> bool:
        pods = (await api.get(resource_path("v1", "pods", namespace=namespace)))["items"]
        return len(pods) == 6 and all(pod["spec"].get("nodeName") for pod in pods)

    await wait_for(all_bound, timeout_seconds=90, what="all 6 pods of the gang to be bound")
    print(f"gang bound {time.monotonic() - gpus_arrived:.1f} s after the second GPU node was Ready")
    group = await api.get(f"{groups}/{GANG}")
    assert (scheduled_condition(group)["status"], scheduled_condition(group)["reason"]) == (
        "True",
        "Scheduled",
    )
    demands = await unschedulable_pod_groups(api, GPU, namespace=namespace)
    assert demands == []
    assert demands.unavailable is None
