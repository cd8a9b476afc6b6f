"""The away side of a migration rig on RunPod's stand-in: a `runpod` node and pods that serve tokens.

The node daemon is the real `runpod` provider, pointed at a `FakeRunPod` running in the test's event
loop: pods are created, polled and deleted through the fake's REST API, and their traffic address is
the fake's proxy front (`http://127.0.0.1:<front>/<podId>-<port>`). Behind it each RUNNING pod serves
the same token server as the home replicas (`token_pod_app`), so the load generator's requests succeed
on either side, and it names itself `<node>/<RunPod pod id>` in `X-Served-By`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from vk_provider.demo.tokens import TokenServerSettings, make_app
from vk_provider.testing.runpod_server import FakeRunPod, ServedPod
from vk_providers.runpod.translate import ENV_NODE_NAME

GPU_TYPE = "NVIDIA GeForce RTX 4090"
TOKEN_DELAY_SECONDS = 0.005
"""As the home replicas' `--token-delay`: both sides stream alike."""


def token_pod_app(pod: ServedPod) -> web.Application:
    """A `FakeRunPod` pod app: the token server, named after the node that made the pod and its id."""
    node = pod.env.get(ENV_NODE_NAME, "runpod")
    return make_app(TokenServerSettings(name=f"{node}/{pod.id}", token_delay=TOKEN_DELAY_SECONDS))


def runpod_provider_config(fake: FakeRunPod, folder: Path) -> dict[str, Any]:
    """The `runpod` provider's settings for a node whose RunPod is `fake` (the key in a file, as a Secret)."""
    key_file = folder / "runpod-api-key"
    key_file.parent.mkdir(parents=True, exist_ok=True)
    key_file.write_text(fake.api_key)
    return {
        "api_url": fake.api_url,
        "api_key_file": str(key_file),
        "proxy_url_template": fake.proxy_url_template,
        "gpu_type": GPU_TYPE,
    }


def runpod_pod_of(served_by: str | None) -> str:
    """The RunPod pod id in a `token_pod_app`'s `X-Served-By` (the part after the node name)."""
    return (served_by or "").partition("/")[2]
