"""The node's side of exec, attach and port-forward over a plugin: the client's streams written into a
bidirectional call (`start` first), the plugin's output read back into the client's sinks.

The input waits for the plugin's response headers (it sends them once it takes input): a session the
plugin refuses at once then ends with the plugin's status. (In grpc-python a write that fails because
the call has just ended replaces the call's status with a bare INTERNAL, so a write racing the
plugin's refusal would hide why.) The input is written by one task per stream, through one lock,
while this one reads the output; the plugin's last message (`exit_code`, `ended`, `closed`) ends the
session, and the writers are cancelled. A call has no deadline: it lasts as long as the client's
session, which cancels it when the client leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import Message

from vk_provider.plugin.convert import MessageError
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import ByteSink, ContainerStreams, TerminalSize

logger = logging.getLogger(__name__)

Write = Callable[[Message], Awaitable[None]]
ContainerCall = grpc.aio.StreamStreamCall[Message, pb.ContainerOutput]
PortForwardCall = grpc.aio.StreamStreamCall[Message, pb.PortForwardOutput]


async def container_session(
    call: ContainerCall, start: pb.ContainerStreamStart, streams: ContainerStreams
) -> pb.ContainerOutput | None:
    """Run one Exec or Attach call; the plugin's last message (`exit_code` or `ended`), None if the
    call ended without one. Raises the call's AioRpcError when it fails, MessageError on garbage."""
    write = _writer(call)
    await write(pb.ContainerInput(start=start))
    writers = []
    if streams.stdin is not None:
        writers.append(_start_writing(call, _stdin_messages(streams.stdin), write, "stdin"))
    if streams.resize is not None:
        writers.append(_start_writing(call, _size_messages(streams.resize), write, "terminal sizes"))
    try:
        async for output in call:
            if output is None:  # grpc logs why the bytes did not parse, and gives None
                raise MessageError("bytes that are not a ContainerOutput message")
            kind = output.WhichOneof("output")
            if kind == "stdout":
                await _deliver(streams.stdout, output.stdout)
            elif kind == "stderr":
                await _deliver(streams.stderr, output.stderr)
            elif kind in ("exit_code", "ended"):
                return output
        return None
    finally:
        await _stop(writers)
        call.cancel()


async def port_forward_session(
    call: PortForwardCall, start: pb.PortForwardStart, incoming: AsyncIterator[bytes], send: ByteSink
) -> None:
    """Run one PortForward call until the plugin says both directions are done. Raises the call's
    AioRpcError when it fails, and ConnectionError when it ends without saying so."""
    write = _writer(call)
    await write(pb.PortForwardInput(start=start))

    async def messages() -> AsyncIterator[Message]:
        async for data in incoming:
            yield pb.PortForwardInput(data=data)
        yield pb.PortForwardInput(close_write=True)

    writer = _start_writing(call, messages(), write, "port-forward input")
    try:
        async for output in call:
            if output is None:
                raise MessageError("bytes that are not a PortForwardOutput message")
            if output.WhichOneof("output") == "data":
                await send(output.data)
            elif output.WhichOneof("output") == "closed":
                return
        raise ConnectionError("the plugin ended PortForward without closing it")
    finally:
        await _stop([writer])
        call.cancel()


def _writer(call: grpc.aio.StreamStreamCall[Message, Any]) -> Write:
    lock = asyncio.Lock()

    async def write(message: Message) -> None:
        async with lock:
            await call.write(message)

    return write


def _start_writing(
    call: grpc.aio.StreamStreamCall[Message, Any],
    messages: AsyncIterator[Message],
    write: Write,
    what: str,
) -> asyncio.Task[None]:
    async def forward() -> None:
        try:
            await call.initial_metadata()  # the plugin takes input (see the module's docstring)
            async for message in messages:
                await write(message)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, ConnectionError) as error:
            # The call has ended or the client has gone: the output side reports how it ended.
            logger.debug("plugin session: %s no longer written (%s)", what, error)

    return asyncio.create_task(forward())


async def _stdin_messages(stdin: AsyncIterator[bytes]) -> AsyncIterator[Message]:
    async for chunk in stdin:
        yield pb.ContainerInput(stdin=chunk)
    yield pb.ContainerInput(stdin_closed=True)


async def _size_messages(sizes: AsyncIterator[TerminalSize]) -> AsyncIterator[Message]:
    async for size in sizes:
        yield pb.ContainerInput(resize=pb.TerminalSize(width=size.width, height=size.height))


async def _deliver(sink: ByteSink | None, data: bytes) -> None:
    if sink is not None and data:
        await sink(data)


async def _stop(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await task
            except Exception:  # the client's own input broke; the session ends either way
                logger.exception("plugin session: forwarding the client's input failed")
