"""Port-forward to a remote pod: SPDY tunnelled through a WebSocket to the remote apiserver.

Since Kubernetes 1.31 an apiserver accepts a WebSocket with the subprotocol
`SPDY/3.1+portforward.k8s.io` on a pod's `portforward` subresource and carries its binary messages, as
one byte stream, to the kubelet's SPDY port-forward (this is how kubectl forwards today). So we speak
the client side of `portforward.k8s.io` over it, one WebSocket per forwarded connection: an error
stream (its FIN sent at once: the client never writes to it) and a data stream, both naming the port.
The far side ignores SPDY flow control (Go's spdystream never sends WINDOW_UPDATE), so this does not
keep windows either; the WebSocket's own buffers pace the data.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp

from vk_provider.errors import ProviderError
from vk_provider.kit import spdyframes as frames
from vk_provider.provider import ByteSink

TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
ERROR_STREAM, DATA_STREAM = 1, 3
MAX_FRAME_BYTES = 32 * 1024


async def forward_through_tunnel(
    socket: aiohttp.ClientWebSocketResponse, port: int, incoming: AsyncIterator[bytes], send: ByteSink
) -> None:
    """Copy both ways until the remote has finished its side and ours has ended (or the socket closed)."""
    encoder = frames.FrameEncoder()

    async def write(frame: frames.Frame) -> None:
        await socket.send_bytes(encoder.encode(frame))

    common = (("port", str(port)), ("requestid", "0"))
    await write(frames.SynStream(ERROR_STREAM, frames.make_headers((("streamtype", "error"), *common))))
    await write(frames.DataFrame(ERROR_STREAM, b"", fin=True))
    await write(frames.SynStream(DATA_STREAM, frames.make_headers((("streamtype", "data"), *common))))

    async def upstream() -> None:
        async for chunk in incoming:
            for start in range(0, len(chunk), MAX_FRAME_BYTES):
                await write(frames.DataFrame(DATA_STREAM, chunk[start : start + MAX_FRAME_BYTES]))
        await write(frames.DataFrame(DATA_STREAM, b"", fin=True))

    sender = asyncio.ensure_future(upstream())
    try:
        error = await _receive(socket, write, send)
        if error:
            raise ProviderError(f"remote: {error}")
        await sender  # the remote finished its side: ours ends when the client's does
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sender
        await socket.close()


async def _receive(
    socket: aiohttp.ClientWebSocketResponse,
    write: object,
    send: ByteSink,
) -> str:
    """Deliver the data stream's bytes until its FIN (or a reset, or the socket's end); the error text."""
    decoder = frames.FrameDecoder()
    error = bytearray()
    async for message in socket:
        if message.type is not aiohttp.WSMsgType.BINARY:
            continue
        try:
            received = list(decoder.feed(message.data))
        except frames.SpdyProtocolError as problem:
            raise ProviderError(f"remote port-forward: {problem}") from None
        for frame in received:
            if isinstance(frame, frames.DataFrame) and frame.stream_id == ERROR_STREAM:
                error += frame.data
            elif isinstance(frame, frames.DataFrame) and frame.stream_id == DATA_STREAM:
                if frame.data:
                    await send(frame.data)
                if frame.fin:
                    return error.decode(errors="replace")
            elif isinstance(frame, frames.RstStream) and frame.stream_id == DATA_STREAM:
                return error.decode(errors="replace") or "the remote reset the connection"
            elif isinstance(frame, frames.Ping):
                await write(frame)  # type: ignore[operator]
            elif isinstance(frame, frames.GoAway):
                return error.decode(errors="replace")
    return error.decode(errors="replace")
