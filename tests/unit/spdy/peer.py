"""A minimal SPDY/3.1 client for tests: what the apiserver does towards a kubelet, written with our own
encoder and decoder (a separate implementation would be better; none exists for Python)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
from collections.abc import Mapping

from vk_provider.kit import spdyframes as frames


class PeerStream:
    def __init__(self, stream_id: int) -> None:
        self.id = stream_id
        self.data = bytearray()
        self.fin = False
        self.reset: int | None = None
        self.replied = False
        self.changed = asyncio.Event()


class SpdyPeer:
    """Opens streams (odd ids), sends data, and collects everything the server sends back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.encoder = frames.FrameEncoder()
        self.decoder = frames.FrameDecoder()
        self.streams: dict[int, PeerStream] = {}
        self.control: collections.deque[frames.Frame] = collections.deque()
        self.control_changed = asyncio.Event()
        self.closed = asyncio.Event()
        self._next_id = 1
        self._task = asyncio.ensure_future(self._read())

    @classmethod
    async def upgrade(
        cls,
        host: str,
        port: int,
        path: str,
        *,
        protocols: tuple[str, ...],
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> tuple[int, Mapping[str, str], bytes, SpdyPeer | None]:
        """Send the upgrade request; (status, headers, body, peer or None if it was not upgraded)."""
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl_context)
        lines = [
            f"{method} {path} HTTP/1.1",
            f"Host: {host}:{port}",
            "Connection: Upgrade",
            "Upgrade: SPDY/3.1",
        ]
        lines += [f"X-Stream-Protocol-Version: {protocol}" for protocol in protocols]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        lines += ["Content-Length: 0", "", ""]
        writer.write("\r\n".join(lines).encode())
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode().split("\r\n")
        status = int(status_line.split()[1])
        response_headers = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                response_headers[name.strip().lower()] = value.strip()
        if status != 101:
            length = int(response_headers.get("content-length", "0"))
            body = await reader.readexactly(length) if length else b""
            writer.close()
            return status, response_headers, body, None
        return status, response_headers, b"", cls(reader, writer)

    def send(self, frame: frames.Frame) -> None:
        self.writer.write(self.encoder.encode(frame))

    def open(self, headers: Mapping[str, str], *, fin: bool = False) -> PeerStream:
        stream = PeerStream(self._next_id)
        self._next_id += 2
        self.streams[stream.id] = stream
        self.send(frames.SynStream(stream.id, frames.make_headers(headers), fin=fin))
        return stream

    def write(self, stream: PeerStream, data: bytes, *, fin: bool = False) -> None:
        for start in range(0, max(len(data), 1), 65536):
            chunk = data[start : start + 65536]
            last = start + 65536 >= len(data)
            self.send(frames.DataFrame(stream.id, chunk, fin=fin and last))

    async def wait(self, stream: PeerStream, *, within: float = 10.0) -> PeerStream:
        """Until the server finished (FIN) or reset the stream."""
        async with asyncio.timeout(within):
            while not stream.fin and stream.reset is None:
                stream.changed.clear()
                await stream.changed.wait()
        return stream

    async def wait_for_data(self, stream: PeerStream, predicate: object, *, within: float = 10.0) -> bytes:
        async with asyncio.timeout(within):
            while not callable(predicate) or not predicate(bytes(stream.data)):
                if stream.fin or stream.reset is not None:
                    raise AssertionError(f"stream {stream.id} ended with {bytes(stream.data)!r}")
                stream.changed.clear()
                await stream.changed.wait()
        return bytes(stream.data)

    async def close(self) -> None:
        self.writer.close()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _read(self) -> None:
        try:
            while data := await self.reader.read(65536):
                for frame in self.decoder.feed(data):
                    self._handle(frame)
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            self.closed.set()
            for stream in self.streams.values():
                stream.changed.set()
            self.control_changed.set()

    def _handle(self, frame: frames.Frame) -> None:
        if isinstance(frame, frames.DataFrame):
            stream = self.streams[frame.stream_id]
            stream.data += frame.data
            stream.fin = stream.fin or frame.fin
            stream.changed.set()
        elif isinstance(frame, frames.SynReply):
            self.streams[frame.stream_id].replied = True
            self.streams[frame.stream_id].changed.set()
        elif isinstance(frame, frames.RstStream) and frame.stream_id in self.streams:
            self.streams[frame.stream_id].reset = frame.status
            self.streams[frame.stream_id].changed.set()
        else:
            self.control.append(frame)
            self.control_changed.set()
