"""Serve any in-process provider as a plugin: the Python side of the plugin API.

    from vk_provider.plugin import serve
    from my_cloud import MyProvider

    asyncio.run(serve(MyProvider(context), "unix:///run/vk-provider/plugin.sock", name="my-cloud"))

The plugin declares the optional capabilities its provider has (the same `Supports*` protocols the
node checks in-process) and answers UNIMPLEMENTED for the others; the contract's errors become the
statuses `status.py` lists, anything else INTERNAL (logged with its traceback: probably a bug).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc

from vk_provider import __version__
from vk_provider.errors import CapabilityMissingError, InvalidPodError, ProviderError
from vk_provider.kit.grpctls import ServerTls, add_port
from vk_provider.plugin import convert, sessions
from vk_provider.plugin.convert import MessageError
from vk_provider.plugin.status import status_of
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import (
    PodLifecycle,
    SupportsAttach,
    SupportsExec,
    SupportsGpuCatalog,
    SupportsLogs,
    SupportsNodeCapacity,
    SupportsPodAddress,
    SupportsPortForward,
    SupportsStatusPush,
    SupportsUsage,
)

logger = logging.getLogger(__name__)

API_VERSION = "v1"
SERVICE = pb.DESCRIPTOR.services_by_name["Provider"]
CAPABILITIES: Sequence[tuple[type, pb.Capability]] = (
    (SupportsStatusPush, pb.CAPABILITY_STATUS_PUSH),
    (SupportsPodAddress, pb.CAPABILITY_POD_ADDRESS),
    (SupportsLogs, pb.CAPABILITY_LOGS),
    (SupportsUsage, pb.CAPABILITY_USAGE),
    (SupportsNodeCapacity, pb.CAPABILITY_NODE_CAPACITY),
    (SupportsGpuCatalog, pb.CAPABILITY_GPU_CATALOG),
    (SupportsExec, pb.CAPABILITY_EXEC),
    (SupportsAttach, pb.CAPABILITY_ATTACH),
    (SupportsPortForward, pb.CAPABILITY_PORT_FORWARD),
)


def capabilities_of(provider: PodLifecycle) -> list[pb.Capability]:
    return [capability for protocol, capability in CAPABILITIES if isinstance(provider, protocol)]


class PluginService:
    """The `Provider` service over one provider. `handler()` is what a grpc.aio server adds."""

    def __init__(self, provider: PodLifecycle, *, name: str, version: str = __version__) -> None:
        self.provider = provider
        self.info = pb.PluginInfo(
            name=name, version=version, api_version=API_VERSION, capabilities=capabilities_of(provider)
        )

    def handler(self) -> grpc.GenericRpcHandler:
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for method in SERVICE.methods:
            implementation = getattr(self, f"_{method.name}")
            request_type = pb.DESCRIPTOR.message_types_by_name[method.input_type.name]
            response_type = method.output_type.name
            request_class = getattr(pb, request_type.name)
            response_class = getattr(pb, response_type)
            make: Callable[..., grpc.RpcMethodHandler[Any, Any]]
            wrapped: Callable[..., Any]
            if method.client_streaming:  # the sessions: exec, attach, port-forward
                make, wrapped = grpc.stream_stream_rpc_method_handler, self._session(implementation)
            elif method.server_streaming:
                make, wrapped = grpc.unary_stream_rpc_method_handler, self._streaming(implementation)
            else:
                make, wrapped = grpc.unary_unary_rpc_method_handler, self._unary(implementation)
            handlers[method.name] = make(
                wrapped,
                request_deserializer=request_class.FromString,
                response_serializer=response_class.SerializeToString,
            )
        return grpc.method_handlers_generic_handler(SERVICE.full_name, handlers)

    # Error handling around every call.

    def _unary(
        self, call: Callable[[Any], Awaitable[Any]]
    ) -> Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]:
        async def answered(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            try:
                return await call(request)
            except Exception as error:  # every failure becomes a status, never a dropped call
                await _abort(context, error)

        return answered

    def _streaming(
        self, call: Callable[[Any], AsyncIterator[Any]]
    ) -> Callable[[Any, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[Any]]:
        async def streamed(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            try:
                async for item in call(request):
                    yield item
            except Exception as error:
                await _abort(context, error)

        return streamed

    def _session(
        self, call: Callable[[AsyncIterator[Any], grpc.aio.ServicerContext[Any, Any]], Awaitable[None]]
    ) -> Callable[[AsyncIterator[Any], grpc.aio.ServicerContext[Any, Any]], Awaitable[None]]:
        async def session(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]) -> None:
            try:
                await call(requests, context)
            except Exception as error:
                await _abort(context, error)

        return session

    def _capable(self, protocol: type, what: str) -> Any:
        if not isinstance(self.provider, protocol):
            raise CapabilityMissingError(f"this plugin's provider has no {what}")
        return self.provider

    # The operations.

    async def _GetPluginInfo(self, request: pb.GetPluginInfoRequest) -> pb.PluginInfo:
        return self.info

    async def _CreatePod(self, request: pb.CreatePodRequest) -> pb.CreatePodResponse:
        await self.provider.create_pod(convert.pod_request_value(request.pod))
        return pb.CreatePodResponse()

    async def _UpdatePod(self, request: pb.UpdatePodRequest) -> pb.UpdatePodResponse:
        await self.provider.update_pod(convert.pod_request_value(request.pod))
        return pb.UpdatePodResponse()

    async def _DeletePod(self, request: pb.DeletePodRequest) -> pb.DeletePodResponse:
        ref = convert.ref_value(request.ref)
        await self.provider.delete_pod(ref, grace_period_seconds=request.grace_period_seconds)
        return pb.DeletePodResponse()

    async def _GetPodState(self, request: pb.GetPodStateRequest) -> pb.GetPodStateResponse:
        state = await self.provider.get_pod_state(convert.ref_value(request.ref))
        return pb.GetPodStateResponse(state=None if state is None else convert.pod_state_message(state))

    async def _ListPods(self, request: pb.ListPodsRequest) -> pb.ListPodsResponse:
        states = await self.provider.list_pods()
        return pb.ListPodsResponse(pods=[convert.pod_state_message(state) for state in states])

    async def _CheckHealth(self, request: pb.CheckHealthRequest) -> pb.CheckHealthResponse:
        await self.provider.check_health()
        return pb.CheckHealthResponse()

    async def _WatchPodStates(self, request: pb.WatchPodStatesRequest) -> AsyncIterator[pb.PodState]:
        provider: SupportsStatusPush = self._capable(SupportsStatusPush, "status push")
        async for state in provider.watch_states():
            yield convert.pod_state_message(state)

    async def _GetPodAddress(self, request: pb.GetPodAddressRequest) -> pb.GetPodAddressResponse:
        provider: SupportsPodAddress = self._capable(SupportsPodAddress, "pod addresses")
        return pb.GetPodAddressResponse(address=await provider.pod_address(convert.ref_value(request.ref)))

    async def _StreamLogs(self, request: pb.StreamLogsRequest) -> AsyncIterator[pb.LogChunk]:
        provider: SupportsLogs = self._capable(SupportsLogs, "logs")
        options = convert.log_options_value(request)
        async for data in provider.stream_logs(convert.ref_value(request.ref), request.container, options):
            yield pb.LogChunk(data=data)

    async def _GetUsage(self, request: pb.GetUsageRequest) -> pb.GetUsageResponse:
        provider: SupportsUsage = self._capable(SupportsUsage, "usage")
        usage = await provider.usage(convert.ref_value(request.ref))
        return pb.GetUsageResponse(containers=[convert.usage_message(item) for item in usage])

    async def _GetNodeCapacity(self, request: pb.GetNodeCapacityRequest) -> pb.GetNodeCapacityResponse:
        provider: SupportsNodeCapacity = self._capable(SupportsNodeCapacity, "node capacity")
        return pb.GetNodeCapacityResponse(capacity=dict(await provider.node_capacity()))

    async def _ListGpuOffers(self, request: pb.ListGpuOffersRequest) -> pb.ListGpuOffersResponse:
        provider: SupportsGpuCatalog = self._capable(SupportsGpuCatalog, "GPU catalog")
        offers = await provider.gpu_offers(gpu_count=request.gpu_count or 1)
        return pb.ListGpuOffersResponse(offers=[convert.offer_message(offer) for offer in offers])

    async def _Exec(
        self, requests: AsyncIterator[pb.ContainerInput], context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        await sessions.exec_session(self._capable(SupportsExec, "exec"), requests, context)

    async def _Attach(
        self, requests: AsyncIterator[pb.ContainerInput], context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        await sessions.attach_session(self._capable(SupportsAttach, "attach"), requests, context)

    async def _PortForward(
        self, requests: AsyncIterator[pb.PortForwardInput], context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        provider: SupportsPortForward = self._capable(SupportsPortForward, "port forwarding")
        await sessions.port_forward_session(provider, requests, context)


async def _abort(context: grpc.aio.ServicerContext[Any, Any], error: Exception) -> None:
    if isinstance(error, ExceptionGroup):  # from a session's task group: its first failure says why
        error = error.exceptions[0]
    if isinstance(error, MessageError):
        error = InvalidPodError(f"the node sent a message the plugin cannot read: {error}")
    if not isinstance(error, ProviderError):
        logger.exception("the provider failed", exc_info=error)
    code, details, metadata = status_of(error)
    if metadata:
        context.set_trailing_metadata(metadata)
    await context.abort(code, details)


@contextlib.asynccontextmanager
async def serving(
    provider: PodLifecycle, address: str, *, name: str, tls: ServerTls | None = None
) -> AsyncIterator[grpc.aio.Server]:
    """The plugin listening on `address` (`unix:///path`, or `host:port` best with `tls`) while the
    block runs."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((PluginService(provider, name=name).handler(),))
    add_port(server, address, tls)
    await server.start()
    logger.info("plugin %s serves on %s", name, address)
    try:
        yield server
    finally:
        await server.stop(grace=5)


async def serve(provider: PodLifecycle, address: str, *, name: str, tls: ServerTls | None = None) -> None:
    """Serve until cancelled (or the process is stopped), then close the provider."""
    try:
        async with serving(provider, address, name=name, tls=tls) as server:
            await server.wait_for_termination()
    finally:
        await provider.aclose()
