"""The chain's exec, attach and port-forward are its owner's; an owner without them refuses clearly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vk_provider.errors import CapabilityMissingError
from vk_provider.provider import ContainerStreams
from vk_provider.testing.contract import wait_running

from .support import Backends, make_chain, pod_request

pytestmark = pytest.mark.unit


class Collected:
    def __init__(self) -> None:
        self.data = b""

    async def __call__(self, chunk: bytes) -> None:
        self.data += chunk


async def chunks(*items: bytes) -> AsyncIterator[bytes]:
    for item in items:
        yield item


async def test_the_owner_runs_exec_attach_and_port_forward(tmp_path: Path) -> None:
    chain = make_chain(tmp_path, [{"name": "home", "provider": "mock"}])
    request = pod_request("p")
    await chain.create_pod(request)
    await wait_running(chain, request.ref)
    out = Collected()
    assert (
        await chain.exec_in_container(request.ref, "server", ["echo", "hi"], ContainerStreams(stdout=out))
        == 0
    )
    assert out.data == b"hi\n"
    attached = Collected()
    await chain.attach_to_container(
        request.ref, "server", ContainerStreams(stdin=chunks(b"in"), stdout=attached)
    )
    assert attached.data == b"in"
    echoed = Collected()
    await chain.port_forward(request.ref, 8000, chunks(b"ping"), echoed)
    assert echoed.data == b"ping"


async def test_an_owner_without_exec_refuses_with_its_name(tmp_path: Path) -> None:
    backends = Backends()
    chain = make_chain(tmp_path, [{"name": "cloud", "provider": "scripted"}], backends=backends)
    request = pod_request("p")
    await chain.create_pod(request)
    with pytest.raises(
        CapabilityMissingError, match=r"exec is not supported by cloud, which holds pod default/p"
    ):
        await chain.exec_in_container(request.ref, "server", ["ls"], ContainerStreams(stdout=Collected()))
    with pytest.raises(CapabilityMissingError, match=r"port-forward is not supported by cloud"):
        await chain.port_forward(request.ref, 80, chunks(), Collected())
