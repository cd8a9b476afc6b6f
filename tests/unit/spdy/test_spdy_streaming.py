"""Exec, attach and port-forward on the kubelet API, over a real socket with a SPDY client: the streams,
the v4 exit status, refusals before the upgrade, timeouts, and a client that vanishes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.unit.kubelet import BareProvider, FakeClock, Hanging, backend_for, pod_json, running_mock
from tests.unit.spdy.peer import SpdyPeer
from vk_provider.kubelet.routes import build_app
from vk_provider.kubelet.streaming import StreamingBackend, StreamTimeouts
from vk_providers.mock import MockProvider

pytestmark = pytest.mark.unit

POD = pod_json("web", "app")
V4 = ("v4.channel.k8s.io",)


@contextlib.asynccontextmanager
async def serving(backend_streaming: StreamingBackend, provider: Any) -> AsyncIterator[int]:
    backend = dataclasses.replace(backend_for(provider, [POD]), streaming=backend_streaming)
    runner = web.AppRunner(build_app(backend))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    try:
        yield port
    finally:
        await runner.cleanup()


def mock_streaming(provider: MockProvider, **timeouts: float) -> StreamingBackend:
    return StreamingBackend(
        provider_name="mock",
        exec_in_container=provider.exec_in_container,
        attach_to_container=provider.attach_to_container,
        port_forward=provider.port_forward,
        timeouts=StreamTimeouts(**timeouts),
    )


async def mock(tmp_path: Path) -> MockProvider:
    return await running_mock(tmp_path, FakeClock(), POD)


def exec_path(*command: str, query: str = "output=1&error=1") -> str:
    commands = "&".join(f"command={word}" for word in command)
    return f"/exec/default/web/app?{commands}&{query}"


async def test_exec_separates_the_outputs_and_reports_the_exit_code(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port:
        status, headers, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, exec_path("fail", "3", "bad"), protocols=("v5.channel.k8s.io", *V4)
        )
        assert status == 101
        assert peer is not None
        assert headers["x-stream-protocol-version"] == "v5.channel.k8s.io"
        error = peer.open({"streamType": "error"}, fin=True)
        stdout = peer.open({"streamType": "stdout"}, fin=True)
        stderr = peer.open({"streamType": "stderr"}, fin=True)
        for stream in (error, stdout, stderr):
            await peer.wait(stream)
        assert all(stream.replied for stream in (error, stdout, stderr))
        assert (bytes(stderr.data), bytes(stdout.data)) == (b"bad\n", b"")
        assert json.loads(error.data) == {
            "metadata": {},
            "status": "Failure",
            "message": "command terminated with non-zero exit code: exit code 3",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
        }
        await asyncio.wait_for(peer.closed.wait(), 5)  # the session ends the connection (GOAWAY, close)
        await peer.close()


async def test_exec_pipes_stdin_and_succeeds(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    payload = bytes(range(256)) * 4096  # 1 MiB, well past every window
    async with serving(mock_streaming(provider), provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, exec_path("cat", query="input=1&output=1"), protocols=V4
        )
        assert peer is not None
        error = peer.open({"streamType": "error"}, fin=True)
        stdin = peer.open({"streamType": "stdin"})
        stdout = peer.open({"streamType": "stdout"}, fin=True)
        peer.write(stdin, payload, fin=True)
        await peer.wait(stdout, within=30)
        await peer.wait(error)
        assert bytes(stdout.data) == payload
        assert json.loads(error.data) == {"metadata": {}, "status": "Success"}
        await peer.close()


async def test_a_tty_exec_sees_the_terminal_size(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, exec_path("stty", "size", query="output=1&tty=1"), protocols=V4
        )
        assert peer is not None
        error = peer.open({"streamType": "error"}, fin=True)
        stdout = peer.open({"streamType": "stdout"}, fin=True)
        resize = peer.open({"streamType": "resize"})
        peer.write(resize, b'{"Width":132,"Height":43}')
        await peer.wait(stdout)
        assert bytes(stdout.data) == b"43 132\r\n"
        await peer.wait(error)
        await peer.close()


async def test_attach_connects_stdin_to_the_process(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, "/attach/default/web/app?input=1&output=1", protocols=V4
        )
        assert peer is not None
        peer.open({"streamType": "error"}, fin=True)
        stdin = peer.open({"streamType": "stdin"})
        stdout = peer.open({"streamType": "stdout"}, fin=True)
        peer.write(stdin, b"hello\n")
        assert await peer.wait_for_data(stdout, lambda data: data == b"hello\n") == b"hello\n"
        await peer.close()


async def test_port_forward_serves_pairs_by_request_id_and_reports_bad_ports(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port:
        _, headers, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, "/portForward/default/web", protocols=("portforward.k8s.io",)
        )
        assert peer is not None
        assert headers["x-stream-protocol-version"] == "portforward.k8s.io"
        pairs = []
        for request in range(5):
            error = peer.open({"streamType": "error", "port": "8000", "requestID": str(request)}, fin=True)
            data = peer.open({"streamType": "data", "port": "8000", "requestID": str(request)})
            pairs.append((error, data))
        for request, (_, data) in enumerate(pairs):
            peer.write(data, f"ping {request}".encode(), fin=True)
        for request, (error, data) in enumerate(pairs):
            await peer.wait(data)
            await peer.wait(error)
            assert bytes(data.data) == f"ping {request}".encode()
            assert bytes(error.data) == b""
        bad_error = peer.open({"streamType": "error", "port": "http", "requestID": "9"}, fin=True)
        peer.open({"streamType": "data", "port": "http", "requestID": "9"})
        await peer.wait(bad_error)
        assert bytes(bad_error.data) == b"invalid port 'http'"
        await peer.close()


async def test_a_pair_missing_its_second_stream_is_reset(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider, creation_seconds=0.2), provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, "/portForward/default/web", protocols=("portforward.k8s.io",)
        )
        assert peer is not None
        lonely = peer.open({"streamType": "error", "port": "80", "requestID": "1"}, fin=True)
        await peer.wait(lonely)
        assert lonely.reset is not None
        await peer.close()


async def test_an_exec_without_its_streams_is_closed_after_the_creation_timeout(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider, creation_seconds=0.2), provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade("127.0.0.1", port, exec_path("echo", "hi"), protocols=V4)
        assert peer is not None
        peer.open({"streamType": "error"}, fin=True)  # stdout and stderr never come
        await asyncio.wait_for(peer.closed.wait(), 5)
        await peer.close()


async def test_an_idle_connection_is_closed(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider, idle_seconds=0.3), provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, "/portForward/default/web", protocols=("portforward.k8s.io",)
        )
        assert peer is not None
        await asyncio.wait_for(peer.closed.wait(), 5)
        await peer.close()


async def test_a_vanished_client_cancels_the_command(tmp_path: Path) -> None:
    provider = Hanging()
    streaming = StreamingBackend(provider_name="hanging", exec_in_container=provider.exec_in_container)
    async with serving(streaming, provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade("127.0.0.1", port, exec_path("sleep"), protocols=V4)
        assert peer is not None
        peer.open({"streamType": "error"}, fin=True)
        peer.open({"streamType": "stdout"}, fin=True)
        peer.open({"streamType": "stderr"}, fin=True)
        await asyncio.wait_for(provider.started.wait(), 5)
        await peer.close()
        await asyncio.wait_for(provider.cancelled.wait(), 5)


@pytest.mark.parametrize(
    ("path", "protocols", "status", "text"),
    [
        (exec_path("ls"), V4, 501, "exec is not supported by provider bare"),
        ("/attach/default/web/app?output=1", V4, 501, "attach is not supported by provider bare"),
        (
            "/portForward/default/web",
            ("portforward.k8s.io",),
            501,
            "port-forward is not supported by provider bare",
        ),
        ("/exec/default/nope/app?command=ls&output=1", V4, 404, 'pod "default/nope" is not on node'),
        ("/exec/default/web/nope?command=ls&output=1", V4, 404, 'container "nope" not found'),
    ],
)
async def test_refusals_come_before_the_upgrade(
    path: str, protocols: tuple[str, ...], status: int, text: str
) -> None:
    provider = BareProvider()
    async with serving(StreamingBackend(provider_name="bare"), provider) as port:
        got, _, body, peer = await SpdyPeer.upgrade("127.0.0.1", port, path, protocols=protocols)
        assert peer is None
        assert got == status
        assert text in body.decode()


@pytest.mark.parametrize(
    ("query", "protocols", "status", "text"),
    [
        ("command=echo&output=1&error=1&tty=1", V4, 400, "cannot both be requested with a tty"),
        ("command=echo", V4, 400, "at least 1 of stdin, stdout, stderr"),
        ("output=1", V4, 400, "at least 1 command"),
        ("command=echo&output=1", ("v3.channel.k8s.io",), 403, "unable to negotiate protocol"),
    ],
)
async def test_bad_exec_requests_are_refused(
    tmp_path: Path, query: str, protocols: tuple[str, ...], status: int, text: str
) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port:
        got, _, body, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, f"/exec/default/web/app?{query}", protocols=protocols
        )
        assert peer is None
        assert got == status
        assert text in body.decode()
