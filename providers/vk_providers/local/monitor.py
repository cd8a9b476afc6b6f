"""The monitor: a tiny process that owns one run of one container, in the spirit of CRI-O's conmon.

The daemon must be able to die (even `kill -9`) without taking containers, their logs or their exit
codes with it. So the daemon never holds a container's pipes or waits for it itself: it starts this
monitor in a session of its own, and the monitor

- starts the container's process in a process group of its own,
- reads its stdout and stderr and appends them to `<run>.log` in the CRI log format,
- forwards SIGTERM (and SIGINT) to the container's process group,
- when the process exits, ends whatever is left of its process group (as the end of a container's
  first process ends the container), drains the pipes, and writes the exit code atomically to
  `<run>.status.json`.

The status file is also written once as soon as the process has started (pids and start time), and the
monitor then closes the handshake descriptor it was given, which tells the daemon the start is over.

Usage: python -P -m vk_providers.local.monitor <spec.json> <run number> [<handshake fd>]

where spec.json holds {"argv": [...], "env": {...}, "working_dir": "...", "stdin": false}. With "stdin"
true (the container's `stdin: true`), the process reads a FIFO, `<run>.stdin`, that `kubectl attach`
writes to; the process holds it open for reading and writing, so its stdin never ends (as a container's
does not while `stdinOnce` is false). It imports only the standard
library and two tiny modules of ours, because it starts for every container start and restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

from vk_provider.kit import procfs
from vk_providers.local.crilog import STDERR, STDOUT, encode_records, format_timestamp
from vk_providers.local.mounts import MountError, enter_private_mounts

READ_CHUNK_BYTES = 64 * 1024
DRAIN_AFTER_EXIT_SECONDS = 2.0
"""How long to keep reading after the process exited, for output still in flight; a process that left
the group but holds the pipe open must not keep the monitor (and the exit code) waiting forever."""
POLL_WITHOUT_PIDFD_MILLISECONDS = 100
START_ERROR_EXIT_CODE = 128
"""What container runtimes report when the process could not be started at all."""
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Monitor:
    def __init__(self, spec: dict[str, Any], directory: str, run: int) -> None:
        self.spec = spec
        self.status_path = os.path.join(directory, f"{run}.status.json")
        self.stdin_path = os.path.join(directory, f"{run}.stdin")
        self.log_fd = os.open(
            os.path.join(directory, f"{run}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
        )
        self.container_pid: int | None = None
        """Set while the container's group leader is unreaped, so its pid is a safe group id to signal."""
        self.pending_signals: list[int] = []
        self.terminated = False
        """SIGTERM was forwarded already: a kubelet sends it once per container; a second request to
        stop (a later, shorter grace period) only brings the SIGKILL forward, which is the provider's."""
        self.log_write_failed = False
        self.status: dict[str, Any] = {
            "run": run,
            "monitor_pid": os.getpid(),
            "monitor_start_ticks": procfs.start_ticks_of(os.getpid()),
        }

    def forward_signal(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGTERM:
            if self.terminated:
                return
            self.terminated = True
        if self.container_pid is None:
            # Not started yet (or already gone): remembered, and delivered as soon as it has started.
            self.pending_signals.append(signum)
            return
        procfs.signal_group(self.container_pid, signal.Signals(signum))

    def run(self, handshake_fd: int | None) -> None:
        argv = list(self.spec["argv"])
        working_dir = self.spec.get("working_dir")
        stdin: int = subprocess.DEVNULL
        try:
            if self.spec.get("mounts") or self.spec.get("host_name"):
                # The container inherits the namespaces.
                enter_private_mounts(self.spec["mounts"], host_name=self.spec.get("host_name"))
            if self.spec.get("stdin"):
                with contextlib.suppress(FileExistsError):
                    os.mkfifo(self.stdin_path, 0o600)
                stdin = os.open(self.stdin_path, os.O_RDWR)
            process = subprocess.Popen(
                argv,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.spec["env"],
                cwd=working_dir,
                process_group=0,
            )
        except (OSError, ValueError, subprocess.SubprocessError) as error:
            now = time.time_ns()
            self.write_status(
                started_at_ns=now,
                finished_at_ns=now,
                exit_code=START_ERROR_EXIT_CODE,
                reason="StartError",
                message=describe_start_error(error, argv, working_dir),
            )
            close_handshake(handshake_fd)
            return
        finally:
            if stdin != subprocess.DEVNULL:
                os.close(stdin)  # the process has its own copy
        self.container_pid = process.pid
        self.write_status(
            container_pid=process.pid,
            container_start_ticks=procfs.start_ticks_of(process.pid),
            started_at_ns=time.time_ns(),
        )
        close_handshake(handshake_fd)
        for signum in self.pending_signals:
            procfs.signal_group(process.pid, signal.Signals(signum))
        stdout, stderr = process.stdout, process.stderr
        if stdout is None or stderr is None:
            raise RuntimeError("the container's pipes were not created")
        exit_code = self.pump(process.pid, {stdout.fileno(): STDOUT, stderr.fileno(): STDERR})
        process.returncode = exit_code  # reaped by hand; keeps Popen from trying again
        stdout.close()
        stderr.close()
        self.write_status(
            finished_at_ns=time.time_ns(),
            exit_code=exit_code,
            reason="Completed" if exit_code == 0 else "Error",
        )

    def pump(self, pid: int, streams: dict[int, bytes]) -> int:
        """Copy output into the log until the process has exited and its pipes are drained."""
        poller = select.poll()
        for fd in streams:
            poller.register(fd, select.POLLIN)
        pidfd = open_pidfd(pid)
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        exit_code: int | None = None
        drain_deadline = 0.0
        while True:
            if exit_code is None:
                timeout_ms: float | None = None if pidfd is not None else POLL_WITHOUT_PIDFD_MILLISECONDS
            else:
                remaining_seconds = drain_deadline - time.monotonic()
                if not streams or remaining_seconds <= 0:
                    return exit_code
                timeout_ms = remaining_seconds * 1000
            for fd, _event in poller.poll(timeout_ms):
                if fd in streams:  # else the pidfd: handled below
                    self.copy_output(fd, streams, poller)
            if exit_code is None:
                exit_code = self.reap_if_exited(pid)
                if exit_code is not None:
                    drain_deadline = time.monotonic() + DRAIN_AFTER_EXIT_SECONDS
                    if pidfd is not None:
                        poller.unregister(pidfd)
                        os.close(pidfd)

    def copy_output(self, fd: int, streams: dict[int, bytes], poller: select.poll) -> None:
        data = os.read(fd, READ_CHUNK_BYTES)
        if data:
            self.write_log(encode_records(streams[fd], data, format_timestamp(time.time_ns())))
        else:
            poller.unregister(fd)
            del streams[fd]

    def reap_if_exited(self, pid: int) -> int | None:
        # WNOWAIT leaves the leader a zombie for a moment: while it exists its pid cannot be reused, so
        # killing the rest of its group cannot hit a stranger.
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return None
        procfs.signal_group(pid, signal.SIGKILL)
        self.container_pid = None
        _, wait_status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(wait_status)
        return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as shells and runtimes say

    def write_log(self, records: bytes) -> None:
        try:
            view = memoryview(records)
            while view:
                written = os.write(self.log_fd, view)
                view = view[written:]
        except OSError as error:
            # Keep draining the pipes even when the log cannot be written (disk full): a container
            # blocked on a full pipe would be worse than a gap in its log.
            if not self.log_write_failed:
                self.log_write_failed = True
                print(f"monitor: cannot write the container log: {error}", file=sys.stderr, flush=True)

    def write_status(self, **fields: Any) -> None:
        self.status.update(fields)
        temporary = f"{self.status_path}.tmp"
        with open(temporary, "w") as file:
            json.dump(self.status, file)
        os.replace(temporary, self.status_path)


def describe_start_error(error: BaseException, argv: list[str], working_dir: str | None) -> str:
    if isinstance(error, MountError):
        return f"failed to mount the container's volumes: {error.strerror}"
    if isinstance(error, OSError):
        if working_dir is not None and error.filename == working_dir:
            what = f"working directory {working_dir!r}"
        else:
            what = f"executable {argv[0]!r}"
        return f"failed to start the container process: {what}: {error.strerror or error}"
    return f"failed to start the container process: {error}"


def open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None  # an old kernel: fall back to polling


def close_handshake(handshake_fd: int | None) -> None:
    if handshake_fd is not None:
        with contextlib.suppress(OSError):
            os.close(handshake_fd)


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    spec_path = argv[1]
    with open(spec_path, "rb") as file:
        spec = json.load(file)
    monitor = Monitor(spec, os.path.dirname(os.path.abspath(spec_path)), int(argv[2]))
    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, monitor.forward_signal)
    monitor.run(int(argv[3]) if len(argv) == 4 else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
