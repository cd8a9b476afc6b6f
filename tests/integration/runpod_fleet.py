"""Helpers for reliability tests of `runpod` nodes against the RunPod stand-in: settings, GPU pods, what
the stand-in saw (creates per pod UID, injected faults), and a fleet of pods driven to a state and back.

The stand-in (`FakeRunPod`) runs in the test's event loop; the node daemon is a subprocess that calls it
over loopback, so the stand-in's request log is a complete, independent record of what the provider did.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from tests.integration.daemons import NodeDaemon
from tests.integration.nodes import TOLERATE_ALL
from tests.integration.waiting import wait_for
from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_providers.runpod.translate import ENV_POD_UID

GPU = "NVIDIA GeForce RTX 4090"
IMAGE = "registry.example/llm-server:1"
CREATE_PATH = "/v2/pods"

# Resilience short enough for a test: an attempt gives up after 1 s (the stand-in's hangs last 1.5 s, so
# they are timeouts to the provider), retries start at 0.1 s, and the breaker, at its default threshold,
# reopens for trial after 2 s rather than 30.
FAST_RUNPOD: dict[str, Any] = {
    "call_timeout_seconds": 1.0,
    "health_timeout_seconds": 1.0,
    "max_attempts": 4,
    "backoff_initial_seconds": 0.1,
    "backoff_max_seconds": 1.0,
    "max_retry_after_seconds": 5.0,
    "breaker_open_seconds": 2.0,
    "log_idle_seconds": 0.3,
}
HANG_SECONDS = 1.5
"""How long the stand-in's random hangs (and held-back answers) last: over the 1 s call timeout."""


def runpod_config(fake: FakeRunPod, folder: Path, **overrides: Any) -> dict[str, Any]:
    """The `runpod` provider's settings for `fake`; its key in a file of its own under `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    key_file = folder / "runpod-api-key"
    key_file.write_text(fake.api_key + "\n")
    return {
        "api_url": fake.api_url,
        "proxy_url_template": fake.proxy_url_template,
        "api_key_file": str(key_file),
        "gpu_type": GPU,
        **FAST_RUNPOD,
        **overrides,
    }


def gpu_pod(
    name: str,
    node: str,
    *,
    restart_policy: str = "Always",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A one-container pod bound to `node`, as RunPod runs pods: the image's entrypoint, no command. No
    ports: the stand-in would serve an HTTP app per port, which 50 pods do not need."""
    return {
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {
            "nodeName": node,
            "tolerations": TOLERATE_ALL,
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "main", "image": IMAGE}],
        },
    }


def creates_by_uid(fake: FakeRunPod) -> collections.Counter[str]:
    """How many RunPod pods the stand-in made for each pod UID: its creates that were carried out (201),
    whether or not their answer reached the provider."""
    made: collections.Counter[str] = collections.Counter()
    for record in fake.requests:
        if record.method == "POST" and record.path == CREATE_PATH and record.status == 201:
            made[str(record.body["env"][ENV_POD_UID])] += 1
    return made


def faults_served(fake: FakeRunPod) -> collections.Counter[str]:
    """The faults the stand-in served, by kind, from its request log."""
    return collections.Counter(record.fault for record in fake.requests if record.fault is not None)


def lost_creates(fake: FakeRunPod) -> int:
    """Creates carried out whose answer the provider never got."""
    return sum(
        1
        for record in fake.requests
        if record.method == "POST"
        and record.path == CREATE_PATH
        and record.fault == "lose_answer"
        and record.status == 201
    )


@dataclasses.dataclass
class Fleet:
    """Pods named `<prefix>-NN` in one namespace, on one node; their UIDs once created."""

    core: client.CoreV1Api
    namespace: str
    node: str
    size: int
    prefix: str = "gpu"
    uids: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [f"{self.prefix}-{index:02d}" for index in range(self.size)]

    async def create(self, *, parallel: int = 10) -> None:
        gate = asyncio.Semaphore(parallel)

        async def one(name: str) -> None:
            async with gate:
                created = await self.core.create_namespaced_pod(self.namespace, gpu_pod(name, self.node))
                self.uids[name] = created.metadata.uid

        await asyncio.gather(*(one(name) for name in self.names))

    async def delete(self, *, parallel: int = 10) -> None:
        gate = asyncio.Semaphore(parallel)

        async def one(name: str) -> None:
            async with gate:
                await self.core.delete_namespaced_pod(name, self.namespace)

        await asyncio.gather(*(one(name) for name in self.names))

    async def phases(self) -> dict[str, str]:
        pods = (await self.core.list_namespaced_pod(self.namespace)).items
        return {pod.metadata.name: pod.status.phase for pod in pods}

    async def not_running(self, phases: dict[str, str]) -> list[str]:
        """The pods of the fleet not Running, with their phase (async, like every `wait_for_fleet` probe)."""
        return [
            f"{name}: {phases.get(name, 'missing')}" for name in self.names if phases.get(name) != "Running"
        ]

    async def count_running(self) -> int:
        return sum(1 for phase in (await self.phases()).values() if phase == "Running")

    async def count_gone(self) -> int:
        return self.size - len(await self.phases())


async def wait_and_kill(
    daemon: NodeDaemon, probe: Callable[[], Awaitable[int]], threshold: int, what: str
) -> None:
    """Once `probe` reaches `threshold`: kill -9 the daemon and start it again at once."""

    async def reached() -> bool:
        return await probe() >= threshold

    await wait_for(reached, timeout_seconds=120, what=f"{threshold} pods {what} before a kill -9")
    daemon.kill()
    daemon.start()
