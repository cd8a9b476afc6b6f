"""Exec and attach on a remote pod, through the remote apiserver's WebSocket channel protocol.

The remote apiserver speaks `v5.channel.k8s.io` (and `v4`) on a pod's `exec` and `attach` subresources:
every binary message starts with its channel (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize), v5 adds
channel 255 to close one (here: stdin, so the command sees its end). The error channel brings the
`metav1.Status` that carries the exit code, as on our own kubelet API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from vk_provider.errors import ProviderError
from vk_provider.provider import ContainerStreams, TerminalSize

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


def stream_query(container: str, streams: ContainerStreams) -> list[tuple[str, str]]:
    def flag(value: bool) -> str:
        return "true" if value else "false"

    return [
        ("container", container),
        ("stdin", flag(streams.stdin is not None)),
        ("stdout", flag(streams.stdout is not None)),
        ("stderr", flag(streams.stderr is not None)),
        ("tty", flag(streams.tty)),
    ]


def exit_code_of(status: dict[str, Any]) -> int:
    """0 for Success, the code for NonZeroExitCode; any other failure is the remote's message."""
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in (status.get("details") or {}).get("causes") or ():
            if cause.get("reason") == "ExitCode":
                with contextlib.suppress(TypeError, ValueError):
                    return int(cause.get("message"))
    raise ProviderError(f"remote: {status.get('message') or 'the command failed'}")


async def run_channels(socket: aiohttp.ClientWebSocketResponse, streams: ContainerStreams) -> int:
    """Carry the streams over `socket` until the remote closes it; the exit code."""
    senders = [
        asyncio.ensure_future(_send_stdin(socket, streams.stdin)),
        asyncio.ensure_future(_send_sizes(socket, streams.resize)),
    ]
    error = bytearray()
    try:
        async for message in socket:
            if message.type is not aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, payload = message.data[0], message.data[1:]
            if channel == STDOUT and streams.stdout is not None and payload:
                await streams.stdout(payload)
            elif channel == STDERR and streams.stderr is not None and payload:
                await streams.stderr(payload)
            elif channel == ERROR:
                error += payload
    finally:
        for task in senders:
            task.cancel()
        await asyncio.wait(senders)
        await socket.close()
    if not error:
        return 0  # v1-style servers close without a status on success
    try:
        status = json.loads(error)
    except ValueError:
        raise ProviderError(f"remote: {error.decode(errors='replace')}") from None
    return exit_code_of(status)


async def _send_stdin(socket: aiohttp.ClientWebSocketResponse, chunks: AsyncIterator[bytes] | None) -> None:
    if chunks is None:
        return
    with contextlib.suppress(ConnectionError):
        async for chunk in chunks:
            await socket.send_bytes(bytes([STDIN]) + chunk)
        if socket.protocol == PROTOCOLS[0]:
            await socket.send_bytes(bytes([CLOSE, STDIN]))


async def _send_sizes(
    socket: aiohttp.ClientWebSocketResponse, sizes: AsyncIterator[TerminalSize] | None
) -> None:
    if sizes is None:
        return
    with contextlib.suppress(ConnectionError):
        async for size in sizes:
            message = json.dumps({"Width": size.width, "Height": size.height}).encode()
            await socket.send_bytes(bytes([RESIZE]) + message)
