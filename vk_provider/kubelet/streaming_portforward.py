"""A port-forward session over SPDY (`portforward.k8s.io`): a pair of streams per forwarded connection.

For every connection it forwards, the client opens an `error` and a `data` stream with the same
`requestID` and `port` headers. Once both are there, the data stream is connected to the pod's port;
if that fails, the reason goes to the error stream (kubectl prints it), and both are finished. A pair
whose second stream does not come within the creation timeout is reset. The session lasts as long as
the connection: the client opens pairs whenever a local connection arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from vk_provider.errors import ProviderError
from vk_provider.kubelet.spdy.connection import SpdyStream, StreamResetError
from vk_provider.provider import ByteSink

logger = logging.getLogger(__name__)

Forward = Callable[[int, AsyncIterator[bytes], ByteSink], Awaitable[None]]


def request_id(stream: SpdyStream, kind: str) -> str:
    """The pair's id: the header, or (from clients older than the header) derived from the stream ids
    the client opens in order, error first, as the kubelet derives it."""
    value = stream.header("requestID")
    if value:
        return value
    return str(stream.id if kind == "error" else stream.id - 2)


class _Pair:
    def __init__(self) -> None:
        self.error: SpdyStream | None = None
        self.data: SpdyStream | None = None
        self.timer: asyncio.TimerHandle | None = None


class Session:
    def __init__(self, forward: Forward, *, creation_timeout_seconds: float) -> None:
        self._forward = forward
        self._creation_timeout = creation_timeout_seconds
        self._pairs: dict[str, _Pair] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def on_stream(self, stream: SpdyStream) -> None:
        kind = (stream.header("streamType") or "").lower()
        if kind not in ("error", "data"):
            logger.info("port-forward: refusing a stream of type %r", kind)
            stream.reset()
            return
        key = request_id(stream, kind)
        pair = self._pairs.setdefault(key, _Pair())
        if getattr(pair, kind) is not None:
            stream.reset()
            return
        setattr(pair, kind, stream)
        if pair.error is not None and pair.data is not None:
            del self._pairs[key]
            if pair.timer is not None:
                pair.timer.cancel()
            task = asyncio.get_running_loop().create_task(self._serve(pair.error, pair.data))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            pair.timer = asyncio.get_running_loop().call_later(self._creation_timeout, self._abandon, key)

    def _abandon(self, key: str) -> None:
        pair = self._pairs.pop(key, None)
        if pair is None:
            return
        logger.info("port-forward: request %s did not get both of its streams in time", key)
        for stream in (pair.error, pair.data):
            if stream is not None:
                stream.reset()

    async def run(self, gone: asyncio.Event, creation_timeout_seconds: float) -> None:
        try:
            await gone.wait()
        finally:
            for pair in self._pairs.values():
                if pair.timer is not None:
                    pair.timer.cancel()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.wait(list(self._tasks))

    async def _serve(self, error: SpdyStream, data: SpdyStream) -> None:
        port_text = data.header("port") or ""
        message: str | None = None
        try:
            port = int(port_text)
            if not 0 < port < 65536:
                raise ValueError
        except ValueError:
            message = f"invalid port {port_text!r}"
        else:
            try:
                await self._forward(port, _chunks(data), data.write)
            except ProviderError as problem:
                message = f"error forwarding port {port}: {problem}"
            except StreamResetError:
                pass  # the client gave up on this connection
            except Exception:
                logger.exception("port-forward to port %s failed", port)
                message = f"error forwarding port {port}: internal error; the node's log has the details"
        with contextlib.suppress(StreamResetError):
            if message is not None:
                await error.write(message.encode())
            await error.close_write()
            await data.close_write()


async def _chunks(stream: SpdyStream) -> AsyncIterator[bytes]:
    while chunk := await stream.read():
        yield chunk
