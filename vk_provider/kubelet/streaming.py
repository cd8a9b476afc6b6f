"""Exec, attach and port-forward on the kubelet API: the HTTP side, up to a running SPDY session.

Each request is checked before anything is upgraded, so the client gets a plain HTTP answer it can
show: the pod and container must be on this node (404), the provider must have the capability (501,
"exec is not supported by provider runpod"), the query must make sense (400). Then the protocol is
negotiated as the kubelet does (`X-Stream-Protocol-Version`, the client's first choice we serve), the
connection answers 101 and becomes SPDY/3.1 (`spdy.connection`), and the session (`streaming_exec`,
`streaming_portforward`) runs until it ends or the client goes.

aiohttp upgrades only to WebSocket by itself, so the upgrade is done by hand: the 101 goes straight to
the transport and the transport is handed to the SPDY protocol. Nothing is read between the two
because a SPDY client waits for the 101 before it sends a frame.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from aiohttp import web

from vk_provider.kubelet import streaming_exec, streaming_portforward, websocket
from vk_provider.kubelet.spdy.connection import SpdyConnection
from vk_provider.provider import ByteSink, ContainerStreams, PodRef

logger = logging.getLogger(__name__)

REMOTE_COMMAND_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
"""What exec and attach serve. v4 brought the exit code in a JSON Status; every kubectl since 1.4
offers it. v5 only adds closing stdin, which SPDY does with a FIN anyway."""
PORT_FORWARD_PROTOCOLS = ("portforward.k8s.io",)
PROTOCOL_HEADER = "X-Stream-Protocol-Version"
ACCEPTED_PROTOCOLS_HEADER = "X-Accepted-Stream-Protocol-Versions"

ExecRunner = Callable[[PodRef, str, Sequence[str], ContainerStreams], Awaitable[int]]
Attacher = Callable[[PodRef, str, ContainerStreams], Awaitable[None]]
PortForwarder = Callable[[PodRef, int, AsyncIterator[bytes], ByteSink], Awaitable[None]]
PodFinder = Callable[[str, str], Mapping[str, Any]]
"""The bound pod of that namespace and name, or web.HTTPNotFound."""
_Capability = TypeVar("_Capability")


@dataclasses.dataclass(frozen=True)
class StreamTimeouts:
    creation_seconds: float = 30.0
    """How long the client has to open every stream a session needs (the kubelet's default)."""
    idle_seconds: float = 4 * 3600.0
    """A connection with no frame either way for this long is closed (the kubelet's default)."""


@dataclasses.dataclass(frozen=True)
class StreamingBackend:
    """The provider's streaming capabilities; None where it has none (the request gets a 501)."""

    provider_name: str
    exec_in_container: ExecRunner | None = None
    attach_to_container: Attacher | None = None
    port_forward: PortForwarder | None = None
    timeouts: StreamTimeouts = StreamTimeouts()


_STREAMING = web.AppKey("kubelet_streaming", StreamingBackend)
_FIND_POD = web.AppKey("kubelet_find_pod", object)

ROUTES = (
    ("/exec/{namespace}/{pod}/{container}", "exec"),
    ("/attach/{namespace}/{pod}/{container}", "attach"),
    ("/portForward/{namespace}/{pod}", "port-forward"),
)


def add_streaming_routes(app: web.Application, backend: StreamingBackend, find_pod: PodFinder) -> None:
    """Serve /exec, /attach and /portForward (GET and POST, as the kubelet does)."""
    app[_STREAMING] = backend
    app[_FIND_POD] = find_pod
    handlers = {"exec": _exec, "attach": _attach, "port-forward": _port_forward}
    for path, kind in ROUTES:
        for method in ("GET", "POST"):
            app.router.add_route(method, path, handlers[kind])


def _refusal(backend: StreamingBackend, what: str) -> web.HTTPException:
    return web.HTTPNotImplemented(text=f"{what} is not supported by provider {backend.provider_name}")


def _pod_ref(request: web.Request, *, container: str | None) -> PodRef:
    find_pod: PodFinder = request.app[_FIND_POD]  # type: ignore[assignment]
    namespace, name = request.match_info["namespace"], request.match_info["pod"]
    pod = find_pod(namespace, name)
    if container is not None:
        spec = pod.get("spec") or {}
        names = {
            str(item.get("name"))
            for kind in ("containers", "initContainers", "ephemeralContainers")
            for item in spec.get(kind) or ()
        }
        if container not in names:
            raise web.HTTPNotFound(text=f'container "{container}" not found in pod "{namespace}/{name}"')
    return PodRef(namespace=namespace, name=name, uid=str(pod["metadata"]["uid"]))


def _checked_target(
    request: web.Request,
    what: str,
    capability: Callable[[StreamingBackend], _Capability | None],
    *,
    container: str | None,
) -> tuple[StreamingBackend, PodRef, _Capability]:
    """The backend, the pod and the provider's callable for `what` (exec, attach, port-forward).

    The pod and container are looked up before the capability is asked for, so a pod that is not on
    this node is a 404 even where the provider could not have served the request anyway (a 501)."""
    backend = request.app[_STREAMING]
    ref = _pod_ref(request, container=container)
    served = capability(backend)
    if served is None:
        raise _refusal(backend, what)
    return backend, ref, served


async def _exec(request: web.Request) -> web.StreamResponse:
    container = request.match_info["container"]
    backend, ref, runner = _checked_target(
        request, "exec", lambda backend: backend.exec_in_container, container=container
    )
    options = streaming_exec.parse_options(request.query, require_command=True)
    command = tuple(request.query.getall("command", ()))

    async def run(streams: ContainerStreams) -> int:
        return await runner(ref, container, command, streams)

    return await _upgraded(request, REMOTE_COMMAND_PROTOCOLS, backend, streaming_exec.Session(options, run))


async def _attach(request: web.Request) -> web.StreamResponse:
    container = request.match_info["container"]
    backend, ref, attacher = _checked_target(
        request, "attach", lambda backend: backend.attach_to_container, container=container
    )
    options = streaming_exec.parse_options(request.query, require_command=False)

    async def run(streams: ContainerStreams) -> int:
        await attacher(ref, container, streams)
        return 0

    return await _upgraded(request, REMOTE_COMMAND_PROTOCOLS, backend, streaming_exec.Session(options, run))


async def _port_forward(request: web.Request) -> web.StreamResponse:
    backend, ref, forwarder = _checked_target(
        request, "port-forward", lambda backend: backend.port_forward, container=None
    )

    async def forward(port: int, incoming: AsyncIterator[bytes], send: ByteSink) -> None:
        await forwarder(ref, port, incoming, send)

    session = streaming_portforward.Session(
        forward, creation_timeout_seconds=backend.timeouts.creation_seconds
    )
    return await _upgraded(request, PORT_FORWARD_PROTOCOLS, backend, session)


def negotiate(offered: Sequence[str], served: Sequence[str]) -> str | None:
    """The client's first choice among what we serve (as the kubelet's httpstream.Handshake picks)."""
    for protocol in offered:
        if protocol in served:
            return protocol
    return None


def offered_protocols(request: web.Request) -> list[str]:
    return [
        part.strip()
        for value in request.headers.getall(PROTOCOL_HEADER, ())
        for part in value.split(",")
        if part.strip()
    ]


async def _upgraded(
    request: web.Request,
    served: Sequence[str],
    backend: StreamingBackend,
    session: streaming_exec.Session | streaming_portforward.Session,
) -> web.StreamResponse:
    if websocket.is_websocket(request):
        logger.debug("%s %s: over WebSocket", request.method, request.path)
        if isinstance(session, streaming_exec.Session):
            return await websocket.serve_channels(request, session, backend.timeouts.creation_seconds)
        return await websocket.serve_tunnel(
            request,
            session,
            creation_timeout_seconds=backend.timeouts.creation_seconds,
            idle_timeout_seconds=backend.timeouts.idle_seconds,
        )
    connection_tokens = {token.strip().lower() for token in request.headers.get("Connection", "").split(",")}
    upgrade = request.headers.get("Upgrade", "")
    if "upgrade" not in connection_tokens or upgrade.lower() != "spdy/3.1":
        raise web.HTTPBadRequest(
            text="unable to upgrade: this node streams over SPDY/3.1 or WebSocket "
            f"(the request asked for {upgrade!r})"
        )
    offered = offered_protocols(request)
    protocol = negotiate(offered, served)
    if protocol is None:
        raise web.HTTPForbidden(
            headers={ACCEPTED_PROTOCOLS_HEADER: ", ".join(served)},
            text=f"unable to upgrade: unable to negotiate protocol: client supports {offered}, "
            f"server supports {list(served)}",
        )
    transport = request.transport
    if transport is None or transport.is_closing():
        return web.Response()
    logger.debug("%s %s: over SPDY/3.1, %s", request.method, request.path, protocol)
    connection = SpdyConnection(session.on_stream, idle_timeout_seconds=backend.timeouts.idle_seconds)
    transport.write(
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
        + f"{PROTOCOL_HEADER}: {protocol}\r\n\r\n".encode()
    )
    transport.set_protocol(connection)
    connection.connection_made(transport)
    try:
        await session.run(connection.closed, backend.timeouts.creation_seconds)
    except asyncio.CancelledError:
        connection.abort()
        raise
    except Exception:
        logger.exception("kubelet API: the session of %s failed", request.path)
        connection.abort()
    finally:
        await connection.close()
        request.protocol.force_close()  # the HTTP connection is over: aiohttp must not wait for more
    return web.Response()
