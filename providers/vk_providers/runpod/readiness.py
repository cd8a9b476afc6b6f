"""Readiness of RunPod pods, checked through RunPod's HTTPS proxy.

RunPod says RUNNING once the container has started, which for an inference server is minutes before the
model is loaded and requests are answered: a router trusting RUNNING would send traffic into the proxy's
502s. So a container with an HTTP GET readiness probe is ready only while that probe, sent through the
pod's proxy address, answers 200-399 (as the kubelet judges it). The probe's port and path travel in the
RunPod pod's environment (`VK_PROVIDER_READINESS=<port><path>`), so a restarted node still knows what
to check without the pod spec.

One check per status poll of the node, at most one per `readiness_interval_seconds` per pod, each
limited by `readiness_timeout_seconds`; one success or one failure decides, and the probe's headers are
not sent. A container without an HTTP GET readiness probe is ready when RUNNING (exec and TCP probes
cannot be run through an HTTPS proxy; they are ignored).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable

import aiohttp

from vk_provider.errors import InvalidPodError
from vk_provider.provider import ContainerSpec, HttpGetAction

logger = logging.getLogger(__name__)

ENV_READINESS = "VK_PROVIDER_READINESS"
_TARGET = re.compile(r"^(\d+)(/.*)$")


@dataclasses.dataclass(frozen=True, slots=True)
class ReadinessTarget:
    port: int
    path: str

    def encode(self) -> str:
        return f"{self.port}{self.path}"

    @classmethod
    def decode(cls, text: str | None) -> ReadinessTarget | None:
        match = _TARGET.match(text or "")
        return None if match is None else cls(int(match.group(1)), match.group(2))


def readiness_target(container: ContainerSpec, exposed_ports: list[int]) -> ReadinessTarget | None:
    """What to check for `container`; InvalidPodError if its HTTP probe's port is not exposed."""
    probe = container.readiness_probe
    if probe is None or not isinstance(probe.action, HttpGetAction):
        return None
    action = probe.action
    if action.port not in exposed_ports:
        raise InvalidPodError(
            f"container {container.name!r}: the readiness probe's port {action.port} is not one of its "
            "ports, and RunPod's proxy reaches declared ports only"
        )
    path = action.path if action.path.startswith("/") else f"/{action.path}"
    return ReadinessTarget(action.port, path)


@dataclasses.dataclass(slots=True)
class _Result:
    ready: bool
    checked_at: float


class ReadinessChecker:
    """Probes pods through the proxy and remembers the last answer per RunPod pod id."""

    def __init__(self, *, timeout_seconds: float, min_interval_seconds: float, clock: Callable[[], float]):
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._min_interval = min_interval_seconds
        self._clock = clock
        self._results: dict[str, _Result] = {}
        self._session: aiohttp.ClientSession | None = None

    def last(self, pod_id: str) -> bool:
        """The last answer for the pod; not ready before the first check."""
        result = self._results.get(pod_id)
        return result is not None and result.ready

    async def check(self, pod_id: str, url: str) -> bool:
        result = self._results.get(pod_id)
        if result is not None and self._clock() - result.checked_at < self._min_interval:
            return result.ready
        ready = await self._probe(url)
        if result is not None and result.ready != ready:
            logger.info("RunPod pod %s is %s (%s)", pod_id, "ready" if ready else "not ready", url)
        self._results[pod_id] = _Result(ready, self._clock())
        return ready

    async def _probe(self, url: str) -> bool:
        # A session of its own: the API session carries the RunPod key, which must never reach a pod.
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.get(url, allow_redirects=False) as response:
                await response.read()
                return 200 <= response.status < 400
        except (aiohttp.ClientError, TimeoutError) as error:
            logger.debug("readiness check of %s failed: %s", url, error)
            return False

    def forget(self, pod_id: str) -> None:
        self._results.pop(pod_id, None)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
