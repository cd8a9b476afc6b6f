"""Serve the kubelet API over TLS on the node's kubelet port, behind authentication and authorization.

The TLS identity comes from a `ServingCertificate` (a kubelet-serving CSR, or files); the server starts
only once it has one, and a rotated certificate is picked up by new connections without dropping the
open ones. `insecure_skip_auth` exists for development only and is logged loudly when used.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from vk_provider.kubelet.auth import WebhookAuth, auth_middleware
from vk_provider.kubelet.certificates import ServingCertificate
from vk_provider.kubelet.routes import KubeletBackend, build_app

logger = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_SECONDS = 5.0


class KubeletApiError(RuntimeError):
    """The kubelet API cannot be served (its port is taken, say)."""


async def serve_kubelet_api(
    backend: KubeletBackend,
    *,
    certificate: ServingCertificate,
    auth: WebhookAuth | None,
    host: str,
    port: int,
    started: asyncio.Event | None = None,
) -> None:
    """Run until cancelled. `auth=None` turns authentication and authorization off (development only)."""
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
