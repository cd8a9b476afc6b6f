"""In-memory pods: Running at once on create, gone at once on delete; every change is pushed.

Logs and usage are synthetic but deterministic, so the kubelet API can be tested to the byte:

- each container's log is `LOG_HISTORY_LINES` lines `mock log line N of <pod>/<container>`, line N
  stamped `LOG_LINE_SPACING * (N - 1)` after the container started; `follow` then adds one line per
  `log_follow_interval_seconds` (stamped with the clock) until the stream is closed or the pod deleted.
  Options apply as the kubelet applies them: `tail_lines` picks the last lines of the history, then
  `since_time` drops lines stamped before it, `timestamps` prefixes each line with its RFC 3339 time
  (nanoseconds, as the kubelet writes it), and `limit_bytes` cuts the whole output at exactly that many
  bytes. Containers never restart here, so `previous` finds nothing (NotFoundError, as the kubelet);
- exec, attach and port-forward run a few built-in commands and echo servers (`streams`);
- each running container uses `CPU_CORES_PER_CONTAINER` cores since it started (cumulative CPU grows
  linearly with the clock) and a fixed working set of `MEMORY_WORKING_SET_BYTES`.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

from vk_provider.errors import (
    InvalidPodError,
    NotFoundError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.provider import (
    ByteSink,
    ContainerState,
    ContainerStateKind,
    ContainerStreams,
    ContainerUsage,
    LogOptions,
    PodRef,
    PodRequest,
    PodState,
    PricedPod,
    ProviderContext,
)
from vk_providers.mock.streams import attach, echo_port, run_builtin

FAIL_CREATE_LABEL = "mock.vk-provider.dev/fail-create"
"""A pod with this label fails to create with the label's value as the message (retryable, or a refusal
for good when the value starts with "invalid"); removing the label lets the next retry succeed."""

LOG_HISTORY_LINES = 10
LOG_LINE_SPACING = timedelta(milliseconds=100)
CPU_CORES_PER_CONTAINER = 0.1
MEMORY_WORKING_SET_BYTES = 64 * 1024 * 1024
_CPU_NANOSECONDS_PER_MICROSECOND = round(1000 * CPU_CORES_PER_CONTAINER)
"""CPU time used per microsecond of wall time, in integers so the counter is exact."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


class MockProvider:
    ephemeral_workloads: ClassVar[bool] = True
    """The pods live in this instance's memory: a restarted node's new instance finds none of them
    (`vk_provider.provider.declares_ephemeral_workloads`; the conformance kit skips the restart tests)."""

    def __init__(self, context: ProviderContext, *, clock: Callable[[], datetime] = _utc_now) -> None:
        """`clock` gives the time the provider sees (start times, usage, followed log lines); for tests."""
        config = context.config
        self._clock = clock
        self._follow_interval_seconds = float(config.get("log_follow_interval_seconds", 1.0))
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
        now = self._clock()
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

    def pod_price_per_hour(self, pod: PricedPod) -> float | None:
        """Nothing: its pods live in memory, and a spend ceiling has nothing to count."""
        return 0.0

    async def watch_states(self) -> AsyncIterator[PodState]:
        while True:
            yield await self._changes.get()

    async def aclose(self) -> None:
        return None

    # SupportsLogs

    def stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        state = self._running_container(ref, container)
        if options.previous:
            raise NotFoundError(f"previous terminated container {container!r} in pod {ref} not found")
        started_at = state.started_at or self._clock()
        return self._log(ref, container, started_at, options)

    async def _log(
        self, ref: PodRef, container: str, started_at: datetime, options: LogOptions
    ) -> AsyncIterator[bytes]:
        limit = _ByteLimit(options.limit_bytes)
        for number, stamp in _history(started_at, options):
            yield limit.cut(_log_line(ref, container, number, stamp, options.timestamps))
            if limit.reached:
                return
        number = LOG_HISTORY_LINES
        while options.follow and ref.uid in self._pods:
            await asyncio.sleep(self._follow_interval_seconds)
            number += 1
            stamp = self._clock()
            if ref.uid not in self._pods or (options.since_time is not None and stamp < options.since_time):
                continue
            yield limit.cut(_log_line(ref, container, number, stamp, options.timestamps))
            if limit.reached:
                return

    # SupportsUsage

    async def usage(self, ref: PodRef) -> Sequence[ContainerUsage]:
        state = self._pods.get(ref.uid)
        if state is None:
            raise NotFoundError(f"pod {ref} is not held by the mock provider")
        now = self._clock()
        return [
            ContainerUsage(
                name=container.name,
                cpu_usage_core_nanoseconds=_cpu_since(container.started_at, now),
                memory_working_set_bytes=MEMORY_WORKING_SET_BYTES,
                timestamp=now,
            )
            for container in state.containers
            if container.state is ContainerStateKind.RUNNING and container.started_at is not None
        ]

    async def exec_in_container(
        self, ref: PodRef, container: str, command: Sequence[str], streams: ContainerStreams
    ) -> int:
        self._running_container(ref, container)
        return await run_builtin(command, streams)

    async def attach_to_container(self, ref: PodRef, container: str, streams: ContainerStreams) -> None:
        self._running_container(ref, container)
        await attach(streams)

    async def port_forward(
        self, ref: PodRef, port: int, incoming: AsyncIterator[bytes], send: ByteSink
    ) -> None:
        if ref.uid not in self._pods:
            raise NotFoundError(f"pod {ref} is not known to the mock provider")
        await echo_port(incoming, send)

    def _running_container(self, ref: PodRef, name: str) -> ContainerState:
        state = self._pods.get(ref.uid)
        if state is None:
            raise NotFoundError(f"pod {ref} is not held by the mock provider")
        for container in state.containers:
            if container.name == name:
                return container
        raise NotFoundError(f"pod {ref} has no container {name!r}")


class _ByteLimit:
    """Cuts a stream at exactly `limit` bytes (None: no limit)."""

    def __init__(self, limit: int | None) -> None:
        self._remaining = limit

    def cut(self, chunk: bytes) -> bytes:
        if self._remaining is None:
            return chunk
        chunk = chunk[: self._remaining]
        self._remaining -= len(chunk)
        return chunk

    @property
    def reached(self) -> bool:
        return self._remaining == 0


def _history(started_at: datetime, options: LogOptions) -> Iterator[tuple[int, datetime]]:
    """(line number, time) of the history lines the options select: the tail first, then since_time."""
    numbers = range(1, LOG_HISTORY_LINES + 1)
    if options.tail_lines is not None:
        numbers = numbers[max(0, LOG_HISTORY_LINES - options.tail_lines) :]
    for number in numbers:
        stamp = started_at + LOG_LINE_SPACING * (number - 1)
        if options.since_time is None or stamp >= options.since_time:
            yield number, stamp


def _log_line(ref: PodRef, container: str, number: int, stamp: datetime, timestamps: bool) -> bytes:
    line = f"mock log line {number} of {ref.name}/{container}\n"
    if timestamps:
        line = f"{_kubelet_timestamp(stamp)} {line}"
    return line.encode()


def _kubelet_timestamp(moment: datetime) -> str:
    """RFC 3339 with nine fraction digits, as the kubelet prefixes log lines."""
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond:06d}000Z"


def _cpu_since(started_at: datetime, now: datetime) -> int:
    elapsed_microseconds = max(0, (now - started_at) // timedelta(microseconds=1))
    return elapsed_microseconds * _CPU_NANOSECONDS_PER_MICROSECOND
