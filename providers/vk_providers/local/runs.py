"""One run of one container, seen from the daemon: its monitor process and the files the monitor writes.

A run is numbered by the container's restart count (run 0, then 1, ...). The daemon knows a run only by
its monitor's pid and start time (persisted, so a later daemon can find it again) and by the files in
the container's folder: `<n>.log`, `<n>.status.json`, and `monitor.log` for the monitor's own errors.
Nothing here holds a pipe to the container, so the daemon can stop and start again at any time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vk_provider.kit import procfs
from vk_provider.provider import ContainerTermination
from vk_providers.local.monitor import START_ERROR_EXIT_CODE

logger = logging.getLogger(__name__)

MONITOR_MODULE = "vk_providers.local.monitor"
HANDSHAKE_FD = 3
"""The descriptor the monitor inherits and closes once its container has started (or failed to)."""
HANDSHAKE_TIMEOUT_SECONDS = 30.0
POLL_WITHOUT_PIDFD_SECONDS = 0.2
MONITOR_LOG_TAIL_BYTES = 4096
RUN_MARK = "VK_PROVIDER_LOCAL_RUN"
"""In each monitor's environment, naming its run (`<container folder>/<number>`): a daemon killed between
starting a monitor and recording it leaves the monitor running, and the next daemon finds it by this."""
NO_MONITOR = 0
"""The monitor pid of a run found ended: /proc/0 does not exist, so it is never alive nor signalled."""
LOST_EXIT_CODE = 137
"""What the kubelet reports for a container whose end it could not observe."""


@dataclasses.dataclass(frozen=True, slots=True)
class RunStatus:
    """The monitor's status file: written when the process starts and again when it ends."""

    container_pid: int | None = None
    container_start_ticks: int | None = None
    started_at: datetime | None = None
    exit_code: int | None = None
    finished_at: datetime | None = None
    reason: str | None = None
    message: str | None = None

    @property
    def finished(self) -> bool:
        return self.exit_code is not None

    @property
    def running(self) -> bool:
        return self.container_pid is not None and not self.finished


def read_run_status(path: Path) -> RunStatus | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return RunStatus(
        container_pid=data.get("container_pid"),
        container_start_ticks=data.get("container_start_ticks"),
        started_at=_time_from_nanoseconds(data.get("started_at_ns")),
        exit_code=data.get("exit_code"),
        finished_at=_time_from_nanoseconds(data.get("finished_at_ns")),
        reason=data.get("reason"),
        message=data.get("message"),
    )


def _time_from_nanoseconds(value: int | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value / 1e9, UTC)


class MonitoredRun:
    def __init__(self, directory: Path, number: int, monitor_pid: int, monitor_start_ticks: int) -> None:
        self.directory = directory
        self.number = number
        self.monitor_pid = monitor_pid
        self.monitor_start_ticks = monitor_start_ticks
        self.handshake_done = False
        """True once the monitor has reported the start; only then may it be signalled (before, it may
        not yet have installed its handler, and a signal would kill it without a status file)."""
        self._final_status: RunStatus | None = None

    @property
    def log_path(self) -> Path:
        return self.directory / f"{self.number}.log"

    @property
    def stdin_path(self) -> Path:
        """The FIFO the process reads as stdin, when its container has `stdin: true` (see `monitor`)."""
        return self.directory / f"{self.number}.stdin"

    @property
    def status_path(self) -> Path:
        return self.directory / f"{self.number}.status.json"

    @classmethod
    def spawn(cls, directory: Path, number: int, spec_path: Path) -> tuple[MonitoredRun, int]:
        """Start the monitor; returns the run and the read end of its handshake pipe (for `wait_started`)."""
        read_fd, write_fd = os.pipe()
        try:
            if write_fd == HANDSHAKE_FD:  # dup2 onto itself would keep close-on-exec set
                moved = os.dup(write_fd)
                os.close(write_fd)
                write_fd = moved
            monitor_log = str(directory / "monitor.log")
            pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-P", "-m", MONITOR_MODULE, str(spec_path), str(number), str(HANDSHAKE_FD)],
                {**_monitor_environment(), RUN_MARK: _run_mark(directory, number)},
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, monitor_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
                    (os.POSIX_SPAWN_DUP2, 1, 2),
                    (os.POSIX_SPAWN_DUP2, write_fd, HANDSHAKE_FD),
                ],
                setsid=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        # The monitor is our child until we reap it, so its pid cannot be reused before we read this.
        ticks = procfs.start_ticks_of(pid)
        return cls(directory, number, pid, -1 if ticks is None else ticks), read_fd

    async def wait_started(self, handshake_fd: int) -> None:
        """Wait until the monitor closes the handshake pipe: the container has started, or cannot."""
        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()

        def on_readable() -> None:
            with contextlib.suppress(BlockingIOError):
                if not os.read(handshake_fd, 4096) and not closed.done():
                    closed.set_result(None)

        os.set_blocking(handshake_fd, False)
        loop.add_reader(handshake_fd, on_readable)
        try:
            async with asyncio.timeout(HANDSHAKE_TIMEOUT_SECONDS):
                await closed
        except TimeoutError:
            logger.warning("the monitor of %s did not report a start in time", self.directory)
        finally:
            loop.remove_reader(handshake_fd)
            os.close(handshake_fd)
            self.handshake_done = True

    @classmethod
    def find(cls, directory: Path, number: int) -> MonitoredRun | None:
        """The run an earlier daemon started but did not live to record: its monitor, found by the
        mark in its environment, or the status file it left when it has ended already."""
        for pid in sorted(procfs.processes_with_environment(RUN_MARK, _run_mark(directory, number))):
            ticks = procfs.start_ticks_of(pid)
            if ticks is not None:
                run = cls(directory, number, pid, ticks)
                # Long started: the daemon restarts in far more time than a monitor takes to start.
                run.handshake_done = True
                return run
        status = read_run_status(directory / f"{number}.status.json")
        if status is None or not status.finished:
            return None
        ended = cls(directory, number, NO_MONITOR, -1)
        ended.handshake_done = True
        ended._final_status = status
        return ended

    def status(self) -> RunStatus | None:
        if self._final_status is not None:
            return self._final_status
        status = read_run_status(self.status_path)
        if status is not None and status.finished:
            self._final_status = status
        return status

    def monitor_alive(self) -> bool:
        return procfs.is_alive(self.monitor_pid, self.monitor_start_ticks)

    async def wait_exited(self) -> None:
        """Wait for the monitor to exit: by then the container has ended and its status is written."""
        await _wait_for_exit(self.monitor_pid, self.monitor_start_ticks)
        # Ours to reap when this process started it (perhaps through an earlier provider instance);
        # an adopted monitor belongs to init, and waitpid says so.
        if self.monitor_pid == NO_MONITOR:
            return  # waitpid(0) would reap any child of ours
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.monitor_pid, os.WNOHANG)  # noqa: ASYNC222 -- WNOHANG never blocks

    def terminate(self) -> None:
        """Ask politely: SIGTERM to the monitor, which forwards it to the container's process group."""
        if self.handshake_done and self.monitor_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.monitor_pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the container's process group; the monitor then records the exit and ends."""
        status = self.status()
        if status is None or status.finished:
            return
        pid, ticks = status.container_pid, status.container_start_ticks
        if pid is not None and ticks is not None and procfs.is_alive(pid, ticks):
            procfs.signal_group(pid, signal.SIGKILL)

    def termination(self) -> ContainerTermination:
        """How the run ended; call once the monitor has exited."""
        status = self.status()
        if status is None:  # the monitor died before it could even start the container
            now = datetime.now(UTC)
            message = f"the monitor process failed: {self._monitor_log_tail() or 'no error recorded'}"
            return ContainerTermination(START_ERROR_EXIT_CODE, "StartError", message, now, now)
        if status.exit_code is None:
            return ContainerTermination(
                exit_code=LOST_EXIT_CODE,
                reason="ContainerStatusUnknown",
                message="the monitor ended without recording how the container exited (see monitor.log)",
                started_at=status.started_at,
                finished_at=datetime.now(UTC),
            )
        return ContainerTermination(
            exit_code=status.exit_code,
            reason=status.reason,
            message=status.message,
            started_at=status.started_at,
            finished_at=status.finished_at,
        )

    def _monitor_log_tail(self) -> str:
        try:
            with (self.directory / "monitor.log").open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - MONITOR_LOG_TAIL_BYTES))
                lines = log.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "monitor_pid": self.monitor_pid,
            "monitor_start_ticks": self.monitor_start_ticks,
        }

    @classmethod
    def from_json(cls, directory: Path, data: dict[str, Any]) -> MonitoredRun:
        run = cls(directory, int(data["number"]), int(data["monitor_pid"]), int(data["monitor_start_ticks"]))
        run.handshake_done = True  # a recorded run was started by an earlier daemon long ago
        return run


def _run_mark(directory: Path, number: int) -> str:
    return str(directory / str(number))


def _monitor_environment() -> dict[str, str]:
    """The daemon's environment, with our packages importable even when they are not installed."""
    roots = [_source_root(__name__, __file__), _source_root(procfs.__name__, procfs.__file__)]
    existing = os.environ.get("PYTHONPATH")
    paths = list(dict.fromkeys([*roots, *([existing] if existing else [])]))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _source_root(module: str, file: str) -> str:
    """The import-path folder holding a module's top package (the one holding `vk_provider/` for
    `vk_provider.kit.procfs`), counted from the module's depth, so it holds wherever the module moves."""
    return str(Path(file).resolve().parents[module.count(".")])


async def _wait_for_exit(pid: int, start_ticks: int) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        # Without pidfds (Linux < 5.3) there is nothing to be woken by: poll.
        while procfs.is_alive(pid, start_ticks):  # noqa: ASYNC110
            await asyncio.sleep(POLL_WITHOUT_PIDFD_SECONDS)
        return
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()
    try:
        # Checked after opening: the pidfd now pins whatever process has this pid, so if it is ours
        # now, the descriptor is ours too.
        if not procfs.is_alive(pid, start_ticks):
            return

        def on_exit() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(pidfd, on_exit)
        try:
            await exited
        finally:
            loop.remove_reader(pidfd)
    finally:
        os.close(pidfd)
