"""The demo's token server as the app behind each pod of the RunPod stand-in.

The stand-in runs no images: each RUNNING pod serves an HTTP app per exposed port, made by a factory
(`proxy.PodAppFactory`). `token_pod_app` makes that app the same token server the home replicas run, so
requests succeed on either side of a migration, and it names itself `<node>/<RunPod pod id>` in
`X-Served-By`, so a client can tell which RunPod pod served it. The migration tests use it in-process;
`python -m vk_devtools.standins.runpod.server --pod-app tokens` (the development cluster's
`--burst-provider runpod-standin`) out of process.
"""

from __future__ import annotations

from aiohttp import web

from vk_devtools.demo.tokens import TokenServerSettings, make_app
from vk_devtools.standins.runpod.proxy import ServedPod
from vk_providers.runpod.translate import ENV_NODE_NAME

TOKEN_DELAY_SECONDS = 0.005
"""Seconds per streamed token; the migration rig gives its home replicas the same `--token-delay`."""


def token_pod_app(pod: ServedPod) -> web.Application:
    """A stand-in pod's app: the token server, named after the node that made the pod and its id."""
    node = pod.env.get(ENV_NODE_NAME, "runpod")
    return make_app(TokenServerSettings(name=f"{node}/{pod.id}", token_delay=TOKEN_DELAY_SECONDS))
