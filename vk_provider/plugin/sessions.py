"""The plugin's side of exec, attach and port-forward: a bidirectional call turned into the streams an
in-process provider takes (`ContainerStreams`, or the incoming bytes and sink of a port-forward).

The node's first message says what to run (`start`); what follows is split by kind: stdin bytes and
its end into the process's input, terminal sizes into `resize`. The response headers go out when the
provider first takes input or writes output: the node writes nothing after `start` before them, so a
session the provider refuses at once ends with the provider's status, not with a write that raced it.
The input is read only as fast as the provider takes it (a small queue), so gRPC's flow control slows
a client that types faster than the process reads. Output goes through one lock: the provider may
write stdout and stderr from two tasks, and a call takes one write at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from vk_provider.plugin import convert
from vk_provider.plugin.convert import MessageError
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import (
    ContainerStreams,
    PodRef,
    SupportsAttach,
    SupportsExec,
    SupportsPortForward,
    TerminalSize,
)

Context = grpc.aio.ServicerContext[Any, Any]
T = TypeVar("T")
INPUT_QUEUE_CHUNKS = 8
"""Stdin chunks read ahead of the process (each at most a gRPC message)."""


class _Replies:
    """The plugin's side of the call: headers once, then messages one at a time."""

    def __init__(self, context: Context) -> None:
        self._context = context
        self._lock = asyncio.Lock()
        self._headers_sent = False

    async def open(self) -> None:
        """Tell the node it may send input (the response headers), once."""
        async with self._lock:
            if not self._headers_sent:
                self._headers_sent = True
                await self._context.send_initial_metadata(())

    async def write(self, message: Message) -> None:
        async with self._lock:
            self._headers_sent = True  # a message carries the headers before it
            await self._context.write(message)


async def exec_session(
    provider: SupportsExec, requests: AsyncIterator[pb.ContainerInput], context: Context
) -> None:
    start = await _start(requests, "Exec")
    if not start.command:
        raise MessageError("Exec: the start message has no command")
    replies = _Replies(context)
    async with _container_streams(start, requests, replies) as (ref, streams):
        code = await provider.exec_in_container(ref, start.container, tuple(start.command), streams)
        await replies.write(pb.ContainerOutput(exit_code=code))


async def attach_session(
    provider: SupportsAttach, requests: AsyncIterator[pb.ContainerInput], context: Context
) -> None:
    start = await _start(requests, "Attach")
    replies = _Replies(context)
    async with _container_streams(start, requests, replies) as (ref, streams):
        await provider.attach_to_container(ref, start.container, streams)
        await replies.write(pb.ContainerOutput(ended=True))


async def port_forward_session(
    provider: SupportsPortForward, requests: AsyncIterator[pb.PortForwardInput], context: Context
) -> None:
    first = await anext(requests, None)
    if first is None or first.WhichOneof("input") != "start":
        raise MessageError("PortForward: the first message must be `start`")
    if not 0 < first.start.port < 65536:
        raise MessageError(f"PortForward: port {first.start.port} is not a TCP port")
    ref = convert.ref_value(first.start.ref)
    replies = _Replies(context)

    async def incoming() -> AsyncIterator[bytes]:
        await replies.open()
        async for message in requests:
            kind = message.WhichOneof("input")
            if kind == "data":
                yield message.data
            elif kind == "close_write":
                return
            else:
                raise MessageError(f"PortForward: unexpected {kind or 'empty message'} after start")

    async def send(data: bytes) -> None:
        await replies.write(pb.PortForwardOutput(data=data))

    await provider.port_forward(ref, first.start.port, incoming(), send)
    await replies.write(pb.PortForwardOutput(closed=True))


async def _start(requests: AsyncIterator[pb.ContainerInput], method: str) -> pb.ContainerStreamStart:
    first = await anext(requests, None)
    if first is None or first.WhichOneof("input") != "start":
        raise MessageError(f"{method}: the first message must be `start`")
    if not first.start.container:
        raise MessageError(f"{method}: the start message names no container")
    return first.start


@contextlib.asynccontextmanager
async def _container_streams(
    start: pb.ContainerStreamStart, requests: AsyncIterator[pb.ContainerInput], replies: _Replies
) -> AsyncIterator[tuple[PodRef, ContainerStreams]]:
    """The provider's streams over the call while the block runs; the input pump stops with it."""
    ref = convert.ref_value(start.ref)
    stdin: asyncio.Queue[bytes | None] = asyncio.Queue(INPUT_QUEUE_CHUNKS)
    sizes: asyncio.Queue[TerminalSize | None] = asyncio.Queue()

    async def stdout(data: bytes) -> None:
        await replies.write(pb.ContainerOutput(stdout=data))

    async def stderr(data: bytes) -> None:
        await replies.write(pb.ContainerOutput(stderr=data))

    async def taken(queue: asyncio.Queue[T | None]) -> AsyncIterator[T]:
        await replies.open()
        while (item := await queue.get()) is not None:
            yield item

    async def pump() -> None:
        stdin_open = start.stdin
        async for message in requests:
            kind = message.WhichOneof("input")
            if kind == "stdin" and stdin_open:
                await stdin.put(message.stdin)
            elif kind == "stdin_closed" and stdin_open:
                stdin_open = False
                await stdin.put(None)
            elif kind == "resize":
                sizes.put_nowait(TerminalSize(width=message.resize.width, height=message.resize.height))
            elif kind == "start":
                raise MessageError("a second `start` message")
        # The node is done sending: its client's input has ended, and no size will change again.
        sizes.put_nowait(None)
        if stdin_open:
            await stdin.put(None)

    streams = ContainerStreams(
        stdin=taken(stdin) if start.stdin else None,
        stdout=stdout if start.stdout else None,
        stderr=stderr if start.stderr and not start.tty else None,
        tty=start.tty,
        resize=taken(sizes) if start.tty else None,
    )
    # A bad message from the node fails the pump, which cancels the provider's call (that may be
    # waiting for input that will not come) and ends the session with the pump's error.
    async with asyncio.TaskGroup() as group:
        pumping = group.create_task(pump())
        try:
            yield ref, streams
        finally:
            pumping.cancel()
