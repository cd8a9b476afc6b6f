"""The away side of a migration rig on RunPod's stand-in: a `runpod` node and pods that serve tokens.

The node daemon is the real `runpod` provider, pointed at a `FakeRunPod` running in the test's event
loop: pods are created, polled and deleted through the fake's REST API, and their traffic address is
the fake's proxy front (`http://127.0.0.1:<front>/<podId>-<port>`). Behind it each RUNNING pod serves
the same token server as the home replicas (`token_pod_app`), so the load generator's requests succeed
on either side, and it names itself `<node>/<RunPod pod id>` in `X-Served-By`.
"""

from __future__ import annotations

from aiohttp import web

from vk_provider.demo.tokens import TokenServerSettings, make_app
from vk_provider.testing.runpod_server import ServedPod
from vk_providers.runpod.translate import ENV_NODE_NAME

TOKEN_DELAY_SECONDS = 0.005
"""As the home replicas' `--token-delay`: both sides stream alike."""


def token_pod_app(pod: ServedPod) -> web.Application:
    """A `FakeRunPod` pod app: the token server, named after the node that made the pod and its id."""
    node = pod.env.get(ENV_NODE_NAME, "runpod")
    return make_app(TokenServerSettings(name=f"{node}/{pod.id}", token_delay=TOKEN_DELAY_SECONDS))


def runpod_pod_of(served_by: str | None) -> str:
    """The RunPod pod id in a `token_pod_app`'s `X-Served-By` (the part after the node name)."""
    return (served_by or "").partition("/")[2]
