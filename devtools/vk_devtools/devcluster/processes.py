"""Start, watch and stop the control plane's processes.

Every component runs in its own session (so its own process group): stopping one sends the signal to
the whole group and nothing it spawned is left behind. A process is identified by its pid *and* its
start time from /proc, so a recycled pid is never mistaken for one of ours and never signalled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vk_provider.kit import procfs

STOP_GRACE_SECONDS = 10.0
KILL_WAIT_SECONDS = 5.0
POLL_INTERVAL_SECONDS = 0.2

# The components outlive the call that started them. Their Popen objects are kept here so that the
# exit status of a stopped child can be collected (no zombies) and so that dropping the handle does
# not count as forgetting a running process.
_children: dict[int, subprocess.Popen[bytes]] = {}


class ComponentFailedError(Exception):
    """A component exited or never became healthy; the message names it and ends with its log."""

    def __init__(self, component: str, reason: str, log_path: Path) -> None:
        self.component = component
        self.log_path = log_path
        super().__init__(f"{component} {reason}. The end of its log ({log_path}):\n{tail_of_file(log_path)}")


@dataclasses.dataclass(frozen=True, slots=True)
class ProcessRecord:
    """What is needed to find a started process again from another command (`dev down`), and to start
    it again the same way (`dev restart`)."""

    name: str
    pid: int
    start_ticks: int
    """Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot."""
    log: str
    argv: tuple[str, ...] = ()
    """The command line it was started with; empty in state files written before `dev restart` existed."""
    env: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)
    """What it was given on top of the starting command's environment (only that: the rest of the
    environment, secrets included, is never written to the state file)."""

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "argv": list(self.argv), "env": dict(self.env)}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ProcessRecord:
        return cls(
            name=str(raw["name"]),
            pid=int(raw["pid"]),
            start_ticks=int(raw["start_ticks"]),
            log=str(raw["log"]),
            argv=tuple(str(part) for part in raw.get("argv", ())),
            env={str(key): str(value) for key, value in dict(raw.get("env", {})).items()},
        )


def tail_of_file(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log was written)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(the log is empty)"


def is_running(record: ProcessRecord) -> bool:
    """True while the recorded process exists, is not a zombie, and is the same process as recorded."""
    return procfs.is_alive(record.pid, record.start_ticks)


def start(
    name: str, argv: Sequence[str], *, log_path: Path, env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], ProcessRecord]:
    """Start `argv` in a session of its own, appending its output to `log_path`; `env` is added to this
    process's environment. The record keeps both, so `restart` can start it again the same way."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    extra = dict(env or {})
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **extra} if extra else None,
        )
    _children[process.pid] = process
    ticks = procfs.start_ticks_of(process.pid)
    if ticks is None:  # it died before we could look; keep a record that can never match
        ticks = -1
    record = ProcessRecord(
        name=name, pid=process.pid, start_ticks=ticks, log=str(log_path), argv=tuple(argv), env=extra
    )
    return process, record


def restart(record: ProcessRecord) -> tuple[subprocess.Popen[bytes], ProcessRecord]:
    """Stop the recorded process if it still runs, then start its recorded command again, appending to
    the same log (after a line saying so, so the log reads in order)."""
    if not record.argv:
        raise ValueError(f"{record.name} was started without its command line being recorded")
    stop(record)
    log_path = Path(record.log)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a") as log:
        log.write(
            f"\n--- restarted by `vk-provider dev restart` at {time.strftime('%Y-%m-%dT%H:%M:%S%z')} ---\n"
        )
    return start(record.name, record.argv, log_path=log_path, env=record.env)


def wait_until(
    name: str,
    check: Callable[[], bool],
    *,
    process: subprocess.Popen[bytes],
    log_path: Path,
    timeout_seconds: float,
) -> None:
    """Poll `check` until it is true; fail fast, naming the component, if the process exits."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        code = process.poll()
        if code is not None:
            raise ComponentFailedError(name, f"exited with code {code} while starting", log_path)
        if check():
            return
        if time.monotonic() > deadline:
            raise ComponentFailedError(
                name, f"did not become healthy within {timeout_seconds:.0f} seconds", log_path
            )
        time.sleep(POLL_INTERVAL_SECONDS)


def stop(record: ProcessRecord, *, grace_seconds: float = STOP_GRACE_SECONDS) -> bool:
    """SIGTERM the process group, SIGKILL it after the grace period. False if it was not running."""
    if not is_running(record):
        return False
    procfs.signal_group(record.pid, signal.SIGTERM)
    if not _wait_gone(record, grace_seconds):
        procfs.signal_group(record.pid, signal.SIGKILL)
        _wait_gone(record, KILL_WAIT_SECONDS)
    # Children of the group may outlive the leader by a moment; the group id is the leader's pid.
    # A killed process takes a moment to exit: wait for that, so "stopped" means gone.
    procfs.signal_group(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while procfs.live_members_of_group(record.pid) and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL_SECONDS / 4)
    return True


def _wait_gone(record: ProcessRecord, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        _reap(record.pid)
        if not is_running(record):
            _reap(record.pid, block_seconds=KILL_WAIT_SECONDS)
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_INTERVAL_SECONDS / 4)


def _reap(pid: int, *, block_seconds: float = 0.0) -> None:
    """Collect the exit status when the process is our own child, so it does not stay a zombie.

    A zombie shows in /proc a moment before its status can be collected, so a caller that saw it die
    may wait a little for that.
    """
    child = _children.get(pid)
    if child is None:
        return
    try:
        child.wait(timeout=block_seconds) if block_seconds else child.poll()
    except subprocess.TimeoutExpired:
        return
    if child.returncode is not None:
        del _children[pid]


def stop_marked(key: str, value: str, *, grace_seconds: float = STOP_GRACE_SECONDS) -> int:
    """Stop processes that carry key=value in their environment, and the process groups they started.

    The development cluster marks its node daemons this way; the `local` provider's per-container
    monitors inherit the mark, so `dev down` can end the workloads that outlive their daemon on purpose.
    Returns how many marked processes there were.
    """
    marked = procfs.processes_with_environment(key, value)
    groups = {os.getpgid(child) for pid in marked for child in procfs.children_of(pid) if _exists(child)}
    for pid in marked:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while any(_exists(pid) for pid in marked) and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL_SECONDS)
    for pid in marked:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for group in groups:
        procfs.signal_group(group, signal.SIGKILL)
    return len(marked)


def _exists(pid: int) -> bool:
    fields = procfs.stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")
