"""A server-side SPDY/3.1 connection over an asyncio transport: streams the peer opens, and their data.

The peer (the apiserver, or kubectl through it) opens every stream (odd ids); each is accepted at once
with an empty SYN_REPLY, as the kubelet does, and handed to `on_stream`. A stream reads until the
peer's FIN (or a reset) and writes until ours.

Flow control: what we receive is acknowledged with WINDOW_UPDATEs as the application consumes it, so a
peer that honours windows never stalls. What we send is held to the peer's windows only once the peer
has shown that it does flow control at all (a WINDOW_UPDATE or an initial-window SETTING): Go's
spdystream, which the apiserver and kubectl use, never sends a WINDOW_UPDATE, and holding it to 64 KiB
would stall every stream for good. The transport's own buffers bound memory either way: writes wait
for the transport to drain, and reading pauses while the application has a lot of data unread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable

from vk_provider.kit import spdyframes as frames
from vk_provider.kit.spdyframes import DEFAULT_WINDOW, Frame, Headers

logger = logging.getLogger(__name__)

WRITE_CHUNK_BYTES = 32 * 1024
PAUSE_READING_BYTES = 4 * 1024 * 1024
"""Unread data (all streams together) at which the connection stops reading from the peer."""
RESUME_READING_BYTES = 1024 * 1024


class StreamResetError(ConnectionError):
    """The stream was reset (by the peer, or because the connection ended) while it was written to."""


class SpdyStream:
    def __init__(
        self, connection: SpdyConnection, stream_id: int, headers: Headers, *, remote_fin: bool
    ) -> None:
        self.id = stream_id
        self.headers = headers
        self._connection = connection
        self._chunks: collections.deque[bytes] = collections.deque()
        self._readable = asyncio.Event()
        self.remote_closed = remote_fin
        """The peer has sent its FIN (or reset the stream): nothing more will be read."""
        self.local_closed = False
        self.reset_status: int | None = None
        self.send_window = connection.peer_initial_window
        self._window_open = asyncio.Event()
        self._window_open.set()
        self._unacknowledged = 0
        if remote_fin:
            self._readable.set()

    def header(self, name: str) -> str | None:
        return frames.header(self.headers, name)

    @property
    def buffered(self) -> int:
        return sum(map(len, self._chunks))

    async def read(self) -> bytes:
        """The next chunk the peer sent; b"" once it has finished (FIN), reset, or the connection ended."""
        while not self._chunks:
            if self.remote_closed:
                return b""
            self._readable.clear()
            await self._readable.wait()
        chunk = self._chunks.popleft()
        self._consumed(len(chunk))
        return chunk

    async def read_all(self, limit: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        while chunk := await self.read():
            size += len(chunk)
            if size > limit:
                raise ValueError(f"stream {self.id} sent more than {limit} bytes")
            parts.append(chunk)
        return b"".join(parts)

    async def write(self, data: bytes) -> None:
        """Send `data` (in frames the windows allow); raises StreamResetError if the stream is gone."""
        view = memoryview(data)
        while view:
            self._check_writable()
            await self._connection.wait_send_window(self)
            self._check_writable()
            size = min(len(view), WRITE_CHUNK_BYTES, self._connection.send_allowance(self))
            self._connection.send_data(self, bytes(view[:size]), fin=False)
            view = view[size:]
            await self._connection.drain()

    async def close_write(self) -> None:
        """Send our FIN (idempotent; nothing if the stream is already reset)."""
        if self.local_closed or self.reset_status is not None or self._connection.closed.is_set():
            return
        self._connection.send_data(self, b"", fin=True)
        await self._connection.drain()

    def reset(self, status: int = frames.CANCEL) -> None:
        if self.reset_status is None and not (self.local_closed and self.remote_closed):
            self._connection.send_frame(frames.RstStream(self.id, status))
        self._was_reset(status)

    def _check_writable(self) -> None:
        if self.reset_status is not None or self._connection.closed.is_set():
            raise StreamResetError(f"SPDY stream {self.id} is closed")
        if self.local_closed:
            raise StreamResetError(f"SPDY stream {self.id} was already finished")

    # Called by the connection.

    def _received(self, data: bytes, fin: bool) -> None:
        if data and not self.remote_closed:
            self._chunks.append(data)
        if fin:
            self.remote_closed = True
        self._readable.set()

    def _was_reset(self, status: int) -> None:
        dropped = self.buffered
        self._chunks.clear()  # nobody will read a reset stream's data: release it (and the window)
        if dropped:
            self._connection.consumed(dropped)
        self.reset_status = status
        self.remote_closed = True
        self._readable.set()
        self._window_open.set()
        self._connection.forget(self)

    def _consumed(self, size: int) -> None:
        self._unacknowledged += size
        if self._unacknowledged >= DEFAULT_WINDOW // 2 and not self.remote_closed:
            self._connection.send_frame(frames.WindowUpdate(self.id, self._unacknowledged))
            self._unacknowledged = 0
        self._connection.consumed(size)


class SpdyConnection(asyncio.Protocol):
    """The server end of one SPDY/3.1 connection; `on_stream` receives each stream the peer opens."""

    def __init__(self, on_stream: Callable[[SpdyStream], None], *, idle_timeout_seconds: float) -> None:
        self._on_stream = on_stream
        self._idle_timeout = idle_timeout_seconds
        self._encoder = frames.FrameEncoder()
        self._decoder = frames.FrameDecoder()
        self._transport: asyncio.Transport | None = None
        self._streams: dict[int, SpdyStream] = {}
        self._last_peer_stream = 0
        self._writable = asyncio.Event()
        self._writable.set()
        self._reading_paused = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self.peer_initial_window = DEFAULT_WINDOW
        self.peer_does_flow_control = False
        self.send_window = DEFAULT_WINDOW
        self._connection_window_open = asyncio.Event()
        self._connection_window_open.set()
        self._unacknowledged = 0
        self.unread = 0
        """Bytes received on all streams that the application has not read yet."""
        self.closed = asyncio.Event()
        """Set when the transport has closed, for whatever reason."""
        self.going_away = False
        """The peer sent GOAWAY: it opens no more streams."""

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not isinstance(transport, asyncio.Transport):
            raise TypeError("SPDY runs over a stream transport")
        self._transport = transport
        self._touch()

    def data_received(self, data: bytes) -> None:
        self._touch()
        try:
            for frame in self._decoder.feed(data):
                self._handle(frame)
        except frames.SpdyProtocolError as error:
            logger.warning("SPDY: %s; closing the connection", error)
            self.send_frame(frames.GoAway(self._last_peer_stream, frames.GOAWAY_PROTOCOL_ERROR))
            self.abort()

    def eof_received(self) -> bool | None:
        return False  # the peer has finished sending: close

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self.closed.set()
        self._writable.set()
        self._connection_window_open.set()
        for stream in list(self._streams.values()):
            stream._was_reset(frames.CANCEL)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # For streams and sessions

    def send_frame(self, frame: Frame) -> None:
        if self._transport is None or self._transport.is_closing():
            return
        self._transport.write(self._encoder.encode(frame))

    def send_data(self, stream: SpdyStream, data: bytes, *, fin: bool) -> None:
        self._touch()
        stream.send_window -= len(data)
        self.send_window -= len(data)
        if fin:
            stream.local_closed = True
        self.send_frame(frames.DataFrame(stream.id, data, fin=fin))
        if stream.local_closed and stream.remote_closed:
            self.forget(stream)

    async def drain(self) -> None:
        await self._writable.wait()

    async def wait_send_window(self, stream: SpdyStream) -> None:
        while self.peer_does_flow_control and not self.closed.is_set() and stream.reset_status is None:
            if stream.send_window <= 0:
                stream._window_open.clear()
                await stream._window_open.wait()
            elif self.send_window <= 0:
                self._connection_window_open.clear()
                await self._connection_window_open.wait()
            else:
                return

    def send_allowance(self, stream: SpdyStream) -> int:
        if not self.peer_does_flow_control:
            return WRITE_CHUNK_BYTES
        return max(1, min(stream.send_window, self.send_window))

    def consumed(self, size: int) -> None:
        self.unread -= size
        self._unacknowledged += size
        if self._unacknowledged >= DEFAULT_WINDOW // 2:
            self.send_frame(frames.WindowUpdate(0, self._unacknowledged))
            self._unacknowledged = 0
        if self._reading_paused and self.unread <= RESUME_READING_BYTES and self._transport is not None:
            self._reading_paused = False
            self._transport.resume_reading()

    def forget(self, stream: SpdyStream) -> None:
        finished = stream.reset_status is not None or (stream.local_closed and stream.remote_closed)
        if finished and self._streams.get(stream.id) is stream:
            del self._streams[stream.id]

    async def close(self) -> None:
        """Say goodbye (GOAWAY) and close the transport once what is buffered has been written."""
        if self._transport is None or self._transport.is_closing():
            return
        self.send_frame(frames.GoAway(self._last_peer_stream, frames.GOAWAY_OK))
        self._transport.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self.closed.wait()
        if not self.closed.is_set():
            self.abort()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    # Frames from the peer

    def _handle(self, frame: Frame) -> None:
        if isinstance(frame, frames.DataFrame):
            self._on_data(frame)
        elif isinstance(frame, frames.SynStream):
            self._on_syn_stream(frame)
        elif isinstance(frame, frames.RstStream):
            stream = self._streams.get(frame.stream_id)
            if stream is not None:
                stream._was_reset(frame.status)
        elif isinstance(frame, frames.Ping):
            if frame.ping_id % 2 == 1:  # the peer's (odd ids: the client's); echo it back
                self.send_frame(frame)
        elif isinstance(frame, frames.WindowUpdate):
            self._on_window_update(frame)
        elif isinstance(frame, frames.Settings):
            self._on_settings(frame)
        elif isinstance(frame, frames.GoAway):
            self.going_away = True
        elif isinstance(frame, frames.HeadersFrame):
            stream = self._streams.get(frame.stream_id)
            if stream is not None and frame.fin:
                stream._received(b"", fin=True)
                self.forget(stream)
        # SYN_REPLY: we open no streams, so there is nothing to reply to; ignored.

    def _on_syn_stream(self, frame: frames.SynStream) -> None:
        if frame.stream_id % 2 == 0 or frame.stream_id <= self._last_peer_stream:
            # Ids must be odd (client-initiated) and increase; anything else breaks the protocol.
            self.send_frame(frames.RstStream(frame.stream_id, frames.PROTOCOL_ERROR))
            return
        self._last_peer_stream = frame.stream_id
        if self.going_away:
            self.send_frame(frames.RstStream(frame.stream_id, frames.REFUSED_STREAM))
            return
        stream = SpdyStream(self, frame.stream_id, frame.headers, remote_fin=frame.fin)
        self._streams[stream.id] = stream
        self.send_frame(frames.SynReply(stream.id, ()))
        self._on_stream(stream)

    def _on_data(self, frame: frames.DataFrame) -> None:
        stream = self._streams.get(frame.stream_id)
        if stream is None or stream.remote_closed:
            if frame.data:
                self.unread += len(frame.data)
                self.consumed(len(frame.data))  # keep the connection's window honest all the same
            if stream is None:
                self.send_frame(frames.RstStream(frame.stream_id, frames.INVALID_STREAM))
            else:
                stream.reset(frames.STREAM_ALREADY_CLOSED)
            return
        self.unread += len(frame.data)
        stream._received(frame.data, frame.fin)
        if frame.fin:
            self.forget(stream)
        if not self._reading_paused and self.unread > PAUSE_READING_BYTES and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    def _on_window_update(self, frame: frames.WindowUpdate) -> None:
        self.peer_does_flow_control = True
        if frame.stream_id == 0:
            self.send_window += frame.delta
            self._connection_window_open.set()
            return
        stream = self._streams.get(frame.stream_id)
        if stream is not None:
            stream.send_window += frame.delta
            stream._window_open.set()

    def _on_settings(self, frame: frames.Settings) -> None:
        for _flags, key, value in frame.entries:
            if key == frames.SETTINGS_INITIAL_WINDOW_SIZE:
                self.peer_does_flow_control = True
                change = value - self.peer_initial_window
                self.peer_initial_window = value
                for stream in self._streams.values():
                    stream.send_window += change
                    stream._window_open.set()

    def _touch(self) -> None:
        """Something happened: restart the idle timer."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._transport is not None and not self.closed.is_set():
            loop = asyncio.get_running_loop()
            self._idle_timer = loop.call_later(self._idle_timeout, self._idle)

    def _idle(self) -> None:
        logger.info("SPDY: closing a connection idle for %.0f s", self._idle_timeout)
        self.send_frame(frames.GoAway(self._last_peer_stream, frames.GOAWAY_OK))
        if self._transport is not None:
            self._transport.close()
