"""Exec, attach and port-forward over WebSocket (what an apiserver passes through to a node declaring
`ExtendWebSocketsToKubelet`): the channel protocol, v5's stdin close, and SPDY tunnelled in messages."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from tests.unit.spdy.test_spdy_streaming import mock, mock_streaming, serving
from vk_provider.kit import spdyframes as frames

pytestmark = pytest.mark.unit


async def channels(socket: aiohttp.ClientWebSocketResponse) -> dict[int, bytes]:
    """Everything received, by channel, until the server closes."""
    received: dict[int, bytes] = {}
    async for message in socket:
        if message.type is aiohttp.WSMsgType.BINARY and message.data:
            received[message.data[0]] = received.get(message.data[0], b"") + message.data[1:]
    return received


@pytest.mark.parametrize("protocol", ["v5.channel.k8s.io", "v4.channel.k8s.io"])
async def test_exec_over_channels_reports_the_exit_code(tmp_path: Path, protocol: str) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port, aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{port}/exec/default/web/app?command=fail&command=3&command=bad&output=1&error=1"
        async with http.ws_connect(url, protocols=(protocol,)) as socket:
            assert socket.protocol == protocol
            received = await channels(socket)
    assert received[2] == b"bad\n"
    status = json.loads(received[3])
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]


async def test_v5_closes_stdin_with_the_close_channel(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    payload = bytes(range(256)) * 2048
    async with serving(mock_streaming(provider), provider) as port, aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{port}/exec/default/web/app?command=cat&input=1&output=1"
        async with http.ws_connect(url, protocols=("v5.channel.k8s.io",)) as socket:
            for start in range(0, len(payload), 60_000):
                await socket.send_bytes(b"\x00" + payload[start : start + 60_000])
            await socket.send_bytes(bytes([255, 0]))  # stdin is finished: cat ends
            received = await channels(socket)
    assert received[1] == payload
    assert json.loads(received[3]) == {"metadata": {}, "status": "Success"}


async def test_an_unknown_subprotocol_is_closed_at_once(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port, aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{port}/exec/default/web/app?command=echo&output=1"
        async with http.ws_connect(url, protocols=("base64.channel.k8s.io",)) as socket:
            assert await channels(socket) == {}
            assert socket.close_code is not None


async def test_port_forward_tunnels_spdy_in_websocket_messages(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    encoder, decoder = frames.FrameEncoder(), frames.FrameDecoder()
    async with serving(mock_streaming(provider), provider) as port, aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{port}/portForward/default/web"
        async with http.ws_connect(url, protocols=("SPDY/3.1+portforward.k8s.io",)) as socket:
            common = (("port", "80"), ("requestid", "0"))
            for stream_id, kind in ((1, "error"), (3, "data")):
                headers = frames.make_headers((("streamtype", kind), *common))
                await socket.send_bytes(encoder.encode(frames.SynStream(stream_id, headers)))
            await socket.send_bytes(encoder.encode(frames.DataFrame(1, b"", fin=True)))
            await socket.send_bytes(encoder.encode(frames.DataFrame(3, b"echo me", fin=True)))
            echoed, replies = b"", set()
            async for message in socket:
                for frame in decoder.feed(message.data):
                    if isinstance(frame, frames.SynReply):
                        replies.add(frame.stream_id)
                    elif isinstance(frame, frames.DataFrame) and frame.stream_id == 3:
                        echoed += frame.data
                        if frame.fin:
                            await socket.close()
    assert replies == {1, 3}
    assert echoed == b"echo me"
