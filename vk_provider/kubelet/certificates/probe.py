"""Does the apiserver accept our serving certificate? Ask it: a request through its node proxy.

Why: a client that refuses the certificate hangs up in the handshake, before it says who it is, so a
refusal alone cannot tell the apiserver (then `kubectl logs`, `exec` and `port-forward` fail) from
metrics-server or a Prometheus scraping the kubelet port (then only `kubectl top` and kubelet metrics
do). A `GET /api/v1/nodes/<node>/proxy/healthz` makes the apiserver dial the node as it does for
`kubectl logs`; its answer settles it. It needs `get` on `nodes/proxy` for the node's own name, which
grants nothing new: the proxied requests reach this very daemon.

The apiserver may reach another process (a standby replica whose address the Node does not carry):
`/healthz` answers with this process's `INSTANCE_HEADER`, and an answer from another one settles
nothing. `classify` (pure) reads the answer; `probe_through_apiserver` makes the request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import secrets
from collections.abc import Awaitable, Callable, Mapping

import aiohttp

from vk_provider.kit.kube import KubeApi, KubeApiError

INSTANCE_HEADER = "X-Vk-Provider-Instance"
INSTANCE_ID = secrets.token_hex(8)
"""This process's, sent by the kubelet API's `/healthz`: the probe knows the answer came from us."""

PROBE_TIMEOUT_SECONDS = 15.0

# What the apiserver's proxy says when the TLS handshake with the node fails verification (Go's
# crypto/tls and crypto/x509 errors, quoted in the proxy's "error trying to reach service" Status).
_VERIFICATION_MARKERS = ("x509:", "tls: failed to verify", "certificate signed by unknown authority")


class Verdict(enum.Enum):
    ACCEPTED = "accepted"
    """The apiserver reached this process over TLS: it accepts the certificate."""
    REFUSED = "refused"
    """The apiserver could not verify the certificate."""
    UNKNOWN = "unknown"
    """The probe settles nothing (no permission, no Node yet, another replica answered, ...)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ProbeResult:
    verdict: Verdict
    detail: str
    """For people: the apiserver's words, or why the probe settles nothing."""


ApiserverProbe = Callable[[], Awaitable[ProbeResult]]


def classify(status: int, message: str, headers: Mapping[str, str] | None = None) -> ProbeResult:
    """The verdict from the proxied request's status, the apiserver's message and the answer's headers."""
    if 200 <= status <= 299:
        instance = (headers or {}).get(INSTANCE_HEADER)
        if instance == INSTANCE_ID:
            return ProbeResult(Verdict.ACCEPTED, "a request through the apiserver's node proxy succeeded")
        return ProbeResult(Verdict.UNKNOWN, "the apiserver's node proxy reached another replica of the node")
    if status in (401, 403):
        return ProbeResult(
            Verdict.UNKNOWN,
            f"the node may not use its own node proxy ({status}: {message}); grant `get` on nodes/proxy "
            "for its name to tell the apiserver's refusals from other clients'",
        )
    if status == 404:
        return ProbeResult(Verdict.UNKNOWN, f"the Node is not registered yet ({message})")
    lowered = message.lower()
    if any(marker in lowered for marker in _VERIFICATION_MARKERS):
        return ProbeResult(Verdict.REFUSED, f"the apiserver's node proxy answered {status}: {message}")
    return ProbeResult(Verdict.UNKNOWN, f"the apiserver's node proxy answered {status}: {message}")


def probe_through_apiserver(api: KubeApi, node_name: str) -> ApiserverProbe:
    """A probe of `node_name`'s certificate through `api`'s node proxy (see the module)."""
    path = f"/api/v1/nodes/{node_name}/proxy/healthz"

    async def probe() -> ProbeResult:
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
                response = await api.open_stream(path)
                try:
                    text = (await response.read()).decode(errors="replace")
                finally:
                    response.release()
        except KubeApiError as error:
            return classify(error.status, error.message)
        except (OSError, TimeoutError, aiohttp.ClientError) as error:
            return ProbeResult(Verdict.UNKNOWN, f"the apiserver could not be asked: {error!r}")
        instance = response.headers.get(INSTANCE_HEADER)
        return classify(response.status, text, {INSTANCE_HEADER: instance} if instance else None)

    return probe
