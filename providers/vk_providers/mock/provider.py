"""In-memory pods: Running at once on create, gone at once on delete; every change is pushed."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from vk_provider.errors import (
    InvalidPodError,
    NotFoundError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.provider import (
    ContainerState,
    ContainerStateKind,
    PodRef,
    PodRequest,
    PodState,
    ProviderContext,
)

FAIL_CREATE_LABEL = "mock.vk-provider.dev/fail-create"
"""A pod with this label fails to create with the label's value as the message (retryable, or a refusal
for good when the value starts with "invalid"); removing the label lets the next retry succeed."""


class MockProvider:
    def __init__(self, context: ProviderContext) -> None:
        config = context.config
        self._network = ipaddress.ip_network(str(config.get("pod_cidr", "10.200.0.0/16")))
        self._capacity = {str(key): str(value) for key, value in dict(config.get("capacity", {})).items()}
        self._traffic_port = int(config.get("traffic_port", 8080))
        marker = config.get("unhealthy_marker_file")
        self._unhealthy_marker = Path(marker) if marker else None
        self._hosts = self._network.hosts()
        self._addresses: dict[str, str] = {}
        self._pods: dict[str, PodState] = {}
        self._changes: asyncio.Queue[PodState] = asyncio.Queue()

    async def pod_address(self, ref: PodRef) -> str:
        address = self._addresses.get(ref.uid)
        if address is None:
            try:
                address = str(next(self._hosts))
            except StopIteration:
                raise NotFoundError(f"the pod CIDR {self._network} is exhausted") from None
            self._addresses[ref.uid] = address
        return address

    async def create_pod(self, pod: PodRequest) -> None:
        if pod.ref.uid in self._pods:
            return
        failure = pod.labels.get(FAIL_CREATE_LABEL)
        if failure is not None:
            if failure.startswith("invalid"):
                raise InvalidPodError(f"mock provider refuses the pod: {failure}")
            raise TemporaryProviderError(f"mock provider failure: {failure}")
        now = datetime.now(UTC)
        address = await self.pod_address(pod.ref)
        containers = tuple(
            ContainerState(
                name=container.name,
                image=container.image,
                state=ContainerStateKind.RUNNING,
                ready=True,
                started=True,
                started_at=now,
            )
            for container in pod.containers
        )
        state = PodState(
            ref=pod.ref,
            phase="Running",
            containers=containers,
            pod_ip=address,
            started_at=now,
            traffic_address=f"http://{address}:{self._traffic_port}",
        )
        self._pods[pod.ref.uid] = state
        self._changes.put_nowait(state)

    async def update_pod(self, pod: PodRequest) -> None:
        return None  # nothing to change in memory

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        state = self._pods.pop(ref.uid, None)
        self._addresses.pop(ref.uid, None)
        if state is not None:
            self._changes.put_nowait(
                PodState(
                    ref=ref,
                    phase="Succeeded",
                    pod_ip=state.pod_ip,
                    started_at=state.started_at,
                    terminated=True,
                )
            )

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        return self._pods.get(ref.uid)

    async def list_pods(self) -> Sequence[PodState]:
        return list(self._pods.values())

    async def check_health(self) -> None:
        if self._unhealthy_marker is not None and self._unhealthy_marker.exists():
            raise ProviderUnavailableError(f"mock provider marked unhealthy by {self._unhealthy_marker}")

    async def node_capacity(self) -> Mapping[str, str]:
        return self._capacity

    async def watch_states(self) -> AsyncIterator[PodState]:
        while True:
            yield await self._changes.get()

    async def aclose(self) -> None:
        return None
