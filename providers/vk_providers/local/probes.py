"""Container probes, run as the kubelet runs them, against the pod's own loopback address.

Startup gates the other two: until it succeeds the container is neither started nor ready, and neither
readiness nor liveness runs. Readiness flips `ready` after `success_threshold` successes or
`failure_threshold` failures in a row. Liveness (or startup) failing `failure_threshold` times in a row
has the container killed, to be restarted as its restart policy says. Every probe first runs
`initial_delay_seconds` after the container started, then every `period_seconds` (start to start, like
the kubelet's ticker), each attempt limited to `timeout_seconds`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
from collections.abc import Awaitable, Callable, Mapping

import aiohttp

from vk_provider.kit import procfs
from vk_provider.provider import ContainerSpec, ExecAction, HttpGetAction, Probe, TcpSocketAction
from vk_providers.local.mounts import joining_mounts_of

EXEC_OUTPUT_IN_MESSAGE_BYTES = 1024
USER_AGENT = "kube-probe/vk-provider-local"

HttpSessionFactory = Callable[[], aiohttp.ClientSession]


@dataclasses.dataclass(frozen=True, slots=True)
class ProbeTarget:
    """Where and how a container's probes run."""

    pod_ip: str
    env: Mapping[str, str]
    working_dir: str | None
    mounted_process: Callable[[], int | None] | None = None
    """With mounted volumes: the container's process now (None between runs), whose mount namespace an
    exec probe joins, so that it sees the files the container sees."""


@dataclasses.dataclass(frozen=True, slots=True)
class ProbeResult:
    success: bool
    detail: str


@dataclasses.dataclass(frozen=True, slots=True)
class ProbeListener:
    """What the probes act on: the container's started and ready flags, and the run itself."""

    set_started: Callable[[bool], None]
    set_ready: Callable[[bool], None]
    kill: Callable[[str], Awaitable[None]]
    """Stop the run because a probe failed; the argument says which probe and why."""


def flags_at_start(spec: ContainerSpec) -> tuple[bool, bool]:
    """`started` and `ready` of a run that has just started, before any probe has run.

    As the kubelet computes them: without a startup probe the container is started as soon as it runs,
    and without a readiness probe too it is ready as soon as it runs, in the same status that first shows
    it running. (`run_probes` only confirms these.)
    """
    started = spec.startup_probe is None
    return started, started and spec.readiness_probe is None


async def run_probes(
    spec: ContainerSpec,
    target: ProbeTarget,
    http: HttpSessionFactory,
    listener: ProbeListener,
    *,
    resumed: tuple[bool, bool] | None = None,
) -> None:
    """Probe one run of a container; the caller cancels this when the run ends.

    `resumed`: the `started` and `ready` an adopted run had under the previous daemon; a started run
    is not startup-probed again, and a ready one stays ready until its readiness probe fails
    `failureThreshold` times in a row.
    """
    container_started_at = asyncio.get_running_loop().time()
    was_started, was_ready = resumed or (False, False)
    if spec.startup_probe is not None and not was_started:
        startup = _ProbeSchedule(spec.startup_probe, target, http, container_started_at)
        while True:
            result = await startup.next()
            if startup.successes >= spec.startup_probe.success_threshold:
                break
            if startup.failures >= spec.startup_probe.failure_threshold:
                await listener.kill(f"startup probe failed: {result.detail}")
                return
    listener.set_started(True)
    if spec.readiness_probe is None:
        listener.set_ready(True)
    async with asyncio.TaskGroup() as group:
        if spec.readiness_probe is not None:
            readiness = _ProbeSchedule(spec.readiness_probe, target, http, container_started_at)
            group.create_task(_track_readiness(readiness, listener, ready=was_started and was_ready))
        if spec.liveness_probe is not None:
            liveness = _ProbeSchedule(spec.liveness_probe, target, http, container_started_at)
            group.create_task(_watch_liveness(liveness, listener))


async def _track_readiness(schedule: _ProbeSchedule, listener: ProbeListener, *, ready: bool = False) -> None:
    while True:
        await schedule.next()
        if not ready and schedule.successes >= schedule.probe.success_threshold:
            ready = True
            listener.set_ready(True)
        elif ready and schedule.failures >= schedule.probe.failure_threshold:
            ready = False
            listener.set_ready(False)


async def _watch_liveness(schedule: _ProbeSchedule, listener: ProbeListener) -> None:
    while True:
        result = await schedule.next()
        if schedule.failures >= schedule.probe.failure_threshold:
            await listener.kill(f"liveness probe failed: {result.detail}")
            return


class _ProbeSchedule:
    """One probe's timing and its streaks of consecutive successes and failures."""

    def __init__(
        self, probe: Probe, target: ProbeTarget, http: HttpSessionFactory, container_started_at: float
    ) -> None:
        self.probe = probe
        self.successes = 0
        self.failures = 0
        self._target = target
        self._http = http
        self._next_at = container_started_at + probe.initial_delay_seconds

    async def next(self) -> ProbeResult:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self._next_at - loop.time()))
        # A tick missed because an attempt ran long is dropped, not made up for.
        self._next_at = max(self._next_at + self.probe.period_seconds, loop.time())
        result = await check(self.probe, self._target, self._http)
        if result.success:
            self.successes, self.failures = self.successes + 1, 0
        else:
            self.successes, self.failures = 0, self.failures + 1
        return result


async def check(probe: Probe, target: ProbeTarget, http: HttpSessionFactory) -> ProbeResult:
    """One attempt of one probe."""
    action = probe.action
    if isinstance(action, ExecAction):
        return await _exec(action, target, probe.timeout_seconds)
    try:
        async with asyncio.timeout(probe.timeout_seconds):
            if isinstance(action, HttpGetAction):
                return await _http_get(action, target, http())
            return await _tcp_connect(action, target)
    except TimeoutError:
        return ProbeResult(False, f"timed out after {probe.timeout_seconds:g}s")


async def _http_get(
    action: HttpGetAction, target: ProbeTarget, session: aiohttp.ClientSession
) -> ProbeResult:
    host = action.host or target.pod_ip
    if ":" in host:
        host = f"[{host}]"
    path = action.path if action.path.startswith("/") else f"/{action.path}"
    url = f"{action.scheme.lower()}://{host}:{action.port}{path}"
    headers = {"User-Agent": USER_AGENT, "Accept": "*/*", **dict(action.headers)}
    try:
        # Like the kubelet: certificates are not verified, and a redirect is an answer in itself.
        async with session.get(url, headers=headers, allow_redirects=False, ssl=False) as response:
            status = response.status
    except (aiohttp.ClientError, OSError) as error:
        return ProbeResult(False, f"GET {url}: {error or type(error).__name__}")
    return ProbeResult(200 <= status < 400, f"GET {url}: HTTP {status}")


async def _tcp_connect(action: TcpSocketAction, target: ProbeTarget) -> ProbeResult:
    host = action.host or target.pod_ip
    try:
        _, writer = await asyncio.open_connection(host, action.port)
    except OSError as error:
        return ProbeResult(False, f"connect {host}:{action.port}: {error.strerror or error}")
    writer.close()
    with contextlib.suppress(OSError):  # the connection was made, which is all a TCP probe asks
        await writer.wait_closed()
    return ProbeResult(True, f"connected to {host}:{action.port}")


async def _exec(action: ExecAction, target: ProbeTarget, timeout_seconds: float) -> ProbeResult:
    try:
        with contextlib.ExitStack() as stack:
            pid = target.mounted_process() if target.mounted_process is not None else None
            enter = stack.enter_context(joining_mounts_of(pid)) if pid is not None else None
            process = await asyncio.create_subprocess_exec(
                *action.command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=dict(target.env),
                cwd=target.working_dir,
                start_new_session=True,  # so a timeout can end everything the command started
                preexec_fn=enter,
            )
    except (OSError, ValueError) as error:
        return ProbeResult(False, f"exec {list(action.command)}: {error}")
    try:
        async with asyncio.timeout(timeout_seconds):
            output, _ = await process.communicate()
    except TimeoutError:
        return ProbeResult(False, f"exec {list(action.command)}: timed out after {timeout_seconds:g}s")
    finally:
        if process.returncode is None:
            procfs.signal_group(process.pid, signal.SIGKILL)
            await process.wait()
    text = output[:EXEC_OUTPUT_IN_MESSAGE_BYTES].decode(errors="replace").strip()
    detail = f"exec {list(action.command)}: exit code {process.returncode}" + (f": {text}" if text else "")
    return ProbeResult(process.returncode == 0, detail)
