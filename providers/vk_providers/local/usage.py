"""CPU and memory of a container, summed over its process group, for `kubectl top` and the stats API.

A real runtime reads a container's cgroup; a local container is a process group instead, so this sums
/proc/<pid>/stat over the group's members. CPU is cumulative (user + system time, including that of
children the members have already waited for, so work done by short-lived helpers is not lost), in
nanoseconds as the kubelet reports it. Memory is the resident set size, which is what VmRSS in
/proc/<pid>/status shows; it stands in for the cgroup working set.
"""

from __future__ import annotations

import dataclasses
import os

from vk_provider.kit import procfs

_CLOCK_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")

# Indices into procfs.stat_fields(), which starts at field 3 of /proc/<pid>/stat (see proc(5)).
_STATE, _PROCESS_GROUP = 0, 2
_CPU_TIME_FIELDS = (11, 12, 13, 14)  # utime, stime, cutime, cstime
_RESIDENT_PAGES = 21


@dataclasses.dataclass(frozen=True, slots=True)
class GroupUsage:
    cpu_nanoseconds: int
    resident_bytes: int


def process_group_usage(group_ids: set[int]) -> dict[int, GroupUsage]:
    """Usage of each of the given process groups that has a live member, in one pass over /proc."""
    cpu_ticks: dict[int, int] = {}
    resident_pages: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = procfs.stat_fields(int(entry.name))
        if fields is None or fields[_STATE] in ("Z", "X"):
            continue
        group = int(fields[_PROCESS_GROUP])
        if group not in group_ids:
            continue
        cpu_ticks[group] = cpu_ticks.get(group, 0) + sum(int(fields[index]) for index in _CPU_TIME_FIELDS)
        resident_pages[group] = resident_pages.get(group, 0) + int(fields[_RESIDENT_PAGES])
    return {
        group: GroupUsage(
            cpu_nanoseconds=ticks * 1_000_000_000 // _CLOCK_TICKS_PER_SECOND,
            resident_bytes=resident_pages[group] * _PAGE_BYTES,
        )
        for group, ticks in cpu_ticks.items()
    }
