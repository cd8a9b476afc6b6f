"""An exec or attach session over SPDY: the client's streams, the command, and the v4 exit status.

The client opens one stream per channel, named by its `streamType` header: `error` always, `stdin`,
`stdout` and `stderr` as asked in the query, and `resize` with a tty. Once all of them are there (within
the creation timeout) the command runs; when it ends, stdout and stderr are finished, and the error
stream carries a `metav1.Status`: Success, or Failure with reason NonZeroExitCode and the code as a
cause, which `kubectl exec` turns into its own exit code (remotecommand v4, kept by v5).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

from aiohttp import web

from vk_provider.errors import ProviderError
from vk_provider.kubelet.spdy.connection import SpdyStream
from vk_provider.provider import ContainerStreams, TerminalSize

logger = logging.getLogger(__name__)

MAX_RESIZE_MESSAGE_BYTES = 4096

STDIN, STDOUT, STDERR, ERROR, RESIZE = "stdin", "stdout", "stderr", "error", "resize"


@dataclasses.dataclass(frozen=True, slots=True)
class StreamOptions:
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    def expected(self) -> set[str]:
        names = {ERROR}
        for name, wanted in (
            (STDIN, self.stdin),
            (STDOUT, self.stdout),
            (STDERR, self.stderr),
            (RESIZE, self.tty),
        ):
            if wanted:
                names.add(name)
        return names


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("1", "true")


def parse_options(query: Mapping[str, str], *, require_command: bool) -> StreamOptions:
    """The kubelet's rules: some stream must be asked for, and a tty has no separate stderr."""
    options = StreamOptions(
        stdin=_flag(query, "input"),
        stdout=_flag(query, "output"),
        stderr=_flag(query, "error"),
        tty=_flag(query, "tty"),
    )
    if require_command and not query.get("command"):
        raise web.HTTPBadRequest(text="you must specify at least 1 command")
    if not (options.stdin or options.stdout or options.stderr):
        raise web.HTTPBadRequest(text="you must specify at least 1 of stdin, stdout, stderr")
    if options.tty and options.stderr:
        # kubectl never asks for both; the kubelet refuses, since a terminal has one output.
        raise web.HTTPBadRequest(text="stdout and stderr cannot both be requested with a tty")
    return options


def success_status() -> dict[str, Any]:
    return {"metadata": {}, "status": "Success"}


def failure_status(message: str, *, exit_code: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"metadata": {}, "status": "Failure", "message": message}
    if exit_code is not None:
        status["reason"] = "NonZeroExitCode"
        status["details"] = {"causes": [{"reason": "ExitCode", "message": str(exit_code)}]}
    return status


class Channel(Protocol):
    """One stream of a session: a SPDY stream, or a channel of a WebSocket (`websocket`)."""

    async def read(self) -> bytes:
        """The next chunk; b"" once the client has finished sending on it."""

    async def write(self, data: bytes) -> None:
        """Raises ConnectionError once the client has gone."""

    async def close_write(self) -> None: ...


class Session:
    """Collects the client's streams, runs `run` with them, and reports how it ended."""

    def __init__(self, options: StreamOptions, run: Callable[[ContainerStreams], Awaitable[int]]) -> None:
        self.options = options
        self._run = run
        self._streams: dict[str, Channel] = {}
        self._complete = asyncio.Event()

    def add(self, kind: str, channel: Channel) -> bool:
        """Take the client's stream of this kind; False if the session has no use for it."""
        if kind not in self.options.expected() or kind in self._streams:
            logger.info("exec: refusing an unexpected %r stream", kind)
            return False
        self._streams[kind] = channel
        if set(self._streams) == self.options.expected():
            self._complete.set()
        return True

    def on_stream(self, stream: SpdyStream) -> None:
        if not self.add((stream.header("streamType") or "").lower(), stream):
            stream.reset()

    async def run(self, gone: asyncio.Event, creation_timeout_seconds: float) -> None:
        """Serve once every stream is there; `gone` is set when the client's connection has ended."""
        closed = asyncio.ensure_future(gone.wait())
        complete = asyncio.ensure_future(self._complete.wait())
        try:
            await asyncio.wait(
                (closed, complete), timeout=creation_timeout_seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            closed.cancel()
            complete.cancel()
        if not self._complete.is_set():
            if not gone.is_set():
                logger.info(
                    "exec: the client did not open its streams within %.0f s", creation_timeout_seconds
                )
            return
        status = await self._serve(gone)
        error = self._streams[ERROR]
        with contextlib.suppress(ConnectionError):
            await error.write(json.dumps(status).encode())
            await error.close_write()

    async def _serve(self, client_gone: asyncio.Event) -> dict[str, Any]:
        streams = self._streams
        stdout, stderr = streams.get(STDOUT), streams.get(STDERR)
        container_streams = ContainerStreams(
            stdin=_chunks(streams[STDIN]) if STDIN in streams else None,
            stdout=stdout.write if stdout is not None else None,
            stderr=stderr.write if stderr is not None else None,
            tty=self.options.tty,
            resize=_sizes(streams[RESIZE]) if RESIZE in streams else None,
        )
        work = asyncio.ensure_future(self._run(container_streams))
        gone = asyncio.ensure_future(client_gone.wait())
        try:
            await asyncio.wait((work, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not work.done():
                # The client has gone: the provider ends the process and releases what it holds.
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await work
        if work.cancelled():
            return failure_status("the client disconnected")
        error = work.exception()
        for output in (stdout, stderr):
            if output is not None:
                with contextlib.suppress(ConnectionError):
                    await output.close_write()
        if isinstance(error, ProviderError):
            return failure_status(str(error))
        if isinstance(error, ConnectionError):
            return failure_status("the client closed an output stream")
        if error is not None:
            logger.error("exec: the provider failed", exc_info=error)
            return failure_status("internal error; the node's log has the details")
        exit_code = work.result()
        if exit_code == 0:
            return success_status()
        return failure_status(
            f"command terminated with non-zero exit code: exit code {exit_code}", exit_code=exit_code
        )


async def _chunks(stream: Channel) -> AsyncIterator[bytes]:
    while chunk := await stream.read():
        yield chunk


async def _sizes(stream: Channel) -> AsyncIterator[TerminalSize]:
    """The resize stream: JSON objects {"Width": w, "Height": h} one after another."""
    decoder = json.JSONDecoder()
    buffer = ""
    async for chunk in _chunks(stream):
        buffer += chunk.decode(errors="replace")
        while buffer.strip():
            try:
                value, end = decoder.raw_decode(buffer.lstrip())
            except ValueError:
                if len(buffer) > MAX_RESIZE_MESSAGE_BYTES:
                    logger.info("exec: dropping an unreadable resize message")
                    buffer = ""
                break
            buffer = buffer.lstrip()[end:]
            if isinstance(value, dict):
                width, height = value.get("Width"), value.get("Height")
                if isinstance(width, int) and isinstance(height, int) and width >= 0 and height >= 0:
                    yield TerminalSize(width=width, height=height)
