"""The `kubernetes` provider's exec and attach: through the remote apiserver's WebSocket channels, to
the remote cluster's `local` node (which the remote apiserver reaches over SPDY)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.conftest import REMOTE_PLANE_GROUP
from tests.integration.remote_plane import RemotePlane
from tests.integration.test_kubernetes_provider import KubernetesHarness
from tests.integration.waiting import wait_for
from vk_provider.errors import NotFoundError, ProviderError
from vk_provider.provider import ContainerStreams

pytestmark = [pytest.mark.integration, REMOTE_PLANE_GROUP]


@pytest.fixture
async def harness(remote_plane: RemotePlane, tmp_path: Path) -> AsyncIterator[KubernetesHarness]:
    harness = KubernetesHarness(remote_plane, tmp_path)
    yield harness
    await harness.aclose()


class Collected:
    def __init__(self) -> None:
        self.data = bytearray()

    async def __call__(self, chunk: bytes) -> None:
        self.data += chunk


async def chunks(payload: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(payload), 256 * 1024):
        yield payload[start : start + 256 * 1024]


async def test_remote_exec_separates_outputs_returns_the_exit_code_and_pipes_stdin(
    harness: KubernetesHarness,
) -> None:
    provider = harness.provider
    request = await harness.running_pod("shell")
    out, err = Collected(), Collected()
    command = ["sh", "-c", "echo out; echo err >&2; exit 3"]
    code = await provider.exec_in_container(
        request.ref, "server", command, ContainerStreams(stdout=out, stderr=err)
    )
    assert (code, bytes(out.data), bytes(err.data)) == (3, b"out\n", b"err\n")

    payload = os.urandom(4 * 1024 * 1024)
    digest = Collected()
    streams = ContainerStreams(stdin=chunks(payload), stdout=digest, stderr=Collected())
    assert await provider.exec_in_container(request.ref, "server", ["sha256sum"], streams) == 0
    assert bytes(digest.data).split()[0].decode() == hashlib.sha256(payload).hexdigest()

    with pytest.raises(NotFoundError, match="has no container 'nope'"):  # the contract's answer
        await provider.exec_in_container(request.ref, "nope", ["true"], ContainerStreams(stdout=Collected()))


async def test_remote_port_forward_reaches_the_pods_port_through_the_tunnel(
    harness: KubernetesHarness,
) -> None:
    provider = harness.provider
    request = await harness.running_pod("web")
    answer = Collected()

    async def one_request() -> AsyncIterator[bytes]:
        yield b"GET / HTTP/1.0\r\n\r\n"

    async def answered() -> bool:
        # The pod is Running a moment before its server listens: until then the remote says so.
        answer.data.clear()
        try:
            await provider.port_forward(request.ref, 8080, one_request(), answer)
        except ProviderError as error:
            assert "connect" in str(error).lower(), error  # noqa: PT017 (only a refused connection may repeat)
            return False
        return True

    await wait_for(answered, timeout_seconds=30, what="the remote pod's port to answer")
    assert bytes(answer.data).startswith(b"HTTP/1.0 200 OK")
    assert b"Directory listing" in bytes(answer.data)

    async def nothing() -> AsyncIterator[bytes]:
        return
        yield b""

    with pytest.raises(ProviderError, match="remote"):
        await provider.port_forward(request.ref, 9, nothing(), Collected())
