"""Identify and signal processes through /proc, safely across pid reuse.

A process is named by its pid *and* its start time (field 22 of /proc/<pid>/stat, in clock ticks since
boot): a pid that was recycled for another process has a different start time, so it is never mistaken
for ours and never signalled. Used by the development cluster and by providers that run processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (state first), or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces; split after it.
    return raw[raw.rindex(")") + 2 :].split()


def start_ticks_of(pid: int) -> int | None:
    fields = stat_fields(pid)
    return None if fields is None else int(fields[19])


def is_alive(pid: int, start_ticks: int) -> bool:
    """True while that very process exists and is not a zombie."""
    fields = stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return int(fields[19]) == start_ticks


def signal_group(pgid: int, signum: signal.Signals) -> None:
    """Signal a whole process group; a group that is already gone is not an error."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


def processes_with_environment(key: str, value: str) -> list[int]:
    """Pids of live processes whose environment has key=value (those we may read: our own user's)."""
    wanted = f"{key}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environment = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environment.split(b"\0"):
            found.append(int(entry.name))
    return found


def children_of(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name))
            if fields is not None and int(fields[1]) == pid:
                children.append(int(entry.name))
    return children


def descendants_of(pid: int) -> list[int]:
    """Children, grandchildren... of a process, from /proc/<pid>/task/*/children (a router's workers,
    a daemon's helpers): what a process tree's memory and CPU add up over."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            with contextlib.suppress(OSError, ValueError):
                children = [int(child) for child in (task / "children").read_text().split()]
                found += children
                pending += children
    return found


def live_members_of_group(pgid: int) -> list[int]:
    """Pids of the group's processes that have not exited yet (zombies excluded)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name))
            if fields is not None and int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members
