"""The kubelet API's handlers: what the apiserver and metrics-server call on the virtual node.

`build_app` returns a plain aiohttp application with the kubelet's paths. It knows nothing of TLS,
authentication or authorization: the server (`server`, `auth`) wraps it, so each handler here only
turns a request into calls of its `KubeletBackend` and a kubelet-shaped answer. The backend is plain
callables (virtual-kubelet's `PodHandlerConfig`), built by the node daemon from its watch cache, its
provider and its metrics: nothing here knows the node.

- `GET /containerLogs/{namespace}/{pod}/{container}`: `kubectl logs`, streamed from the provider;
- `GET /stats/summary` and `GET /metrics/resource`: pod usage (`stats`);
- `GET /pods`: the pods bound to this node, from the daemon's watch cache;
- `GET /runningpods/`: what the provider runs right now, asked on every request so a deletion shows
  at once;
- `GET /healthz`: liveness; `GET /metrics`: the daemon's own metrics;
- `/exec/...`, `/attach/...`, `/portForward/...` (GET or POST, upgraded to SPDY): `streaming`.

A trailing slash is treated as the kubelet treats it (measured against the routes of
pkg/kubelet/server/server.go: a go-restful WebService inside Go's ServeMux): `/pods`, `/stats/summary`
and `/containerLogs/...` answer with and without one, as go-restful does; `/runningpods` is redirected
(307, the query kept) to `/runningpods/`, as ServeMux does for a pattern ending in a slash; `/healthz`
and `/metrics` answer only without one. `/metrics/resource/` is the one extra: the kubelet's ServeMux
answers it 404, but virtual-kubelet serves it (gorilla/mux StrictSlash) and so clients written against
virtual nodes may ask for it.

A capability the backend lacks (no logs, no usage, no metrics) answers 501 Not Implemented.

Errors: typed provider errors map to statuses (NotFoundError 404, CapabilityMissingError 501, any other
ProviderError 503 with its message, since providers write those messages for users); anything else is
a bug and becomes a 500 with a short message, its traceback in the log.

A followed log can be quiet for hours, so nothing can wait for a write to fail to notice that the
client has gone: the stream is served in its own task, watched for the connection's end, and the
provider's iterator is closed (`aclose`) as soon as the client leaves. Servers that cancel handlers on
disconnection (aiohttp's `handler_cancellation`) get the same clean-up at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import web

from vk_provider.errors import CapabilityMissingError, NotFoundError, ProviderError
from vk_provider.kubelet.certificates.probe import INSTANCE_HEADER, INSTANCE_ID
from vk_provider.kubelet.logoptions import LogOptionsError, parse_log_options
from vk_provider.kubelet.stats import (
    RESOURCE_METRICS_CONTENT_TYPE,
    CpuRateCache,
    PodUsage,
    build_summary,
    render_resource_metrics,
    sample_pods,
)
from vk_provider.kubelet.streaming import StreamingBackend, add_streaming_routes
from vk_provider.provider import LogOptions, PodRef, PodState

logger = logging.getLogger(__name__)

DISCONNECT_CHECK_SECONDS = 1.0
"""How often a log stream checks that its client is still connected (aiohttp has no event for it)."""

METRICS_CONTENT_TYPE = RESOURCE_METRICS_CONTENT_TYPE
"""`/metrics` serves the classic Prometheus text format, as `/metrics/resource`: every agent reads it."""

ALSO_WITH_TRAILING_SLASH = frozenset(
    {"/pods", "/stats/summary", "/metrics/resource", "/containerLogs/{namespace}/{pod}/{container}"}
)
"""Paths served with a trailing slash too (see the module's docstring)."""
REDIRECTED = {"/runningpods": "/runningpods/"}
"""Paths the kubelet redirects, and where to."""

_T = TypeVar("_T")
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

LogStreamer = Callable[[PodRef, str, LogOptions], AsyncIterator[bytes]]
"""A container's log as the kubelet serves it (`SupportsLogs.stream_logs`)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclasses.dataclass(frozen=True)
class KubeletBackend:
    """What the kubelet API serves, as plain callables; `None` where the node cannot serve it (501)."""

    node_name: str
    node_started_at: datetime
    bound_pods: Callable[[], Sequence[Mapping[str, Any]]]
    """`/pods`, and the pods logs and usage are served for: API JSON, read at each request."""
    running_pods: Callable[[], Awaitable[Sequence[PodState]]]
    """`/runningpods/`: what the provider runs now (`PodLifecycle.list_pods`)."""
    stream_logs: LogStreamer | None = None
    """`/containerLogs/...`; may raise `ProviderError`, as its iterator may."""
    pod_usage: PodUsage | None = None
    """`/stats/summary` and `/metrics/resource`: each running container's usage of a pod."""
    metrics: Callable[[], bytes] | None = None
    """`/metrics`: the daemon's own metrics, in the Prometheus text format (`METRICS_CONTENT_TYPE`)."""
    cpu_rates: CpuRateCache = dataclasses.field(default_factory=CpuRateCache)
    """The previous CPU sample of each container, for the Summary's usageNanoCores."""
    clock: Callable[[], datetime] = _utc_now
    """The current time (UTC); tests replace it."""
    streaming: StreamingBackend | None = None
    """Exec, attach and port-forward; None: every one of them answers 501."""


BACKEND = web.AppKey("kubelet_backend", KubeletBackend)


def build_app(backend: KubeletBackend) -> web.Application:
    app = web.Application(middlewares=[_internal_errors])
    app[BACKEND] = backend
    routes: list[tuple[str, _Handler]] = [
        ("/containerLogs/{namespace}/{pod}/{container}", _container_logs),
        ("/stats/summary", _stats_summary),
        ("/metrics/resource", _resource_metrics),
        ("/metrics", _daemon_metrics),
        ("/pods", _pods),
        ("/runningpods/", _running_pods),
        ("/healthz", _healthz),
    ]
    for path, handler in routes:
        app.router.add_get(path, handler, allow_head=False)  # the kubelet serves GET only
        if path in ALSO_WITH_TRAILING_SLASH:
            app.router.add_get(f"{path}/", handler, allow_head=False)
    for path, target in REDIRECTED.items():
        app.router.add_get(path, _redirect_to(target), allow_head=False)
    streaming = backend.streaming or StreamingBackend(provider_name="of this node")
    add_streaming_routes(app, streaming, functools.partial(_find_bound_pod, backend))
    return app


def _redirect_to(target: str) -> _Handler:
    async def redirect(request: web.Request) -> web.StreamResponse:
        query = f"?{request.query_string}" if request.query_string else ""
        raise web.HTTPTemporaryRedirect(location=f"{target}{query}")

    return redirect


@web.middleware
async def _internal_errors(request: web.Request, handler: _Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception:
        logger.exception("kubelet API: %s %s failed", request.method, request.path_qs)
        raise web.HTTPInternalServerError(text="internal error; the node's log has the details") from None


# Logs


async def _container_logs(request: web.Request) -> web.StreamResponse:
    backend = request.app[BACKEND]
    try:
        options = parse_log_options(request.query, now=backend.clock())
    except LogOptionsError as error:
        raise web.HTTPBadRequest(text=str(error)) from None
    namespace, name = request.match_info["namespace"], request.match_info["pod"]
    container = request.match_info["container"]
    pod = _find_bound_pod(backend, namespace, name)
    if container not in _container_names(pod):
        raise web.HTTPNotFound(text=f'container "{container}" not found in pod "{namespace}/{name}"')
    stream_logs = backend.stream_logs
    if stream_logs is None:
        raise web.HTTPNotImplemented(text=f'the provider of node "{backend.node_name}" serves no logs')
    ref = PodRef(namespace=namespace, name=name, uid=str(pod["metadata"]["uid"]))
    response = await _while_connected(request, _serve_log(request, stream_logs, ref, container, options))
    return web.Response() if response is None else response  # None: the client left; nothing is sent


async def _serve_log(
    request: web.Request, stream_logs: LogStreamer, ref: PodRef, container: str, options: LogOptions
) -> web.StreamResponse:
    """Stream the log as it comes, each chunk written to the client as soon as the provider yields it."""
    try:
        stream = stream_logs(ref, container, options)
    except ProviderError as error:
        raise _provider_http_error(error) from None
    try:
        # The first chunk comes before the headers, as with the kubelet, so that a provider failing at
        # once (unknown container, say) still gets its own status.
        try:
            first = await anext(stream, None)
        except ProviderError as error:
            raise _provider_http_error(error) from None
        response = web.StreamResponse()
        response.content_type = "text/plain"  # no charset: the bytes are the container's, maybe not UTF-8
        await response.prepare(request)
        await _copy(request, response, first, stream, options.limit_bytes)
        return response
    finally:
        await _close(stream)


async def _copy(
    request: web.Request,
    response: web.StreamResponse,
    chunk: bytes | None,
    stream: AsyncIterator[bytes],
    limit_bytes: int | None,
) -> None:
    """Write the stream to the client, cut at `limit_bytes` even if the provider overshoots."""
    remaining = limit_bytes
    while chunk is not None:
        if remaining is not None:
            chunk = chunk[:remaining]
            remaining -= len(chunk)
        try:
            await response.write(chunk)
        except ConnectionError:
            return  # the client has gone; the caller closes the stream
        if remaining == 0:
            return
        try:
            chunk = await anext(stream, None)
        except Exception as error:
            # The status line has gone out: the only way left to tell the client that the log is
            # incomplete is to end the connection without the closing chunk.
            log = logger.warning if isinstance(error, ProviderError) else logger.error
            log("the log stream %s broke off: %s", request.path, error, exc_info=error)
            _abort(request)
            return


async def _close(stream: AsyncIterator[bytes]) -> None:
    """Close the provider's iterator now (its files, tasks, connections), not at garbage collection."""
    aclose: Callable[[], Awaitable[object]] | None = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


def _abort(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.close()


async def _while_connected(request: web.Request, work: Coroutine[Any, Any, _T]) -> _T | None:
    """Run `work` until it ends or the client disconnects (then cancel it and return None)."""
    worker = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnection(request))
    try:
        await asyncio.wait((worker, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        worker.cancel()  # no-op once done; otherwise the client left (or this handler was cancelled)
        watcher.cancel()
        await asyncio.wait((worker, watcher))  # the worker's clean-up (closing the stream) must finish
    if worker.cancelled():
        logger.debug("%s: the client disconnected", request.path)
        return None
    return worker.result()


async def _disconnection(request: web.Request) -> None:
    # Polled: aiohttp's protocol tells a handler of a lost connection only by cancelling it, and only
    # when the server was set up to, so there is no event to wait on.
    while (transport := request.transport) is not None and not transport.is_closing():  # noqa: ASYNC110
        await asyncio.sleep(DISCONNECT_CHECK_SECONDS)


def _find_bound_pod(backend: KubeletBackend, namespace: str, name: str) -> Mapping[str, Any]:
    matches = [pod for pod in backend.bound_pods() if _identity(pod) == (namespace, name, True)]
    if not matches:
        raise web.HTTPNotFound(text=f'pod "{namespace}/{name}" is not on node "{backend.node_name}"')
    # While a pod is recreated under the same name, the old one (being deleted) and the new one are
    # both bound for a moment: the new one is the one people mean.
    live = [pod for pod in matches if not pod["metadata"].get("deletionTimestamp")]
    return (live or matches)[-1]


def _identity(pod: Mapping[str, Any]) -> tuple[object, object, bool]:
    """Namespace, name, and whether there is a UID (without one there is no provider PodRef)."""
    metadata = pod.get("metadata") or {}
    return metadata.get("namespace"), metadata.get("name"), bool(metadata.get("uid"))


def _container_names(pod: Mapping[str, Any]) -> set[str]:
    """Every container the kubelet would serve logs of: regular, init and ephemeral."""
    spec = pod.get("spec") or {}
    kinds = ("containers", "initContainers", "ephemeralContainers")
    return {str(container.get("name")) for kind in kinds for container in spec.get(kind) or ()}


def _provider_http_error(error: ProviderError) -> web.HTTPException:
    if isinstance(error, NotFoundError):
        return web.HTTPNotFound(text=str(error))
    if isinstance(error, CapabilityMissingError):
        return web.HTTPNotImplemented(text=str(error))
    logger.warning("provider error: %s", error)
    return web.HTTPServiceUnavailable(text=str(error))


# Usage


async def _stats_summary(request: web.Request) -> web.StreamResponse:
    backend = request.app[BACKEND]
    samples = await sample_pods(_pod_usage(backend), backend.bound_pods())
    summary = build_summary(
        node_name=backend.node_name,
        node_started_at=backend.node_started_at,
        samples=samples,
        rates=backend.cpu_rates,
        now=backend.clock(),
    )
    return _json(summary)


async def _resource_metrics(request: web.Request) -> web.StreamResponse:
    backend = request.app[BACKEND]
    samples = await sample_pods(_pod_usage(backend), backend.bound_pods())
    text = render_resource_metrics(samples, backend.clock())
    return web.Response(body=text.encode(), headers={"Content-Type": RESOURCE_METRICS_CONTENT_TYPE})


def _pod_usage(backend: KubeletBackend) -> PodUsage:
    if backend.pod_usage is None:
        raise web.HTTPNotImplemented(text=f'the provider of node "{backend.node_name}" reports no usage')
    return backend.pod_usage


# Pods


async def _pods(request: web.Request) -> web.StreamResponse:
    return _json(_pod_list(request.app[BACKEND].bound_pods()))


async def _running_pods(request: web.Request) -> web.StreamResponse:
    try:
        states = await request.app[BACKEND].running_pods()
    except ProviderError as error:
        raise _provider_http_error(error) from None
    return _json(_pod_list(_minimal_pod(state) for state in states if not state.terminated))


def _minimal_pod(state: PodState) -> dict[str, Any]:
    """A running pod as the kubelet describes the runtime's view: identity, containers and phase."""
    return {
        "metadata": {"name": state.ref.name, "namespace": state.ref.namespace, "uid": state.ref.uid},
        "spec": {"containers": [{"name": item.name, "image": item.image} for item in state.containers]},
        "status": {"phase": state.phase},
    }


def _pod_list(pods: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": list(pods)}


# Health and the daemon's metrics


async def _healthz(request: web.Request) -> web.StreamResponse:
    # The header lets the node's own probe through the apiserver know that it reached this process.
    return web.Response(text="ok", headers={INSTANCE_HEADER: INSTANCE_ID})


async def _daemon_metrics(request: web.Request) -> web.StreamResponse:
    backend = request.app[BACKEND]
    if backend.metrics is None:
        raise web.HTTPNotImplemented(text=f'node "{backend.node_name}" serves no metrics of its own')
    return web.Response(body=backend.metrics(), headers={"Content-Type": METRICS_CONTENT_TYPE})


def _json(document: Mapping[str, Any]) -> web.Response:
    return web.json_response(document, dumps=_dumps)


def _plain_json(value: object) -> object:
    """The watch cache may hand out read-only mappings and tuples; JSON wants dicts and lists."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


_dumps = functools.partial(json.dumps, default=_plain_json, separators=(",", ":"))
