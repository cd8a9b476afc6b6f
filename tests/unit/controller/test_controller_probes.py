"""The controller's probes beside /metrics: alive at once, Ready once the Lease was read (standbys too)."""

from __future__ import annotations

import aiohttp

from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.controller.running import serve_metrics
from vk_provider.kit.probes import Readiness


async def test_metrics_healthz_and_readyz_share_the_port(unused_tcp_port: int) -> None:
    readiness = Readiness(reason="starting: no answer about the leader Lease yet")
    runner = await serve_metrics(ControllerMetrics(), "127.0.0.1", unused_tcp_port, readiness=readiness)
    base = f"http://127.0.0.1:{unused_tcp_port}"
    try:
        async with aiohttp.ClientSession() as session:
            for path, status in (("/healthz", 200), ("/readyz", 503), ("/metrics", 200)):
                async with session.get(base + path) as response:
                    assert response.status == status, path
            readiness.set_ready()  # what the controller does once the elector had an answer
            async with session.get(base + "/readyz") as response:
                assert response.status == 200
    finally:
        await runner.cleanup()


async def test_metrics_named_in_the_query_are_the_only_ones_written(unused_tcp_port: int) -> None:
    """A tool following one figure asks for it by name, and gets that series alone."""
    metrics = ControllerMetrics()
    metrics.offload_seen("ml", "chat")
    runner = await serve_metrics(metrics, "127.0.0.1", unused_tcp_port)
    base = f"http://127.0.0.1:{unused_tcp_port}/metrics"
    depth = "vk_provider_controller_queue_depth"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(base) as response:
                everything = await response.text()
            async with session.get(base, params=[("name[]", depth)]) as response:
                named = await response.text()
        assert 'name="chat"' in everything
        assert [line.split()[0] for line in named.splitlines() if not line.startswith("#")] == [depth]
    finally:
        await runner.cleanup()
