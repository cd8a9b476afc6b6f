"""The node admits pods as a kubelet does, on the real control plane: what it refuses is Failed with the
reason, a Warning event says why, and nothing is created at the provider (its running pods, read through
the apiserver's proxy to the node's kubelet API, never list it).
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.daemons import NodeDaemon
from tests.integration.nodes import TOLERATE_ALL
from tests.integration.waiting import wait_for
from tests.unit.providers.sagemaker.support import write_credentials
from vk_devtools.devcluster import cluster
from vk_devtools.standins.sagemaker import TEST_ROLE_ARN, MotoSageMaker

pytestmark = pytest.mark.integration

StartNode = Callable[..., Awaitable[NodeDaemon]]
GPU = "nvidia.com/gpu"
GPU_NODE = {"cpu": "64", "memory": "256Gi", "pods": "500", GPU: "8"}


def bound_pod(
    name: str, node: str, *, gpus: int = 0, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A pod bound straight to `node` by nodeName: no scheduler looks at it first."""
    container: dict[str, Any] = {"name": "main", "image": "example/app:1"}
    if gpus:
        container["resources"] = {"limits": {GPU: str(gpus)}}  # extended resources: requests = limits
    return {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"nodeName": node, "tolerations": TOLERATE_ALL, "containers": [container]},
    }


RunningAtProvider = Callable[[NodeDaemon], Awaitable[set[str]]]
KubeletGet = Callable[[NodeDaemon, str], Awaitable[bytes]]


@pytest.fixture
def kubelet_get(control_plane: cluster.ClusterState) -> KubeletGet:
    """GET a path of a node's kubelet API, asked directly as the cluster admin: the apiserver's proxy
    refuses loopback."""
    context = ssl.create_default_context(cafile=str(control_plane.ca_cert))
    context.check_hostname = False  # the serving certificate names the node's IPs
    pki = control_plane.directory / "pki"
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    async def get(daemon: NodeDaemon, path: str) -> bytes:
        port = yaml.safe_load(daemon.config_path.read_text())["kubelet_port"]
        url = f"https://127.0.0.1:{port}{path}"
        async with aiohttp.ClientSession() as session, session.get(url, ssl=context) as response:
            assert response.status == 200, await response.text()
            return await response.read()

    return get


@pytest.fixture
def running_at_provider(kubelet_get: KubeletGet) -> RunningAtProvider:
    """The names of the pods a node's provider runs, from the node's kubelet API `/runningpods/` (its
    provider's own list)."""

    async def names(daemon: NodeDaemon) -> set[str]:
        listing = json.loads(await kubelet_get(daemon, "/runningpods/"))
        return {item["metadata"]["name"] for item in listing.get("items") or []}

    return names


async def failed(core: client.CoreV1Api, namespace: str, name: str) -> client.V1Pod:
    async def phase_failed() -> client.V1Pod | None:
        pod = await core.read_namespaced_pod(name, namespace)
        return pod if pod.status.phase == "Failed" else None

    return await wait_for(phase_failed, timeout_seconds=30, what=f"pod {name} to be Failed")


async def running(core: client.CoreV1Api, namespace: str, name: str) -> None:
    async def phase_running() -> bool:
        return (await core.read_namespaced_pod(name, namespace)).status.phase == "Running"

    await wait_for(phase_running, timeout_seconds=30, what=f"pod {name} to be Running")


async def warning(core: client.CoreV1Api, namespace: str, name: str, reason: str) -> client.CoreV1Event:
    async def found() -> client.CoreV1Event | None:
        listing = await core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
        return next((e for e in listing.items if e.type == "Warning" and e.reason == reason), None)

    return await wait_for(found, timeout_seconds=30, what=f"a Warning {reason} event on {name}")


async def reasons_of_events(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    listing = await core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    return [event.reason for event in listing.items]


async def gone(core: client.CoreV1Api, namespace: str, name: str) -> None:
    async def deleted() -> bool:
        names = [pod.metadata.name for pod in (await core.list_namespaced_pod(namespace)).items]
        return name not in names

    await core.delete_namespaced_pod(name, namespace)
    await wait_for(deleted, timeout_seconds=30, what=f"pod {name} to be gone")


async def test_a_pod_asking_for_100000_gpus_bound_by_node_name_is_failed_and_nothing_runs_for_it(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, running_at_provider: RunningAtProvider
) -> None:
    daemon = await start_node("mock", capacity=GPU_NODE)
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod(namespace, bound_pod("greedy", daemon.node_name, gpus=100_000))
    pod = await failed(core, namespace, "greedy")
    assert pod.status.reason == "OutOfnvidia.com/gpu"
    expected = "Node didn't have enough resource: nvidia.com/gpu, requested: 100000, used: 0, capacity: 8"
    assert pod.status.message == "Pod was rejected: " + expected
    (container,) = pod.status.container_statuses
    assert container.state.waiting.reason == "OutOfnvidia.com/gpu"  # not ContainerCreating
    event = await warning(core, namespace, "greedy", "OutOfnvidia.com/gpu")
    assert event.message == expected
    assert "greedy" not in await running_at_provider(daemon)
    assert "ProviderCreateSuccess" not in await reasons_of_events(core, namespace, "greedy")

    # What already runs counts: the whole node's GPUs fit once, and then nothing more does.
    await core.create_namespaced_pod(namespace, bound_pod("whole-node", daemon.node_name, gpus=8))
    await running(core, namespace, "whole-node")
    await core.create_namespaced_pod(namespace, bound_pod("one-more", daemon.node_name, gpus=1))
    assert (await failed(core, namespace, "one-more")).status.message.endswith(
        "requested: 1, used: 8, capacity: 8"
    )

    # A restarted node judges nothing again: what it admitted runs, what it refused stays refused,
    # and a newcomer still finds the node full.
    daemon.stop()
    daemon.start()
    await core.create_namespaced_pod(namespace, bound_pod("after-restart", daemon.node_name, gpus=1))
    assert (await failed(core, namespace, "after-restart")).status.reason == "OutOfnvidia.com/gpu"

    async def only_the_admitted_pod_runs() -> bool:
        return await running_at_provider(daemon) == {"whole-node"}

    await wait_for(only_the_admitted_pod_runs, timeout_seconds=30, what="whole-node alone at the provider")
    await running(core, namespace, "whole-node")
    assert (await core.read_namespaced_pod("greedy", namespace)).status.phase == "Failed"

    # Nothing is stuck: a refused pod deletes like any other.
    await gone(core, namespace, "greedy")


async def test_invalid_placement_annotations_fail_the_pod_with_a_warning_naming_the_annotation(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, running_at_provider: RunningAtProvider
) -> None:
    daemon = await start_node("mock", capacity=GPU_NODE)
    core = client.CoreV1Api(kube_api)
    annotations = {"placement.vk-provider.dev/gpu-count": "lots"}
    await core.create_namespaced_pod(
        namespace, bound_pod("misplaced", daemon.node_name, annotations=annotations)
    )
    pod = await failed(core, namespace, "misplaced")
    assert pod.status.reason == "InvalidPlacement"
    assert "placement.vk-provider.dev/gpu-count must be a whole number of GPUs from 1 to 64, not 'lots'" in (
        pod.status.message
    )
    event = await warning(core, namespace, "misplaced", "InvalidPlacement")
    assert "gpu-count" in event.message

    misspelt = {"placement.vk-provider.dev/gpu-typs": "H100-80GB"}
    await core.create_namespaced_pod(namespace, bound_pod("misspelt", daemon.node_name, annotations=misspelt))
    assert (
        "gpu-typs is not a placement annotation" in (await failed(core, namespace, "misspelt")).status.message
    )
    assert await running_at_provider(daemon) == set()
    await gone(core, namespace, "misplaced")


async def test_the_spend_ceiling_refuses_the_pod_that_would_pass_it(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, running_at_provider: RunningAtProvider
) -> None:
    daemon = await start_node("mock", capacity=GPU_NODE, max_spend_per_hour=10.0, max_provider_pods=3)
    core = client.CoreV1Api(kube_api)
    price = {"placement.vk-provider.dev/max-price-per-hour": "6"}
    await core.create_namespaced_pod(namespace, bound_pod("first", daemon.node_name, annotations=price))
    await running(core, namespace, "first")
    await core.create_namespaced_pod(namespace, bound_pod("second", daemon.node_name, annotations=price))
    pod = await failed(core, namespace, "second")
    assert pod.status.reason == "OutOfBudget"
    assert "at most $10.00/h" in pod.status.message
    assert "$6.00/h already" in pod.status.message
    await warning(core, namespace, "second", "OutOfBudget")
    assert await running_at_provider(daemon) == {"first"}

    # The pod ceiling: two more pods the mock runs for nothing fit under the spend, the third does not.
    for name in ("cheap-1", "cheap-2"):
        await core.create_namespaced_pod(namespace, bound_pod(name, daemon.node_name))
        await running(core, namespace, name)
    await core.create_namespaced_pod(namespace, bound_pod("cheap-3", daemon.node_name))
    refused = await failed(core, namespace, "cheap-3")
    assert refused.status.reason == "OutOfBudget"
    assert "at most 3 pods at its provider (max_provider_pods), and 3 run there" in refused.status.message
    assert await running_at_provider(daemon) == {"first", "cheap-1", "cheap-2"}


@pytest.fixture(scope="module")
def moto_sagemaker() -> Iterator[MotoSageMaker]:
    """moto's SageMaker in server mode: the node daemon, another process, reaches it by its URL."""
    with MotoSageMaker() as server:
        yield server


def cost_of(exposition: str, pod: str, provider: str) -> float | None:
    """The pod's `vk_provider_pod_cost_usd_total` in the node's metrics; None without a series."""
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            series = (sample.labels.get("pod"), sample.labels.get("provider"))
            if sample.name == "vk_provider_pod_cost_usd_total" and series == (pod, provider):
                return float(sample.value)
    return None


async def test_a_sagemaker_pod_under_a_spend_ceiling_is_counted_at_its_instance_types_price(  # noqa: PLR0917 (fixtures)
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    running_at_provider: RunningAtProvider,
    kubelet_get: KubeletGet,
    moto_sagemaker: MotoSageMaker,
    tmp_path: Path,
) -> None:
    """SageMaker sets no price of its own: the node counts its pods at the instance type's list price
    (ml.g4dn.xlarge, $0.7364/h in us-east-1, from the provider's table), refuses the pod that would pass
    the ceiling, and refuses one whose instance type has no price rather than counting it as free."""
    moto_sagemaker.reset()
    config = {
        "role_arn": TEST_ROLE_ARN,
        "region": "us-east-1",
        "endpoint_url": moto_sagemaker.endpoint_url,
        "credentials_file": str(write_credentials(tmp_path / "aws-credentials")),
        "instance_type": "ml.g4dn.xlarge",
        "capacity": GPU_NODE,
    }
    daemon = await start_node("sagemaker", provider_config=config, max_spend_per_hour=1.0)
    core = client.CoreV1Api(kube_api)
    created = time.monotonic()
    await core.create_namespaced_pod(namespace, bound_pod("first", daemon.node_name))
    await running(core, namespace, "first")

    # $0.74/h runs, and another $0.74/h would pass $1/h.
    await core.create_namespaced_pod(namespace, bound_pod("second", daemon.node_name))
    refused = await failed(core, namespace, "second")
    assert refused.status.reason == "OutOfBudget"
    assert "its pods cost $0.74/h already, and this pod may cost $0.74/h" in refused.status.message
    await warning(core, namespace, "second", "OutOfBudget")

    # An instance type without a price is not free: refused although $0.26/h is left.
    unpriced = {"sagemaker.vk-provider.dev/instance-type": "ml.m4.xlarge"}
    await core.create_namespaced_pod(namespace, bound_pod("unpriced", daemon.node_name, annotations=unpriced))
    refused = await failed(core, namespace, "unpriced")
    assert refused.status.reason == "OutOfBudget"
    assert "this pod's price is not known" in refused.status.message
    assert "instance_prices" in refused.status.message
    assert "allow_unpriced_pods" in refused.status.message
    assert await running_at_provider(daemon) == {"first"}

    # The cost metric adds up the running pod at its price, under the provider's name.
    async def first_cost() -> float | None:
        cost = cost_of((await kubelet_get(daemon, "/metrics")).decode(), "first", "sagemaker")
        return cost if cost else None

    cost = await wait_for(first_cost, timeout_seconds=30, what="a cost for the SageMaker pod")
    hours_since_created = (time.monotonic() - created) / 3600
    assert 0 < cost <= 0.7364 * hours_since_created
    exposition = (await kubelet_get(daemon, "/metrics")).decode()
    assert cost_of(exposition, "second", "sagemaker") is None


async def test_a_forced_deletion_stops_the_workload_without_a_grace_period_warning(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, running_at_provider: RunningAtProvider
) -> None:
    daemon = await start_node("mock", capacity=GPU_NODE)
    core = client.CoreV1Api(kube_api)
    held = bound_pod("held", daemon.node_name)
    held["metadata"]["finalizers"] = ["example.com/hold"]  # keeps the object, deletionGracePeriodSeconds 0
    await core.create_namespaced_pod(namespace, held)
    await running(core, namespace, "held")
    await core.delete_namespaced_pod("held", namespace, grace_period_seconds=0)

    async def stopped() -> bool:
        return "held" not in await running_at_provider(daemon)

    await wait_for(stopped, timeout_seconds=30, what="the forcibly deleted pod to stop at the provider")
    assert "did not stop within its grace period" not in daemon.log_path.read_text()
    await core.patch_namespaced_pod("held", namespace, {"metadata": {"finalizers": None}})

    async def deleted() -> bool:
        return "held" not in [pod.metadata.name for pod in (await core.list_namespaced_pod(namespace)).items]

    await wait_for(deleted, timeout_seconds=30, what="the pod to be gone once its finalizer is")
