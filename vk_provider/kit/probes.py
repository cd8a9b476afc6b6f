"""Plain-HTTP `GET /healthz` and `GET /readyz` for the pod probes of the leader-elected daemons.

The node daemon serves them on its `health_port`, the controller beside its `/metrics`:

- `/healthz` (liveness): the process's event loop answers, so it is not wedged;
- `/readyz` (readiness): the replica has had an answer from the apiserver and runs its part, leading
  or standing by. A standby is Ready on purpose: a rolling update waits for each new replica to be
  Ready, and new replicas start as standbys, so a leader-only readiness would stall every rollout.

The node daemon's kubelet API has a `/healthz` too, but probes cannot use it: it asks for a client
certificate or a bearer token (a kubelet's probes send neither) and only the leader serves it.
A node whose provider cannot start (bad settings, a missing credentials file) stays Ready here: the
Node says what is wrong (see `node.providerstart`), and a restart would not create the Secret.
"""

from __future__ import annotations

import dataclasses
import logging

from aiohttp import web

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Readiness:
    """What `/readyz` answers; the daemon sets it as it starts."""

    ready: bool = False
    reason: str = "starting: not connected to the apiserver yet"

    def set_ready(self) -> None:
        self.ready = True
        self.reason = "ok"


def add_probe_routes(app: web.Application, readiness: Readiness) -> None:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(status=200 if readiness.ready else 503, text=readiness.reason + "\n")

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)


async def serve_probes(readiness: Readiness, host: str, port: int) -> web.AppRunner:
    """Serve until the returned runner is cleaned up; an unbindable port raises OSError at once."""
    app = web.Application()
    add_probe_routes(app, readiness)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError:
        await runner.cleanup()
        raise
    logger.info("probes (/healthz, /readyz) on http://%s:%d", host, port)
    return runner
