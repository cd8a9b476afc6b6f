"""Shared pieces of the kubelet API tests: pods as the API returns them, a settable clock, small
providers that lack a capability or script a log, and a test client around `build_app`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from vk_provider.kubelet.routes import KubeletBackend, build_app
from vk_provider.provider import (
    ContainerSpec,
    ContainerStreams,
    LogOptions,
    PodLifecycle,
    PodRef,
    PodRequest,
    PodState,
    ProviderContext,
    SupportsLogs,
    SupportsUsage,
)
from vk_providers.mock import MockProvider

NODE = "vk-test"
START = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
"""When the test pods start; 1704164645 seconds after the epoch."""
NODE_STARTED = datetime(2024, 1, 1, tzinfo=UTC)

Client = TestClient[web.Request, web.Application]


class FakeClock:
    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def api_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_json(
    name: str,
    *containers: str,
    namespace: str = "default",
    phase: str = "Running",
    init_containers: Sequence[str] = (),
    started_at: datetime = START,
) -> dict[str, Any]:
    """A pod bound to the test node, as the watch cache holds it, with every container running."""
    names = containers or ("app",)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {
            "nodeName": NODE,
            "containers": [{"name": container, "image": "busybox"} for container in names],
            "initContainers": [{"name": container, "image": "busybox"} for container in init_containers],
        },
        "status": {
            "phase": phase,
            "startTime": api_time(started_at),
            "containerStatuses": [
                {"name": container, "state": {"running": {"startedAt": api_time(started_at)}}}
                for container in names
            ],
        },
    }


def ref_of(pod: Mapping[str, Any]) -> PodRef:
    metadata = pod["metadata"]
    return PodRef(namespace=metadata["namespace"], name=metadata["name"], uid=metadata["uid"])


def request_of(pod: Mapping[str, Any]) -> PodRequest:
    containers = tuple(
        ContainerSpec(name=container["name"], image=container["image"])
        for container in pod["spec"]["containers"]
    )
    return PodRequest(ref=ref_of(pod), node_name=NODE, containers=containers)


def mock_provider(tmp_path: Path, clock: FakeClock, **config: Any) -> MockProvider:
    context = ProviderContext(node_name=NODE, config=config, host_ip="10.0.0.1", state_dir=tmp_path)
    return MockProvider(context, clock=clock)


async def running_mock(
    tmp_path: Path, clock: FakeClock, *pods: Mapping[str, Any], **config: Any
) -> MockProvider:
    """A mock provider already running `pods` (created at the clock's time)."""
    provider = mock_provider(tmp_path, clock, **config)
    for pod in pods:
        await provider.create_pod(request_of(pod))
    return provider


def backend_for(
    provider: PodLifecycle,
    pods: Sequence[Mapping[str, Any]],
    *,
    clock: Callable[[], datetime] | None = None,
    metrics: Callable[[], bytes] | None = None,
) -> KubeletBackend:
    """What the node daemon would serve with this provider, these pods and these metrics."""
    return KubeletBackend(
        node_name=NODE,
        node_started_at=NODE_STARTED,
        bound_pods=lambda: list(pods),  # read at each request, like the watch cache
        running_pods=provider.list_pods,
        stream_logs=provider.stream_logs if isinstance(provider, SupportsLogs) else None,
        pod_usage=provider.usage if isinstance(provider, SupportsUsage) else None,
        metrics=metrics,
        clock=clock or FakeClock(),
    )


@contextlib.asynccontextmanager
async def kubelet_client(
    provider: PodLifecycle,
    pods: Sequence[Mapping[str, Any]],
    *,
    clock: Callable[[], datetime] | None = None,
    metrics: Callable[[], bytes] | None = None,
) -> AsyncIterator[Client]:
    app = build_app(backend_for(provider, pods, clock=clock, metrics=metrics))
    async with TestClient(TestServer(app)) as client:
        yield client


class BareProvider:
    """The required lifecycle only: no logs, no usage. `states` is what list_pods returns."""

    def __init__(self, states: Sequence[PodState] = ()) -> None:
        self.states = list(states)

    async def create_pod(self, pod: PodRequest) -> None:
        return None

    async def update_pod(self, pod: PodRequest) -> None:
        return None

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        return None

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        return None

    async def list_pods(self) -> Sequence[PodState]:
        return list(self.states)

    async def check_health(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class Hanging(BareProvider):
    """An exec that runs until cancelled, and says when it was."""

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def exec_in_container(
        self, ref: PodRef, container: str, command: Sequence[str], streams: ContainerStreams
    ) -> int:
        self.started.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.cancelled.set()
        return 0


class ScriptedLogs(BareProvider):
    """Serves whatever stream `script` makes for the options, and remembers the options it got."""

    def __init__(self, script: Callable[[LogOptions], AsyncIterator[bytes]]) -> None:
        super().__init__()
        self._script = script
        self.options: list[LogOptions] = []

    def stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        self.options.append(options)
        return self._script(options)


class TrackedStream:
    """An async generator's life, seen from outside: started, closed (its finally ran)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.closed = asyncio.Event()

    def run(self, chunks: Sequence[bytes], *, then_wait: bool) -> AsyncIterator[bytes]:
        async def stream() -> AsyncIterator[bytes]:
            self.started.set()
            try:
                for chunk in chunks:
                    yield chunk
                if then_wait:
                    await asyncio.Event().wait()  # a quiet container: nothing more, ever
            finally:
                self.closed.set()

        return stream()
