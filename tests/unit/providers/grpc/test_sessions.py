"""Exec, attach and port-forward across a plugin: the client's streams reach the provider's process
and its output and exit code come back; sizes, the end of input, cancellation and bad messages too."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.unit.kubelet import Hanging
from tests.unit.providers.grpc.support import plugin_for, socket_folder
from tests.unit.providers.mock.test_contract import MockHarness
from vk_provider.errors import CapabilityMissingError, InvalidPodError, NotFoundError
from vk_provider.plugin import serving
from vk_provider.plugin.status import error_of
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import (
    ContainerStreams,
    PodRef,
    SupportsAttach,
    SupportsExec,
    SupportsPortForward,
    TerminalSize,
)
from vk_provider.testing.contract import new_uid, wait_running


class Output:
    """A client's stdout or stderr: what arrived."""

    def __init__(self) -> None:
        self.data = bytearray()

    async def __call__(self, data: bytes) -> None:
        self.data += data


async def chunks(*items: bytes) -> AsyncIterator[bytes]:
    for item in items:
        yield item


async def sizes(*items: TerminalSize) -> AsyncIterator[TerminalSize]:
    for item in items:
        yield item


@contextlib.asynccontextmanager
async def running_mock(tmp_path: Path) -> AsyncIterator[tuple[Any, PodRef]]:
    """The mock provider as a plugin, with one running pod (container `server`)."""
    harness = MockHarness(tmp_path)
    async with socket_folder() as sockets, plugin_for(harness.provider, sockets / "m") as (client, _):
        request = harness.pod("streams", uid=new_uid())
        await client.create_pod(request)
        await wait_running(client, request.ref)
        yield client, request.ref
    await harness.provider.aclose()


async def test_exec_output_exit_codes_and_input_cross_the_plugin(tmp_path: Path) -> None:
    async with running_mock(tmp_path) as (client, ref):
        assert isinstance(client, SupportsExec)
        out, err = Output(), Output()
        code = await client.exec_in_container(
            ref, "server", ["echo", "hello", "plugin"], ContainerStreams(stdout=out, stderr=err)
        )
        assert (code, bytes(out.data), bytes(err.data)) == (0, b"hello plugin\n", b"")

        out, err = Output(), Output()
        code = await client.exec_in_container(
            ref, "server", ["fail", "3", "no", "luck"], ContainerStreams(stdout=out, stderr=err)
        )
        assert (code, bytes(out.data), bytes(err.data)) == (3, b"", b"no luck\n")

        out = Output()
        typed = [b"line one\n", b"x" * 100_000, b"\nlast\n"]  # larger than a queue of small chunks
        code = await client.exec_in_container(
            ref, "server", ["cat"], ContainerStreams(stdin=chunks(*typed), stdout=out)
        )
        assert code == 0
        assert bytes(out.data) == b"".join(typed)  # all of it, in order, and cat saw the end of input


async def test_a_process_that_ends_while_the_client_still_types_gives_its_exit_code(tmp_path: Path) -> None:
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"typing " * 1000
            await asyncio.sleep(0)

    async with running_mock(tmp_path) as (client, ref):
        for _ in range(20):  # the race between the plugin's end and the node's writes, many times
            out = Output()
            streams = ContainerStreams(stdin=endless(), stdout=out)
            assert await client.exec_in_container(ref, "server", ["echo", "done"], streams) == 0
            assert bytes(out.data) == b"done\n"


async def test_a_tty_session_gets_the_terminal_size_and_no_stderr(tmp_path: Path) -> None:
    async with running_mock(tmp_path) as (client, ref):
        out = Output()
        streams = ContainerStreams(stdout=out, tty=True, resize=sizes(TerminalSize(width=132, height=43)))
        assert await client.exec_in_container(ref, "server", ["stty", "size"], streams) == 0
        assert bytes(out.data) == b"43 132\r\n"
        out = Output()
        assert (
            await client.exec_in_container(ref, "server", ["stty", "size"], ContainerStreams(stdout=out)) == 1
        )
        assert b"Not a tty" in out.data


async def test_attach_and_port_forward_copy_both_ways(tmp_path: Path) -> None:
    async with running_mock(tmp_path) as (client, ref):
        assert isinstance(client, SupportsAttach)
        assert isinstance(client, SupportsPortForward)
        out = Output()
        await client.attach_to_container(
            ref, "server", ContainerStreams(stdin=chunks(b"a", b"b"), stdout=out)
        )
        assert bytes(out.data) == b"ab"
        answered = Output()
        sent = [b"GET / HTTP/1.1\r\n\r\n", b"y" * 200_000]
        await client.port_forward(ref, 8080, chunks(*sent), answered)
        assert bytes(answered.data) == b"".join(sent)


async def test_an_unknown_container_or_pod_is_not_found(tmp_path: Path) -> None:
    async with running_mock(tmp_path) as (client, ref):
        with pytest.raises(NotFoundError, match="no container 'sidecar'"):
            await client.exec_in_container(ref, "sidecar", ["echo"], ContainerStreams())
        missing = PodRef("default", "gone", new_uid())
        with pytest.raises(NotFoundError, match="not known to the mock provider"):
            await client.port_forward(missing, 8080, chunks(b"x"), Output())


class Waiting(Hanging):
    """An exec that waits until cancelled, and a port-forward that bad messages must never reach."""

    async def port_forward(self, ref: PodRef, port: int, incoming: AsyncIterator[bytes], send: Any) -> None:
        raise AssertionError("a bad start message reached the provider")


async def test_a_client_that_leaves_cancels_the_plugin_s_process() -> None:
    waiting = Waiting()
    async with socket_folder() as sockets, plugin_for(waiting, sockets / "w") as (client, _):
        assert isinstance(client, SupportsExec)
        assert not isinstance(client, SupportsAttach)  # not declared, so not offered
        session = asyncio.create_task(
            client.exec_in_container(PodRef("d", "p", "u"), "c", ["sleep", "600"], ContainerStreams())
        )
        async with asyncio.timeout(10):
            await waiting.started.wait()
        session.cancel()
        async with asyncio.timeout(10):
            await waiting.cancelled.wait()
        with pytest.raises(asyncio.CancelledError):
            await session


async def test_a_plugin_without_a_capability_refuses_it_and_bad_messages_are_refused(tmp_path: Path) -> None:
    waiting = Waiting()
    async with (
        socket_folder() as sockets,
        serving(waiting, f"unix://{sockets / 'raw'}", name="raw"),
        grpc.aio.insecure_channel(f"unix://{sockets / 'raw'}") as channel,
    ):

        async def session(method: str, *messages: Any, output: type[Any] = pb.ContainerOutput) -> Exception:
            call = channel.stream_stream(
                f"/vk_provider.plugin.v1.Provider/{method}",
                request_serializer=lambda message: message.SerializeToString(),
                response_deserializer=output.FromString,
            )(iter(messages))
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                async for _ in call:
                    pass
            error = failed.value
            return error_of(error.code(), error.details() or "", (), call=method)

        refused = await session("Attach", pb.ContainerInput(stdin=b"x"))
        assert isinstance(refused, CapabilityMissingError), refused
        no_start = await session("Exec", pb.ContainerInput(stdin=b"x"))
        assert isinstance(no_start, InvalidPodError)
        assert "the first message must be `start`" in str(no_start)
        start = pb.ContainerStreamStart(ref=pb.PodRef(uid="u"), container="c")
        no_command = await session("Exec", pb.ContainerInput(start=start))
        assert "the start message has no command" in str(no_command)
        bad_port = await session(
            "PortForward",
            pb.PortForwardInput(start=pb.PortForwardStart(ref=pb.PodRef(uid="u"), port=70000)),
            output=pb.PortForwardOutput,
        )
        assert "port 70000 is not a TCP port" in str(bad_port)
