"""The kubelet port is bound before the daemon touches the cluster, and a taken port stops it at once."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from vk_provider.kubelet.server import KubeletApiError, bind_kubelet_port
from vk_provider.node.daemon import run_node
from vk_provider.node.settings import NodeSettings

pytestmark = pytest.mark.unit


def test_a_free_port_is_bound_and_listening() -> None:
    listener = bind_kubelet_port("127.0.0.1", 0)
    try:
        with socket.create_connection(listener.getsockname(), timeout=5):
            pass  # accepted into the backlog although nothing serves yet
    finally:
        listener.close()


def test_a_taken_port_is_a_kubelet_api_error_naming_the_address_and_what_to_do() -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        with pytest.raises(KubeletApiError) as raised:
            bind_kubelet_port("127.0.0.1", port)
    message = str(raised.value)
    assert f"the kubelet API cannot listen on 127.0.0.1:{port}: Address already in use" in message
    assert "kubelet_port" in message


async def test_the_daemon_stops_on_a_taken_port_before_it_reads_its_kubeconfig(tmp_path: Path) -> None:
    # The kubeconfig does not exist: had the daemon gone near the cluster first, that would be the error.
    with socket.create_server(("127.0.0.1", 0)) as holder:
        settings = NodeSettings(
            kubeconfig=str(tmp_path / "no-such-kubeconfig"),
            kubelet_port=holder.getsockname()[1],
            kubelet_bind_address="127.0.0.1",
            state_dir=tmp_path / "state",
        )
        with pytest.raises(KubeletApiError):
            await asyncio.wait_for(run_node(settings, stop=asyncio.Event()), timeout=10)
