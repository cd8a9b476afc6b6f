"""Serve the kubelet API over TLS on the node's kubelet port, behind authentication and authorization.

The TLS identity comes from a `ServingCertificate` (a kubelet-serving CSR, or files); the server starts
only once it has one, and a rotated certificate is picked up by new connections without dropping the
open ones. `insecure_skip_auth` exists for development only and is logged loudly when used.

The node daemon binds the port (`bind_kubelet_port`) before it does anything in the cluster: a port
already taken must stop it before it registers a Node or asks for a certificate, not after. The bound
socket then outlives each serving (a replica that loses and regains leadership serves it again), so
`serve_kubelet_api` serves a duplicate of it and closing that leaves the port held.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from aiohttp import web

from vk_provider.kubelet.auth import WebhookAuth, auth_middleware
from vk_provider.kubelet.certificates import ServingCertificate
from vk_provider.kubelet.routes import KubeletBackend, build_app

logger = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_SECONDS = 5.0


class KubeletApiError(RuntimeError):
    """The kubelet API cannot be served (its port is taken, say)."""


def bind_kubelet_port(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port` and listening, or KubeletApiError saying why it cannot be.

    Connections that arrive before the server starts wait in the backlog, as they would for a kubelet
    still starting, instead of being refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        # create_server sets SO_REUSEADDR, so a restart is not refused by the last run's TIME_WAITs;
        # a live listener on the port still refuses the bind.
        return socket.create_server((host, port), family=family)
    except OSError as error:
        raise KubeletApiError(
            f"the kubelet API cannot listen on {host}:{port}: {error.strerror or error}; another "
            "process (a second node daemon, or a kubelet) holds the port: stop it or set another "
            "kubelet_port"
        ) from error


async def serve_kubelet_api(
    backend: KubeletBackend,
    *,
    certificate: ServingCertificate,
    auth: WebhookAuth | None,
    host: str,
    port: int,
    started: asyncio.Event | None = None,
    listener: socket.socket | None = None,
) -> None:
    """Run until cancelled. `auth=None` turns authentication and authorization off (development only).

    With `listener` (from `bind_kubelet_port`), serve on that socket, which stays open afterwards;
    otherwise bind `host:port` here."""
    app = build_app(backend)
    if auth is None:
        logger.warning("the kubelet API accepts every request without authentication (development opt-out)")
    else:
        app.middlewares.insert(0, auth_middleware(auth))
    if not certificate.ready.is_set():
        logger.info("the kubelet API waits for its serving certificate")
        await certificate.ready.wait()
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS)
    await runner.setup()
    try:
        site: web.BaseSite
        if listener is not None:
            site = web.SockSite(runner, listener.dup(), ssl_context=certificate.ssl_context)
        else:
            site = web.TCPSite(
                runner, host=host, port=port, ssl_context=certificate.ssl_context, reuse_address=True
            )
        try:
            await site.start()
        except OSError as error:
            # A node without its kubelet API cannot serve logs or be authorized; stop loudly and clearly.
            raise KubeletApiError(
                f"the kubelet API cannot listen on {host}:{port}: {error.strerror}"
            ) from error
        logger.info("the kubelet API listens on https://%s:%d", host, port)
        if started is not None:
            started.set()
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
