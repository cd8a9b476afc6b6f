"""The SPDY connection's own rules: PING, flow-control windows both ways, stream ids, malformed input."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.unit.spdy.peer import SpdyPeer
from tests.unit.spdy.test_spdy_streaming import mock, mock_streaming, serving
from vk_provider.kit import spdyframes as frames

pytestmark = pytest.mark.unit

PORT_FORWARD = ("portforward.k8s.io",)


async def control_frame(peer: SpdyPeer, kind: type) -> frames.Frame:
    async with asyncio.timeout(5):
        while True:
            for frame in peer.control:
                if isinstance(frame, kind):
                    peer.control.remove(frame)
                    return frame
            peer.control_changed.clear()
            await peer.control_changed.wait()


async def test_pings_are_answered_and_received_data_is_acknowledged(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, "/portForward/default/web", protocols=PORT_FORWARD
        )
        assert peer is not None
        peer.send(frames.Ping(7))
        assert await control_frame(peer, frames.Ping) == frames.Ping(7)
        peer.open({"streamType": "error", "port": "80", "requestID": "0"}, fin=True)
        data = peer.open({"streamType": "data", "port": "80", "requestID": "0"})
        peer.write(data, b"x" * 200_000, fin=True)
        await peer.wait(data)
        assert bytes(data.data) == b"x" * 200_000
        # What the server read was acknowledged, for the stream and for the connection.
        acknowledged: set[int] = set()
        while acknowledged != {0, data.id}:
            update = await control_frame(peer, frames.WindowUpdate)
            acknowledged.add(update.stream_id)  # type: ignore[union-attr]
        await peer.close()


async def test_a_peer_that_does_flow_control_is_held_to_its_window(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, "/portForward/default/web", protocols=PORT_FORWARD
        )
        assert peer is not None
        peer.send(frames.Settings(((0, frames.SETTINGS_INITIAL_WINDOW_SIZE, 1000),)))
        peer.open({"streamType": "error", "port": "80", "requestID": "0"}, fin=True)
        data = peer.open({"streamType": "data", "port": "80", "requestID": "0"})
        peer.write(data, b"y" * 5000)
        await peer.wait_for_data(data, lambda received: len(received) >= 1000)
        await asyncio.sleep(0.3)  # sampling that nothing beyond the window comes (noqa: sleep-ok)
        assert len(data.data) == 1000
        peer.send(frames.WindowUpdate(data.id, 4000))
        peer.send(frames.WindowUpdate(0, 100_000))
        assert await peer.wait_for_data(data, lambda received: len(received) == 5000) == b"y" * 5000
        await peer.close()


async def test_an_even_or_repeated_stream_id_is_refused(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, "/portForward/default/web", protocols=PORT_FORWARD
        )
        assert peer is not None
        peer.send(frames.SynStream(2, frames.make_headers({"streamType": "error"})))
        assert await control_frame(peer, frames.RstStream) == frames.RstStream(2, frames.PROTOCOL_ERROR)
        await peer.close()


async def test_a_malformed_frame_ends_the_connection_with_goaway(tmp_path: Path) -> None:
    provider = await mock(tmp_path)
    async with serving(mock_streaming(provider), provider) as port:
        _, _, _, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, "/portForward/default/web", protocols=PORT_FORWARD
        )
        assert peer is not None
        peer.writer.write(b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01")  # a SPDY/2 PING
        goaway = await control_frame(peer, frames.GoAway)
        assert goaway.status == frames.GOAWAY_PROTOCOL_ERROR  # type: ignore[union-attr]
        await asyncio.wait_for(peer.closed.wait(), 5)
        await peer.close()
