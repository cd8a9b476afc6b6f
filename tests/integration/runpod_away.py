"""The away side of a migration rig on RunPod's stand-in: a `runpod` node and pods that serve tokens.

The node daemon is the real `runpod` provider, pointed at a `FakeRunPod` running in the test's event
loop: pods are created, polled and deleted through the fake's REST API, and their traffic address is
the fake's proxy front (`http://127.0.0.1:<front>/<podId>-<port>`). Behind it each RUNNING pod serves
the same token server as the home replicas (`token_pod_app`, shared with the development cluster's
stand-in), so the load generator's requests succeed on either side, and it names itself
`<node>/<RunPod pod id>` in `X-Served-By`.
"""

from __future__ import annotations

from vk_devtools.standins.runpod.workloads import TOKEN_DELAY_SECONDS, token_pod_app

__all__ = ["TOKEN_DELAY_SECONDS", "runpod_pod_of", "token_pod_app"]


def runpod_pod_of(served_by: str | None) -> str:
    """The RunPod pod id in a `token_pod_app`'s `X-Served-By` (the part after the node name)."""
    return (served_by or "").partition("/")[2]
