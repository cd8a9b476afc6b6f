"""GPU health on the real plane: the dcgm-exporter stand-in as a pod on a 4-GPU local node, found by its
labels, mapped to its node by spec.nodeName, and the node judged from what it serves and from the Node.

The device plugin's signal (allocatable below capacity) is played by PATCHing the Node's
status.allocatable, as the kubelet would after the plugin reports a GPU Unhealthy; the node daemon is
started with a long status interval so it does not write its full allocatable back meanwhile.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import aiohttp
import pytest

from tests.integration.migration_rig import StartNode, pod_range
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import podnetwork
from vk_devtools.standins import dcgm as standin
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, RawObject, resource_path
from vk_provider.policy import health
from vk_provider.policy.dcgm import ExporterScrape, ExporterSettings, scrape_exporters
from vk_provider.policy.health import HealthMemory, HealthSettings

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"


async def test_the_stand_in_pod_makes_its_node_hot_failed_and_short_of_gpus(
    start_node: StartNode, api: KubeApi, namespace: str
) -> None:
    podnetwork.ensure_local_route()
    tag = uuid.uuid4().hex[:6]
    daemon = await start_node(
        "local",
        node_name=f"gpu-health-{tag}",
        no_taint=True,
        provider_config={
            "capacity": {GPU: "4"},
            "address_range": pod_range(),
            "image_entrypoints": {standin.DCGM_STANDIN_IMAGE: list(standin.DCGM_STANDIN_ENTRYPOINT)},
        },
        # Long enough that the daemon's periodic status does not undo the lowered allocatable below.
        node_status_interval_seconds=3600,
    )
    node_name = daemon.node_name
    selector = {"matchLabels": {"vk-provider.dev/test-exporter": tag}}
    pod = standin.exporter_pod(
        f"dcgm-{tag}", node_name, gpus=4, labels=selector["matchLabels"], host_label="hostname"
    )
    pods = resource_path("v1", "pods", namespace=namespace)
    await api.create(pods, pod)

    async def address() -> str | None:
        current = await api.get(f"{pods}/{pod['metadata']['name']}")
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in current.get("status", {}).get("conditions", [])
        )
        return current["status"].get("podIP") if ready else None

    pod_ip = await wait_for(address, timeout_seconds=60, what="the stand-in pod to be Ready")
    url = f"http://{pod_ip}:{standin.EXPORTER_PORT}"
    settings = ExporterSettings(namespace=namespace, selector=selector, timeout_seconds=3)
    node_path = resource_path("v1", "nodes", name=node_name)
    # Temperature is degrading: with no persistence asked for, one hot reading is enough here.
    health_settings = HealthSettings.from_spec(
        {"xidLookbackSeconds": 600, "degradingForSeconds": 0}, resource=GPU
    )

    async with aiohttp.ClientSession() as session:

        async def scrape(exporter: ExporterSettings = settings) -> ExporterScrape:
            return await scrape_exporters(api, exporter, session)

        async def judged(memory: HealthMemory) -> health.NodeHealthState:
            found = await scrape()
            assert found.errors == {}, found.errors
            node: RawObject = await api.get(node_path)
            return memory.judge(datetime.now(UTC), node, found.samples[node_name])

        found = await scrape()
        # Found by selector, keyed by the pod's nodeName: its host label names the pod, not the node.
        assert list(found.samples) == [node_name]
        assert [sample.gpu for sample in found.samples[node_name]] == ["0", "1", "2", "3"]
        assert all(sample.temperature_celsius == 45.0 for sample in found.samples[node_name])
        async with session.get(f"{url}/metrics") as response:
            assert f'hostname="{pod["metadata"]["name"]}"' in await response.text()

        memory = HealthMemory(health_settings)
        baseline = await judged(memory)
        assert baseline.healthy, baseline.detail
        assert baseline.counts  # first seen healthy, and no unhealthy taint from before

        await standin.set_gpu(url, 2, temperature=85)
        hot = await judged(memory)
        assert (hot.healthy, hot.reason, hot.changed) == (False, health.TEMPERATURE, True)
        assert "GPU 2 at 85 °C > 78 °C" in hot.detail

        await standin.set_gpu(url, 2, temperature=50)
        await standin.set_gpu(url, 1, xid=13)  # an application's fault, not the GPU's
        cooled = await judged(memory)
        assert cooled.healthy, cooled.detail
        assert not cooled.counts  # healthy again, but not yet for healthyForSeconds

        await standin.set_gpu(url, 1, xid=79)  # GPU fell off the bus
        failed = await judged(memory)
        assert (failed.healthy, failed.reason) == (False, health.XID)
        assert "GPU 1 raised Xid 79" in failed.detail

        await standin.set_gpu(url, "all", xid=0)
        assert (await judged(memory)).reason == health.XID  # within the lookback still
        fresh = HealthMemory(health_settings)
        assert (await judged(fresh)).healthy

        await api.patch(
            f"{node_path}/status", {"status": {"allocatable": {GPU: "3"}}}, content_type=MERGE_PATCH
        )
        short = await judged(fresh)
        assert (short.healthy, short.reason) == (False, health.DEVICE_PLUGIN_UNHEALTHY)
        assert f"{GPU} allocatable 3 < capacity 4" in short.detail

        # A broken exporter is an error entry for its node, never an exception.
        await standin.serve_malformed(url)
        broken = await scrape()
        assert broken.samples == {}
        assert "malformed metrics" in broken.errors[node_name]
        await standin.serve_malformed(url, False)
        wrong_port = ExporterSettings(namespace=namespace, selector=selector, port=9401, timeout_seconds=3)
        unreachable = await scrape(wrong_port)
        assert unreachable.samples == {}
        assert "unreachable" in unreachable.errors[node_name]
