"""The other kubelet routes: /pods, /runningpods/, /healthz, /metrics, and what is not a route."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from vk_provider.errors import TemporaryProviderError
from vk_provider.kubelet.routes import build_app
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.provider import ContainerState, ContainerStateKind, PodRef, PodState

from . import BareProvider, FakeClock, backend_for, kubelet_client, pod_json, ref_of, running_mock

WEB = pod_json("web", "app", "sidecar")
BATCH = pod_json("batch", "main", namespace="jobs")


async def test_pods_is_a_pod_list_of_the_pods_bound_to_the_node() -> None:
    async with kubelet_client(BareProvider(), [WEB, BATCH]) as client:
        response = await client.get("/pods")
        assert response.status == 200
        assert response.content_type == "application/json"
        assert await response.json() == {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {},
            "items": [WEB, BATCH],
        }


async def test_pods_reads_the_cache_at_every_request() -> None:
    bound: list[Mapping[str, Any]] = [WEB]
    async with kubelet_client(BareProvider(), bound) as client:
        assert len((await (await client.get("/pods")).json())["items"]) == 1
        bound.append(BATCH)
        assert len((await (await client.get("/pods")).json())["items"]) == 2


async def test_running_pods_lists_the_providers_pods_minimally(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        response = await client.get("/runningpods/")
        assert response.status == 200
        assert await response.json() == {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {},
            "items": [
                {
                    "metadata": {"name": "web", "namespace": "default", "uid": "uid-default-web"},
                    "spec": {
                        "containers": [
                            {"name": "app", "image": "busybox"},
                            {"name": "sidecar", "image": "busybox"},
                        ]
                    },
                    "status": {"phase": "Running"},
                }
            ],
        }


async def test_running_pods_drops_a_deleted_pod_at_once(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB, BATCH)
    async with kubelet_client(provider, [WEB, BATCH], clock=clock) as client:

        async def running() -> list[str]:
            items = (await (await client.get("/runningpods/")).json())["items"]
            return sorted(item["metadata"]["name"] for item in items)

        assert await running() == ["batch", "web"]
        await provider.delete_pod(ref_of(WEB), grace_period_seconds=30)
        assert await running() == ["batch"]


async def test_running_pods_leaves_out_terminated_pods() -> None:
    def state(name: str, terminated: bool) -> PodState:
        container = ContainerState(name="app", image="busybox", state=ContainerStateKind.TERMINATED)
        ref = PodRef("default", name, f"uid-{name}")
        return PodState(ref=ref, phase="Succeeded", containers=(container,), terminated=terminated)

    provider = BareProvider([state("stopping", terminated=False), state("gone", terminated=True)])
    async with kubelet_client(provider, []) as client:
        items = (await (await client.get("/runningpods/")).json())["items"]
    assert [item["metadata"]["name"] for item in items] == ["stopping"]


async def test_running_pods_is_a_503_when_the_provider_cannot_list() -> None:
    class Unreachable(BareProvider):
        async def list_pods(self) -> Sequence[PodState]:
            raise TemporaryProviderError("provider API unreachable")

    async with kubelet_client(Unreachable(), []) as client:
        response = await client.get("/runningpods/")
        assert (response.status, await response.text()) == (503, "provider API unreachable")


async def test_healthz_says_ok() -> None:
    async with kubelet_client(BareProvider(), []) as client:
        response = await client.get("/healthz")
        assert (response.status, await response.text()) == (200, "ok")


async def test_metrics_exposes_the_daemons_own_metrics() -> None:
    metrics = DaemonMetrics()
    metrics.set_queue_depth_source(lambda: 7)
    metrics.observe_reconcile(0.2, ok=True)
    metrics.set_provider_available(True)
    async with kubelet_client(BareProvider(), [], metrics=metrics.exposition) as client:
        response = await client.get("/metrics")
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = await response.text()
    assert "vk_provider_pod_queue_depth 7.0\n" in text
    assert 'vk_provider_reconciles_total{result="success"} 1.0\n' in text
    assert "vk_provider_provider_available 1.0\n" in text
    assert "python_gc_objects_collected_total" not in text  # its own registry, not the global one


async def test_metrics_is_a_501_when_the_node_serves_none() -> None:
    async with kubelet_client(BareProvider(), [], metrics=None) as client:
        response = await client.get("/metrics")
        assert (response.status, await response.text()) == (
            501,
            'node "vk-test" serves no metrics of its own',
        )


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/stats",
        "/containerLogs/default/web",
        "/metrics/cadvisor",
        "/exec/a/b/c",
    ],
)
async def test_an_unknown_path_is_a_404(path: str) -> None:
    async with kubelet_client(BareProvider(), [WEB]) as client:
        assert (await client.get(path)).status == 404


async def test_only_get_is_served() -> None:
    async with kubelet_client(BareProvider(), [WEB]) as client:
        assert (await client.post("/pods")).status == 405
        assert (await client.head("/healthz")).status == 405


async def test_a_failing_handler_is_a_short_500_and_its_traceback_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken_cache() -> Sequence[Mapping[str, Any]]:
        raise KeyError("the cache is broken")

    backend = dataclasses.replace(backend_for(BareProvider(), []), bound_pods=broken_cache)
    async with TestClient(TestServer(build_app(backend))) as client:
        response = await client.get("/pods")
        assert response.status == 500
        assert await response.text() == "internal error; the node's log has the details"
    [record] = [record for record in caplog.records if record.name == "vk_provider.kubelet.routes"]
    assert record.levelno == logging.ERROR
    assert record.getMessage() == "kubelet API: GET /pods failed"
    assert record.exc_info is not None
