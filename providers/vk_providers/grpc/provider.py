"""The node's side of a plugin: the provider contract over gRPC (`vk_provider/plugin/v1/provider.proto`).

`connect` asks the plugin what it is (GetPluginInfo, waiting up to `connect_timeout_seconds` for it to
listen: a sidecar may start after the node) and builds a provider class with exactly the optional
capabilities the plugin declares, so the node's `isinstance` checks see what the plugin offers and
nothing more. Every call has a deadline (`call_timeout_seconds`); statuses become the contract's errors
(`vk_provider.plugin.status`), so retries and the provider's availability behave as in-process. The
channel reconnects by itself (gRPC's backoff); a status-push stream that breaks is opened again with
backoff, for as long as the provider is open.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from vk_provider.errors import (
    CapabilityMissingError,
    InvalidPodError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.resilience.settings import ConfigValues
from vk_provider.plugin import convert
from vk_provider.plugin.convert import MessageError
from vk_provider.plugin.server import API_VERSION, SERVICE
from vk_provider.plugin.status import error_of
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import (
    ByteSink,
    ContainerStreams,
    ContainerUsage,
    GpuOffer,
    LogOptions,
    PodLifecycle,
    PodRef,
    PodRequest,
    PodState,
)
from vk_providers.grpc import sessions

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
CHANNEL_OPTIONS = (
    # Pings only while a call is open (a status push or a followed log): every 5 minutes, the least a
    # gRPC server accepts by default, to notice a plugin that went away without closing.
    ("grpc.keepalive_time_ms", 300_000),
    ("grpc.keepalive_timeout_ms", 20_000),
)


@dataclasses.dataclass(frozen=True, slots=True)
class GrpcSettings:
    address: str
    """`unix:///path/to/plugin.sock` (a sidecar's socket) or `host:port`."""
    call_timeout_seconds: float = 30.0
    tls_ca_file: Path | None = None
    """With TCP: the CA the plugin's certificate must come from; set, the connection is TLS."""
    tls_cert_file: Path | None = None
    """The node's client certificate (mutual TLS), with `tls_key_file`."""
    tls_key_file: Path | None = None
    tls_server_name: str | None = None
    """The name the plugin's certificate must carry, when not the address's host."""
    connect_timeout_seconds: float = 10.0
    """How long the node waits, when it starts, for the plugin to answer GetPluginInfo (then it starts
    without it: see `provider_for`)."""


def parse_settings(config: Mapping[str, Any]) -> GrpcSettings:
    values = ConfigValues("grpc", config)
    values.warn_unknown(GrpcSettings)
    address = config.get("address")
    if not isinstance(address, str) or not address:
        raise ValueError(f"grpc provider: address must be unix:///path or host:port, not {address!r}")
    defaults = GrpcSettings(address)
    tls = {key: values.optional_path(key) for key in ("tls_ca_file", "tls_cert_file", "tls_key_file")}
    if (tls["tls_cert_file"] is None) != (tls["tls_key_file"] is None):
        raise ValueError("grpc provider: tls_cert_file and tls_key_file go together")
    if tls["tls_cert_file"] is not None and tls["tls_ca_file"] is None:
        raise ValueError("grpc provider: a client certificate needs tls_ca_file (mutual TLS is TLS first)")
    if tls["tls_ca_file"] is not None and address.startswith("unix:"):
        raise ValueError("grpc provider: TLS is for TCP plugins; a unix socket is guarded by its file mode")
    server_name = config.get("tls_server_name")
    if server_name is not None and not isinstance(server_name, str):
        raise ValueError(f"grpc provider: tls_server_name must be a string, not {server_name!r}")
    return GrpcSettings(
        address=address,
        tls_ca_file=tls["tls_ca_file"],
        tls_cert_file=tls["tls_cert_file"],
        tls_key_file=tls["tls_key_file"],
        tls_server_name=server_name,
        call_timeout_seconds=values.seconds(
            "call_timeout_seconds", defaults.call_timeout_seconds, positive=True
        ),
        connect_timeout_seconds=values.seconds(
            "connect_timeout_seconds", defaults.connect_timeout_seconds, positive=True
        ),
    )


def open_channel(settings: GrpcSettings, *, aio: bool) -> Any:
    """The channel to the plugin: plain on a unix socket, TLS (mutual with a client certificate) on TCP
    when `tls_ca_file` is set. Files are read when the channel is made, so rotated ones take effect at
    the next connection the node makes."""
    options: list[tuple[str, Any]] = list(CHANNEL_OPTIONS)
    if settings.tls_ca_file is None:
        return (grpc.aio.insecure_channel if aio else grpc.insecure_channel)(
            settings.address, options=options
        )
    credentials = grpc.ssl_channel_credentials(
        root_certificates=settings.tls_ca_file.read_bytes(),
        private_key=None if settings.tls_key_file is None else settings.tls_key_file.read_bytes(),
        certificate_chain=None if settings.tls_cert_file is None else settings.tls_cert_file.read_bytes(),
    )
    if settings.tls_server_name:
        options.append(("grpc.ssl_target_name_override", settings.tls_server_name))
    return (grpc.aio.secure_channel if aio else grpc.secure_channel)(
        settings.address, credentials, options=options
    )


def garbage_error(expected: type[Message]) -> MessageError:
    return MessageError(f"bytes that are not a {expected.DESCRIPTOR.name} message")


def _path(method: str) -> str:
    return f"/{SERVICE.full_name}/{method}"


class PluginError(RuntimeError):
    """The plugin could not be reached or is not a v1 plugin; the message says which and why."""


class PluginUnreachableError(PluginError):
    """The plugin did not answer in time (not listening yet, or down)."""


class PluginIncompatibleError(PluginError):
    """The plugin answered, but speaks another version of the plugin API."""


def plugin_info(settings: GrpcSettings, node_name: str) -> pb.PluginInfo:
    """GetPluginInfo, waiting for the plugin to listen (blocking: called once, when the node starts)."""
    with open_channel(settings, aio=False) as channel:
        call = channel.unary_unary(
            _path("GetPluginInfo"),
            request_serializer=pb.GetPluginInfoRequest.SerializeToString,
            response_deserializer=pb.PluginInfo.FromString,
        )
        try:
            info: pb.PluginInfo = call(
                pb.GetPluginInfoRequest(node_name=node_name),
                timeout=settings.connect_timeout_seconds,
                wait_for_ready=True,
            )
        except grpc.RpcError as error:
            code = error.code() if isinstance(error, grpc.Call) else None
            details = error.details() if isinstance(error, grpc.Call) else str(error)
            raise PluginUnreachableError(
                f"grpc provider: the plugin at {settings.address} did not answer GetPluginInfo within "
                f"{settings.connect_timeout_seconds:g} s ({code.name if code else 'no status'}: {details})"
            ) from None
    check_api_version(info, settings.address)
    return info


def check_api_version(info: pb.PluginInfo, address: str) -> None:
    if info.api_version != API_VERSION:
        raise PluginIncompatibleError(
            f"grpc provider: the plugin at {address} ({info.name} {info.version}) speaks plugin "
            f"API {info.api_version or '(none)'!r}, not {API_VERSION!r}"
        )


class GrpcProvider:
    """The required operations; `connect` adds the capability mixins the plugin declares."""

    def __init__(self, settings: GrpcSettings, info: pb.PluginInfo | None) -> None:
        self.settings = settings
        self.info = info or pb.PluginInfo(name=f"at {settings.address}")
        self._declared: frozenset[int] | None = None if info is None else frozenset(info.capabilities)
        """What the plugin declares; None until it has been reached (see `provider_for`)."""
        self._channel: grpc.aio.Channel | None = None
        self._closed = False

    async def require(self, capability: int, what: str) -> None:
        """Go on only if the plugin declares `capability`, asking it first if it was never reached."""
        if self._declared is None:
            info = await self.call("GetPluginInfo", pb.GetPluginInfoRequest(), pb.PluginInfo)
            try:
                check_api_version(info, self.settings.address)
            except PluginIncompatibleError as error:
                raise InvalidPodError(str(error)) from None
            self.info, self._declared = info, frozenset(info.capabilities)
            logger.info(
                "plugin %s %s reached: it declares %s", info.name, info.version, sorted(self._declared)
            )
        if capability not in self._declared:
            raise CapabilityMissingError(f"the plugin {self.info.name} does not offer {what}")

    def __repr__(self) -> str:
        return f"<grpc provider: plugin {self.info.name} {self.info.version} at {self.settings.address}>"

    def channel(self) -> grpc.aio.Channel:
        if self._channel is None:  # made in the event loop that uses it
            self._channel = open_channel(self.settings, aio=True)
        return self._channel

    async def call(
        self, method: str, request: Message, response: type[M], *, health_check: bool = False
    ) -> M:
        stub = self.channel().unary_unary(
            _path(method),
            request_serializer=type(request).SerializeToString,
            response_deserializer=response.FromString,
        )
        try:
            answer: M | None = await stub(request, timeout=self.settings.call_timeout_seconds)
        except grpc.aio.AioRpcError as error:
            raise self.error(error, method, health_check=health_check) from None
        if answer is None:  # grpc logs why the bytes did not parse, and gives None
            garbage = self.unreadable(method, garbage_error(response))
            raise ProviderUnavailableError(str(garbage)) if health_check else garbage
        return answer

    async def stream(self, method: str, request: Message, response: type[M]) -> AsyncIterator[M]:
        """A server stream without a deadline (it lasts as long as the caller reads)."""
        stub = self.channel().unary_stream(
            _path(method),
            request_serializer=type(request).SerializeToString,
            response_deserializer=response.FromString,
        )
        call = stub(request)
        try:
            async for item in call:
                if item is None:
                    raise self.unreadable(method, garbage_error(response))
                yield item
        except grpc.aio.AioRpcError as error:
            raise self.error(error, method) from None
        finally:
            call.cancel()

    def session_call(self, method: str) -> grpc.aio.StreamStreamCall[Message, pb.ContainerOutput]:
        """An Exec or Attach call, open (no deadline: it lasts the client's session)."""
        stub = self.channel().stream_stream(
            _path(method),
            request_serializer=pb.ContainerInput.SerializeToString,
            response_deserializer=pb.ContainerOutput.FromString,
        )
        return stub()

    def error(self, error: grpc.aio.AioRpcError, method: str, *, health_check: bool = False) -> Exception:
        metadata = tuple((str(key), str(value)) for key, value in (error.trailing_metadata() or ()))
        return error_of(error.code(), error.details() or "", metadata, call=method, health_check=health_check)

    def unreadable(self, method: str, error: MessageError) -> TemporaryProviderError:
        return TemporaryProviderError(
            f"the plugin {self.info.name} answered {method} with a message the node cannot read: {error}"
        )

    async def create_pod(self, pod: PodRequest) -> None:
        await self.call(
            "CreatePod", pb.CreatePodRequest(pod=convert.pod_request_message(pod)), pb.CreatePodResponse
        )

    async def update_pod(self, pod: PodRequest) -> None:
        await self.call(
            "UpdatePod", pb.UpdatePodRequest(pod=convert.pod_request_message(pod)), pb.UpdatePodResponse
        )

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        request = pb.DeletePodRequest(ref=convert.ref_message(ref), grace_period_seconds=grace_period_seconds)
        await self.call("DeletePod", request, pb.DeletePodResponse)

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        answer = await self.call(
            "GetPodState", pb.GetPodStateRequest(ref=convert.ref_message(ref)), pb.GetPodStateResponse
        )
        if not answer.HasField("state"):
            return None
        try:
            return convert.pod_state_value(answer.state)
        except MessageError as error:
            raise self.unreadable("GetPodState", error) from None

    async def list_pods(self) -> Sequence[PodState]:
        answer = await self.call("ListPods", pb.ListPodsRequest(), pb.ListPodsResponse)
        try:
            return [convert.pod_state_value(state) for state in answer.pods]
        except MessageError as error:
            raise self.unreadable("ListPods", error) from None

    async def check_health(self) -> None:
        await self.call("CheckHealth", pb.CheckHealthRequest(), pb.CheckHealthResponse, health_check=True)

    async def aclose(self) -> None:
        self._closed = True
        if self._channel is not None:
            await self._channel.close()
            self._channel = None


class StatusPush(GrpcProvider):
    async def watch_states(self) -> AsyncIterator[PodState]:
        await self.require(pb.CAPABILITY_STATUS_PUSH, "status push")
        failures = 0
        while not self._closed:
            try:
                async for message in self.stream("WatchPodStates", pb.WatchPodStatesRequest(), pb.PodState):
                    failures = 0
                    try:
                        yield convert.pod_state_value(message)
                    except MessageError as error:
                        logger.warning("%s", self.unreadable("WatchPodStates", error))
            except TemporaryProviderError as error:
                failures += 1
                logger.warning(
                    "plugin %s: the status stream broke (%s); opening it again", self.info.name, error
                )
            # The stream ended or broke (the plugin restarted, say): open it again, backing off.
            await asyncio.sleep(jittered_backoff_seconds(failures, initial_seconds=0.5, max_seconds=30))


class PodAddress(GrpcProvider):
    async def pod_address(self, ref: PodRef) -> str:
        await self.require(pb.CAPABILITY_POD_ADDRESS, "pod addresses")
        answer = await self.call(
            "GetPodAddress", pb.GetPodAddressRequest(ref=convert.ref_message(ref)), pb.GetPodAddressResponse
        )
        return answer.address


class Logs(GrpcProvider):
    async def stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        await self.require(pb.CAPABILITY_LOGS, "logs")
        request = convert.logs_request_message(ref, container, options)
        async for chunk in self.stream("StreamLogs", request, pb.LogChunk):
            yield chunk.data


class Usage(GrpcProvider):
    async def usage(self, ref: PodRef) -> Sequence[ContainerUsage]:
        await self.require(pb.CAPABILITY_USAGE, "usage")
        answer = await self.call(
            "GetUsage", pb.GetUsageRequest(ref=convert.ref_message(ref)), pb.GetUsageResponse
        )
        return [convert.usage_value(item) for item in answer.containers]


class NodeCapacity(GrpcProvider):
    async def node_capacity(self) -> Mapping[str, str]:
        await self.require(pb.CAPABILITY_NODE_CAPACITY, "node capacity")
        answer = await self.call("GetNodeCapacity", pb.GetNodeCapacityRequest(), pb.GetNodeCapacityResponse)
        return dict(answer.capacity)


class GpuCatalog(GrpcProvider):
    async def gpu_offers(self, *, gpu_count: int = 1) -> Sequence[GpuOffer]:
        await self.require(pb.CAPABILITY_GPU_CATALOG, "a GPU catalog")
        answer = await self.call(
            "ListGpuOffers", pb.ListGpuOffersRequest(gpu_count=gpu_count), pb.ListGpuOffersResponse
        )
        try:
            return [convert.offer_value(offer) for offer in answer.offers]
        except MessageError as error:
            raise self.unreadable("ListGpuOffers", error) from None


def _stream_start(
    ref: PodRef, container: str, streams: ContainerStreams, command: Sequence[str] = ()
) -> pb.ContainerStreamStart:
    return pb.ContainerStreamStart(
        ref=convert.ref_message(ref),
        container=container,
        command=command,
        stdin=streams.stdin is not None,
        stdout=streams.stdout is not None,
        stderr=streams.stderr is not None,
        tty=streams.tty,
    )


class Exec(GrpcProvider):
    async def exec_in_container(
        self, ref: PodRef, container: str, command: Sequence[str], streams: ContainerStreams
    ) -> int:
        await self.require(pb.CAPABILITY_EXEC, "exec")
        start = _stream_start(ref, container, streams, command)
        try:
            ending = await sessions.container_session(self.session_call("Exec"), start, streams)
        except grpc.aio.AioRpcError as error:
            raise self.error(error, "Exec") from None
        except MessageError as error:
            raise self.unreadable("Exec", error) from None
        if ending is None or ending.WhichOneof("output") != "exit_code":
            raise TemporaryProviderError(f"the plugin {self.info.name} ended Exec without an exit code")
        return ending.exit_code


class Attach(GrpcProvider):
    async def attach_to_container(self, ref: PodRef, container: str, streams: ContainerStreams) -> None:
        await self.require(pb.CAPABILITY_ATTACH, "attach")
        start = _stream_start(ref, container, streams)
        try:
            ending = await sessions.container_session(self.session_call("Attach"), start, streams)
        except grpc.aio.AioRpcError as error:
            raise self.error(error, "Attach") from None
        except MessageError as error:
            raise self.unreadable("Attach", error) from None
        if ending is None:
            raise TemporaryProviderError(f"the plugin {self.info.name} ended Attach without saying so")


class PortForward(GrpcProvider):
    async def port_forward(
        self, ref: PodRef, port: int, incoming: AsyncIterator[bytes], send: ByteSink
    ) -> None:
        await self.require(pb.CAPABILITY_PORT_FORWARD, "port forwarding")
        call = self.channel().stream_stream(
            _path("PortForward"),
            request_serializer=pb.PortForwardInput.SerializeToString,
            response_deserializer=pb.PortForwardOutput.FromString,
        )()
        start = pb.PortForwardStart(ref=convert.ref_message(ref), port=port)
        try:
            await sessions.port_forward_session(call, start, incoming, send)
        except grpc.aio.AioRpcError as error:
            raise self.error(error, "PortForward") from None
        except MessageError as error:
            raise self.unreadable("PortForward", error) from None
        except ConnectionError as error:
            raise TemporaryProviderError(f"the plugin {self.info.name}: {error}") from None


MIXINS: Mapping[int, type[GrpcProvider]] = {
    pb.CAPABILITY_STATUS_PUSH: StatusPush,
    pb.CAPABILITY_POD_ADDRESS: PodAddress,
    pb.CAPABILITY_LOGS: Logs,
    pb.CAPABILITY_USAGE: Usage,
    pb.CAPABILITY_NODE_CAPACITY: NodeCapacity,
    pb.CAPABILITY_GPU_CATALOG: GpuCatalog,
    pb.CAPABILITY_EXEC: Exec,
    pb.CAPABILITY_ATTACH: Attach,
    pb.CAPABILITY_PORT_FORWARD: PortForward,
}


def provider_for(settings: GrpcSettings, info: pb.PluginInfo | None) -> PodLifecycle:
    """A provider with the plugin's declared capabilities (unknown ones, from a newer plugin, ignored).

    `info` None: the plugin could not be reached when the node started. The provider then has every
    capability, each resolved when first used (an undeclared one raises CapabilityMissingError), so
    the node comes up, reports the provider unavailable and goes on once the plugin listens, instead of
    failing to start (a node that does not run goes NotReady, and its pods are evicted)."""
    numbers = MIXINS if info is None else [number for number in info.capabilities if number in MIXINS]
    mixins = tuple(dict.fromkeys(MIXINS[number] for number in numbers))
    kind = type("GrpcProvider", (*mixins, GrpcProvider), {}) if mixins else GrpcProvider
    provider: PodLifecycle = kind(settings, info)
    return provider
