"""`kubectl port-forward` to a local pod through the real apiserver: many connections at once, and a
large download, all intact."""

from __future__ import annotations

import asyncio
import hashlib
import re
import subprocess
from collections.abc import Awaitable, Callable, Iterator

import aiohttp
import pytest
from kubernetes_asyncio import client

from tests.integration.daemons import NodeDaemon
from tests.integration.test_exec import BIG_FILE_BYTES, kubectl_process, sha256_in_pod, start_box
from vk_devtools.devcluster import cluster

pytestmark = pytest.mark.integration

StartNode = Callable[..., Awaitable[NodeDaemon]]
CONCURRENT_REQUESTS = 100


@pytest.fixture
def forwarders() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def forwarded_port(process: subprocess.Popen[bytes]) -> int:
    """The local port kubectl picked, from its "Forwarding from 127.0.0.1:N -> 8000" line."""
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8000", line)
    assert match, f"kubectl port-forward said {line!r}"
    return int(match.group(1))


@pytest.mark.parametrize("websocket", [True, False], ids=["websocket", "spdy"])
async def test_port_forward_carries_100_concurrent_requests_and_a_50_mib_download(  # noqa: PLR0917 (fixtures)
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    control_plane: cluster.ClusterState,
    forwarders: list[subprocess.Popen[bytes]],
    websocket: bool,
) -> None:
    """Over WebSocket (the node declares it: kubectl's SPDY-in-WebSocket tunnel reaches the node as it
    is), and over SPDY (the apiserver unwraps the tunnel and speaks SPDY to the node)."""
    await start_box(start_node, kube_api, namespace, websocket=websocket)
    process = kubectl_process(
        control_plane, "port-forward", "-n", namespace, "pod/box", "0:8000", stdout=subprocess.PIPE
    )
    forwarders.append(process)
    port = await asyncio.to_thread(forwarded_port, process)
    base = f"http://127.0.0.1:{port}"
    connector = aiohttp.TCPConnector(limit=CONCURRENT_REQUESTS, force_close=True)  # a connection each
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as http:

        async def listing(number: int) -> str:
            async with http.get(f"{base}/?request={number}") as response:
                assert response.status == 200
                return await response.text()

        pages = await asyncio.gather(*(listing(number) for number in range(CONCURRENT_REQUESTS)))
        assert all("big.bin" in page for page in pages)

        digest = hashlib.sha256()
        size = 0
        async with http.get(f"{base}/big.bin") as response:
            assert response.status == 200
            async for chunk in response.content.iter_chunked(1024 * 1024):
                digest.update(chunk)
                size += len(chunk)
    assert size == BIG_FILE_BYTES
    assert digest.hexdigest() == await asyncio.to_thread(sha256_in_pod, control_plane, namespace, "big.bin")
