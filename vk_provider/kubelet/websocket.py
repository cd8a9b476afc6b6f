"""Exec, attach and port-forward over WebSocket: what an apiserver passes straight through to a node
that declares `ExtendWebSocketsToKubelet` (Kubernetes 1.36 and later), instead of speaking SPDY to it.

Exec and attach speak the channel protocol, `v5.channel.k8s.io` or `v4.channel.k8s.io`: each binary
message starts with its channel (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize); v5 lets the client
close stdin with a message on channel 255 naming it. The session itself is the SPDY one
(`streaming_exec.Session`): only the streams differ. Port-forward is `SPDY/3.1+portforward.k8s.io`:
the WebSocket's binary messages carry a SPDY connection, served by the same `SpdyConnection` through a
transport that writes WebSocket messages.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Any

from aiohttp import WSMsgType, web

from vk_provider.kubelet import streaming_exec, streaming_portforward
from vk_provider.kubelet.spdy.connection import SpdyConnection

logger = logging.getLogger(__name__)

V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
CHANNEL_PROTOCOLS = (V5, V4)
TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
CHANNELS = {
    streaming_exec.STDIN: 0,
    streaming_exec.STDOUT: 1,
    streaming_exec.STDERR: 2,
    streaming_exec.ERROR: 3,
    streaming_exec.RESIZE: 4,
}
CLOSE_CHANNEL = 255
INPUT_QUEUE_MESSAGES = 64
"""Messages from the client held for a slow reader before the WebSocket stops being read."""
TRANSPORT_HIGH_WATER_BYTES = 1024 * 1024


def is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


class _Input:
    """A channel the client writes (stdin, resize)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(INPUT_QUEUE_MESSAGES)
        self._ended = False

    async def feed(self, data: bytes) -> None:
        if data and not self._ended:
            await self._queue.put(data)

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(b"")

    async def read(self) -> bytes:
        if self._ended and self._queue.empty():
            return b""
        return await self._queue.get()

    async def write(self, data: bytes) -> None:
        raise ConnectionError("an input channel cannot be written")

    async def close_write(self) -> None:
        return None


class _Output:
    """A channel we write (stdout, stderr, error)."""

    def __init__(self, socket: web.WebSocketResponse, channel: int) -> None:
        self._socket = socket
        self._prefix = bytes([channel])

    async def read(self) -> bytes:
        return b""

    async def write(self, data: bytes) -> None:
        if self._socket.closed:
            raise ConnectionError("the client has gone")
        await self._socket.send_bytes(self._prefix + data)

    async def close_write(self) -> None:
        return None  # the WebSocket's close ends every channel


async def serve_channels(
    request: web.Request, session: streaming_exec.Session, creation_timeout_seconds: float
) -> web.StreamResponse:
    """Exec or attach over the channel protocol."""
    socket = web.WebSocketResponse(protocols=CHANNEL_PROTOCOLS, max_msg_size=0)
    await socket.prepare(request)
    if socket.ws_protocol not in CHANNEL_PROTOCOLS:
        await socket.close(message=b"offer v5.channel.k8s.io or v4.channel.k8s.io")
        return socket
    inputs: dict[int, _Input] = {}
    for kind in session.options.expected():
        channel = CHANNELS[kind]
        if kind in (streaming_exec.STDIN, streaming_exec.RESIZE):
            inputs[channel] = _Input()
            session.add(kind, inputs[channel])
        else:
            session.add(kind, _Output(socket, channel))
    gone = asyncio.Event()
    reader = asyncio.ensure_future(_read_channels(socket, inputs, closable=socket.ws_protocol == V5))
    reader.add_done_callback(lambda _: gone.set())
    try:
        await session.run(gone, creation_timeout_seconds)
    finally:
        reader.cancel()
        await socket.close()
    return socket


async def _read_channels(socket: web.WebSocketResponse, inputs: dict[int, _Input], *, closable: bool) -> None:
    try:
        async for message in socket:
            if message.type is not WSMsgType.BINARY or not message.data:
                continue
            channel, payload = message.data[0], message.data[1:]
            if channel == CLOSE_CHANNEL and closable and payload and payload[0] in inputs:
                inputs[payload[0]].end()
            elif channel in inputs:
                await inputs[channel].feed(payload)
    finally:
        for item in inputs.values():
            item.end()


class _WebSocketTransport(asyncio.Transport):
    """Lets `SpdyConnection` write to a WebSocket as it writes to a socket (one message per write)."""

    def __init__(self, socket: web.WebSocketResponse, protocol: SpdyConnection) -> None:
        super().__init__()
        self._socket = socket
        self._protocol = protocol
        self._pending: collections.deque[bytes] = collections.deque()
        self._pending_bytes = 0
        self._wake = asyncio.Event()
        self._closing = False
        self._paused_writing = False
        self._reading = asyncio.Event()
        self._reading.set()
        self._writer = asyncio.ensure_future(self._write_all())

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        self._pending.append(bytes(data))
        self._pending_bytes += len(data)
        self._wake.set()
        if not self._paused_writing and self._pending_bytes > TRANSPORT_HIGH_WATER_BYTES:
            self._paused_writing = True
            self._protocol.pause_writing()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        self._wake.set()  # the writer sends what is pending, then closes the WebSocket

    def abort(self) -> None:
        self._closing = True
        self._pending.clear()
        self._wake.set()

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    async def wait_readable(self) -> None:
        await self._reading.wait()

    async def _write_all(self) -> None:
        try:
            while True:
                while self._pending:
                    data = self._pending.popleft()
                    self._pending_bytes -= len(data)
                    await self._socket.send_bytes(data)
                    if self._paused_writing and self._pending_bytes < TRANSPORT_HIGH_WATER_BYTES // 4:
                        self._paused_writing = False
                        self._protocol.resume_writing()
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
        except ConnectionError:
            return
        finally:
            self._closing = True
            await self._socket.close()


async def serve_tunnel(
    request: web.Request,
    session: streaming_portforward.Session,
    *,
    creation_timeout_seconds: float,
    idle_timeout_seconds: float,
) -> web.StreamResponse:
    """Port-forward: a SPDY connection inside the WebSocket (what kubectl sends, passed through)."""
    socket = web.WebSocketResponse(protocols=(TUNNEL_PROTOCOL,), max_msg_size=0)
    await socket.prepare(request)
    if socket.ws_protocol != TUNNEL_PROTOCOL:
        await socket.close(message=b"port-forward over WebSocket needs SPDY/3.1+portforward.k8s.io")
        return socket
    connection = SpdyConnection(session.on_stream, idle_timeout_seconds=idle_timeout_seconds)
    transport = _WebSocketTransport(socket, connection)
    connection.connection_made(transport)

    async def read() -> None:
        try:
            async for message in socket:
                if message.type is WSMsgType.BINARY:
                    await transport.wait_readable()
                    connection.data_received(message.data)
        finally:
            connection.connection_lost(None)

    reader = asyncio.ensure_future(read())
    try:
        await session.run(connection.closed, creation_timeout_seconds)
    finally:
        transport.close()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        await socket.close()
    return socket
