"""The stand-in's pods: their records, statuses and logs, and the machine that moves each one on.

A pod is created PROVISIONING, then becomes STARTING, then RUNNING after the profile's delays (or is
held, to be moved by the control plane), and its ports are served once its load time has passed too
(the model loads: RUNNING, but nothing answers yet); EXITED, ERROR and TERMINATED come only from the
control plane, and a pod moved there by hand is served at once; a removed pod is gone. Delays are
slept on the stand-in's clock. Every pod keeps its own log, system and container lines numbered in one
sequence per stand-in. Serving a RUNNING pod's ports is left to the `PodServing` that `Pods` is given (the
proxy's), so nothing here speaks HTTP.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import secrets
import string
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol

from vk_devtools.standins.runpod.clock import Clock
from vk_devtools.standins.runpod.profile import Profile
from vk_provider.kit.timestamps import parse_timestamp

logger = logging.getLogger(__name__)

POD_STATUSES = ("PROVISIONING", "STARTING", "RUNNING", "EXITED", "ERROR", "TERMINATED")
ACTIONS = {
    "PROVISIONING": ["stop", "terminate"],
    "STARTING": ["stop", "terminate"],
    "RUNNING": ["stop", "restart", "terminate"],
    "EXITED": ["start", "terminate"],
    "ERROR": ["start", "terminate"],
    "TERMINATED": [],
}
"""What RunPod lists as a pod's `actions` in each status."""
_STATUS_LINES = {
    "PROVISIONING": "waiting for a machine",
    "STARTING": "starting container from image {image}",
    "RUNNING": "container is running",
    "EXITED": "container exited",
    "ERROR": "container is in an unrecoverable error state",
    "TERMINATED": "pod terminated",
}
"""The system log line for entering each status (unless a message is given)."""
MAX_HTTP_PORTS = 10
MAX_LOG_TAIL = 5000
DEFAULT_LOG_TAIL = 100
_PORT = re.compile(r"^(\d+)/(http|tcp)$")
_POD_ID_ALPHABET = string.ascii_lowercase + string.digits


def rfc3339(moment: datetime) -> str:
    """RFC 3339 in UTC as the stand-in writes it: fractional seconds only when there are any.

    Not `vk_provider.kit.timestamps`: its `format_timestamp` drops the microseconds and its
    `format_micro_timestamp` always writes six digits, and the stand-in's format must not change.
    """
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclasses.dataclass(frozen=True, slots=True)
class LogEvent:
    seq: int
    ts: datetime
    source: str
    line: str

    @property
    def event_id(self) -> str:
        return f"{rfc3339(self.ts)}/{self.seq:012d}"


@dataclasses.dataclass(slots=True)
class Pod:
    """One pod as the stand-in keeps it."""

    id: str
    name: str
    image: str
    args: str
    disk: int
    ports: list[str]
    env: dict[str, str]
    registry: str | None
    gpu_id: str
    gpu_count: int
    cloud: str
    data_center_id: str
    price_per_gpu: float
    created_at: datetime
    status: str = "PROVISIONING"
    started_at: datetime | None = None
    machine: asyncio.Task[None] | None = None
    logs: list[LogEvent] = dataclasses.field(default_factory=list)
    log_waiter: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    gone: bool = False

    def http_ports(self) -> list[int]:
        return [
            int(match.group(1)) for port in self.ports if (match := _PORT.match(port)) and match[2] == "http"
        ]


def port_problem(ports: list[str]) -> str | None:
    """What is wrong with a pod's `ports` (a 400), or None."""
    http = 0
    for port in ports:
        match = _PORT.match(port)
        if match is None:
            return f"port {port!r} is not formatted as <port>/http or <port>/tcp"
        number = int(match.group(1))
        if not 1 <= number <= 65535 and not (match.group(2) == "tcp" and number > 70000):
            return f"port {port!r} is out of range"
        http += match.group(2) == "http"
    if http > MAX_HTTP_PORTS:
        return f"at most {MAX_HTTP_PORTS} HTTP ports may be exposed, not {http}"
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class LogSelection:
    """Which of a pod's log lines a log request asked for (`source`, `tail`, `since`, `Last-Event-ID`)."""

    source: str | None
    tail: int
    since: datetime | None
    after_seq: int | None

    def source_matches(self, event: LogEvent) -> bool:
        return self.source is None or event.source == self.source

    def __call__(self, events: Sequence[LogEvent]) -> list[LogEvent]:
        matching = [event for event in events if self.source_matches(event)]
        if self.after_seq is not None:
            return [event for event in matching if event.seq > self.after_seq]
        if self.since is not None:
            return [event for event in matching if event.ts >= self.since]
        return matching[len(matching) - self.tail :] if self.tail else []


def log_selection(query: Mapping[str, str], last_event_id: str | None) -> LogSelection:
    """The selection of a log request's query and `Last-Event-ID`; ValueError says what is wrong."""
    source = query.get("source")
    if source is not None and source not in ("container", "system"):
        raise ValueError("source must be container or system")
    tail_text = query.get("tail", str(DEFAULT_LOG_TAIL))
    if not tail_text.isdigit() or int(tail_text) > MAX_LOG_TAIL:
        raise ValueError(f"tail must be an integer from 0 to {MAX_LOG_TAIL}")
    since = _parse_time(query["since"], "since") if "since" in query else None
    after_seq = None
    if last_event_id:
        _, _, seq = last_event_id.partition("/")
        if not seq.isdigit():
            raise ValueError("Last-Event-ID is not an id this stream sent")
        after_seq = int(seq)
    return LogSelection(source, int(tail_text), since, after_seq)


def _parse_time(text: str, name: str) -> datetime:
    moment = parse_timestamp(text, assume_utc=False)
    if moment is None:
        zoneless = parse_timestamp(text) is not None
        raise ValueError(f"{name} must be an RFC 3339 date-time{' with a zone' if zoneless else ''}")
    return moment


class PodServing(Protocol):
    """Serves a RUNNING pod's HTTP ports; `log` writes a container log line of the pod."""

    async def start(self, pod: Pod, log: Callable[[str], None]) -> None: ...

    async def stop(self, pod: Pod) -> None: ...


class Pace(Protocol):
    """How pods move on (the stand-in's profile, read when it is needed); `auto_advance` false holds
    new pods in PROVISIONING until the control plane moves them."""

    @property
    def profile(self) -> Profile: ...

    @property
    def auto_advance(self) -> bool: ...


class Pods:
    """The pods of one stand-in by id, their logs, and the task that moves each one on."""

    def __init__(self, serving: PodServing, pace: Pace, clock: Clock) -> None:
        self.records: dict[str, Pod] = {}
        self._serving = serving
        self._pace = pace
        self._clock = clock
        self._log_seq = 0
        self._machines: set[asyncio.Task[None]] = set()

    def new_id(self) -> str:
        while True:
            pod_id = "".join(secrets.choice(_POD_ID_ALPHABET) for _ in range(14))
            if pod_id not in self.records:
                return pod_id

    def add(self, pod: Pod) -> None:
        """A new pod, PROVISIONING (and moved on unless held)."""
        self.records[pod.id] = pod
        self.log(pod, "system", f"provisioning {pod.gpu_count} x {pod.gpu_id} in {pod.data_center_id}")
        if self._pace.auto_advance:
            self._start_machine(pod, "PROVISIONING")

    async def restart(self, pod: Pod) -> None:
        """Back to STARTING (and on to RUNNING unless held), as a running pod's update does."""
        self._stop_machine(pod)
        await self._set_status(pod, "STARTING")
        if self._pace.auto_advance:
            self._start_machine(pod, "STARTING")

    async def force(self, pod: Pod, status: str, message: str | None = None) -> None:
        """Into `status` now, whatever the machine was doing; `message` goes to its system log."""
        self._stop_machine(pod)
        await self._set_status(pod, status, message)

    async def remove(self, pod: Pod) -> None:
        self._stop_machine(pod)
        self.records.pop(pod.id, None)
        pod.gone = True
        await self._serving.stop(pod)
        self._wake_log_readers(pod)

    async def close(self) -> None:
        """Remove every pod and wait for their machines."""
        for pod in list(self.records.values()):
            await self.remove(pod)
        if self._machines:
            await asyncio.wait(list(self._machines))

    # -- the state machine ---------------------------------------------------------------------

    def _start_machine(self, pod: Pod, from_status: str) -> None:
        task = asyncio.create_task(self._run_machine(pod, from_status), name=f"fake-runpod-{pod.id}")
        pod.machine = task
        self._machines.add(task)
        task.add_done_callback(self._machines.discard)

    async def _run_machine(self, pod: Pod, from_status: str) -> None:
        """PROVISIONING -> STARTING -> RUNNING with the profile's delays (the simulated provider's time),
        then the load time before the pod's ports answer."""
        try:
            if from_status == "PROVISIONING":
                await self._clock.sleep(self._pace.profile.provisioning_seconds)
                await self._set_status(pod, "STARTING")
            await self._clock.sleep(self._pace.profile.starting_seconds)
            load_seconds = self._pace.profile.load_seconds
            await self._set_status(pod, "RUNNING", serve=load_seconds <= 0)
            if load_seconds > 0:
                self.log(pod, "container", f"loading the model (simulated: {load_seconds:g} s)")
                await self._clock.sleep(load_seconds)
                await self._serving.start(pod, lambda line: self.log(pod, "container", line))
                self.log(pod, "container", "server ready")
        except Exception:
            logger.exception("the fake's state machine for pod %s failed", pod.id)
            await self._set_status(pod, "ERROR", "the fake could not start the pod's servers")

    @staticmethod
    def _stop_machine(pod: Pod) -> None:
        if pod.machine is not None and pod.machine is not asyncio.current_task():
            pod.machine.cancel()
        pod.machine = None

    async def _set_status(
        self, pod: Pod, status: str, message: str | None = None, *, serve: bool = True
    ) -> None:
        """Into `status`; RUNNING starts serving the pod's ports unless `serve` is false (still loading)."""
        if status == "RUNNING":
            if serve:
                await self._serving.start(pod, lambda line: self.log(pod, "container", line))
            pod.started_at = datetime.now(UTC)
        else:
            await self._serving.stop(pod)
        pod.status = status
        self.log(pod, "system", message or _STATUS_LINES[status].format(image=pod.image))

    # -- logs ----------------------------------------------------------------------------------

    def log(self, pod: Pod, source: str, line: str) -> None:
        self._log_seq += 1
        pod.logs.append(LogEvent(self._log_seq, datetime.now(UTC), source, line))
        self._wake_log_readers(pod)

    @staticmethod
    def _wake_log_readers(pod: Pod) -> None:
        waiter, pod.log_waiter = pod.log_waiter, asyncio.Event()
        waiter.set()
