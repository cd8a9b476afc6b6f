"""Plugins served in the test's own event loop over unix sockets, and `grpc` providers connected to them."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message

from vk_provider.plugin import serving
from vk_provider.plugin.server import SERVICE
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import PodLifecycle
from vk_providers.grpc.provider import GrpcSettings, plugin_info, provider_for


@contextlib.asynccontextmanager
async def socket_folder() -> AsyncIterator[Path]:
    """A short folder for sockets (a unix socket's path has at most 107 bytes; pytest's are long)."""
    folder = Path(tempfile.mkdtemp(prefix="vkp-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.asynccontextmanager
async def plugin_for(
    provider: PodLifecycle, socket: Path, *, name: str = "test-plugin", call_timeout_seconds: float = 10.0
) -> AsyncIterator[tuple[PodLifecycle, GrpcSettings]]:
    """`provider` served as a plugin on `socket`, and a `grpc` provider connected to it."""
    settings = GrpcSettings(
        f"unix://{socket}", call_timeout_seconds=call_timeout_seconds, connect_timeout_seconds=10
    )
    async with serving(provider, settings.address, name=name):
        # GetPluginInfo blocks (the node calls it once, at start): off the loop that serves the plugin.
        info = await asyncio.to_thread(plugin_info, settings, "test-node")
        client = provider_for(settings, info)
        try:
            yield client, settings
        finally:
            await client.aclose()


GARBAGE = object()
"""What a RawPlugin answers with bytes that parse as no message."""


@dataclasses.dataclass
class RawPlugin:
    """A plugin written by hand, its unary operations doing what the test sets, even while it runs:
    an answer (`answers`), bytes that are no message (`garbage`), no answer at all (`hangs`), and
    UNIMPLEMENTED for the rest. GetPluginInfo declares `capabilities`: logs by default, which it does
    not implement (what a plugin that lies about its capabilities does)."""

    answers: dict[str, Message] = dataclasses.field(default_factory=dict)
    garbage: set[str] = dataclasses.field(default_factory=set)
    hangs: set[str] = dataclasses.field(default_factory=set)
    api_version: str = "v1"
    capabilities: tuple[int, ...] = (pb.CAPABILITY_LOGS,)

    def handler(self) -> grpc.GenericRpcHandler:
        handlers = {
            method.name: grpc.unary_unary_rpc_method_handler(
                self._behaviour(method.name),
                request_deserializer=getattr(pb, method.input_type.name).FromString,
                response_serializer=_serialized,
            )
            for method in SERVICE.methods
            if not method.client_streaming and not method.server_streaming
        }
        return grpc.method_handlers_generic_handler(SERVICE.full_name, handlers)

    def _behaviour(self, name: str) -> Any:
        async def behave(request: Message, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if name == "GetPluginInfo":
                return pb.PluginInfo(
                    name="liar", version="0", api_version=self.api_version, capabilities=self.capabilities
                )
            if name in self.hangs:
                await asyncio.Event().wait()
            if name in self.garbage:
                return GARBAGE
            if name in self.answers:
                return self.answers[name]
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{name} is not implemented here")

        return behave


def _serialized(message: Any) -> bytes:
    return b"\xff\xff\xff\xff" if message is GARBAGE else bytes(message.SerializeToString())


@contextlib.asynccontextmanager
async def serving_raw(plugin: RawPlugin, socket: Path) -> AsyncIterator[str]:
    """`plugin` listening on `socket` while the block runs; yields its address."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((plugin.handler(),))
    address = f"unix://{socket}"
    server.add_insecure_port(address)
    await server.start()
    try:
        yield address
    finally:
        await server.stop(grace=None)


@contextlib.asynccontextmanager
async def raw_plugin(
    socket: Path, answers: Mapping[str, Message], *, api_version: str = "v1"
) -> AsyncIterator[str]:
    """A RawPlugin with these answers, every other operation UNIMPLEMENTED."""
    async with serving_raw(RawPlugin(dict(answers), api_version=api_version), socket) as address:
        yield address
