"""Shared pieces of the development tools' tests: cluster folders whose components are `sleep`s.

A component is "running" when its record names a live process started as the cluster starts one
(`processes.start`), and "stopped" when its record names a process that is not there, so the
commands' decisions are tested against real processes without a control plane.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from vk_devtools.devcluster import cluster, processes
from vk_devtools.devcluster.processes import ProcessRecord

COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "node/local-gpu",
    "node/burst-gpu",
    "router",
    "controller",
)


def stopped_record(directory: Path, name: str) -> ProcessRecord:
    """A record of `sleep 300` whose process is gone: this test's own pid with a start time it never had."""
    return ProcessRecord(
        name=name,
        pid=os.getpid(),
        start_ticks=-1,
        log=str(directory / "logs" / f"{name.replace('/', '-')}.log"),
        argv=("sleep", "300"),
    )


def write_state(
    directory: Path, records: Sequence[ProcessRecord], *, stopped: bool = False
) -> cluster.ClusterState:
    """A cluster folder as `up` leaves it (marker, state file, a bit of data), with these records."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / cluster.MARKER_FILE).write_text("test\n")
    (directory / "etcd-data").mkdir(exist_ok=True)
    (directory / "etcd-data" / "db").write_text("objects")
    state = cluster.ClusterState(
        directory=directory,
        kubernetes_version="v1.37.2",
        bin_dir=directory / "bin",
        server="https://127.0.0.1:1",
        # Port 1 refuses at once: a health check asked before a component's exit is seen answers "not yet".
        ports={"router": 1, "router-admin": 1, "etcd-client": 1},
        processes=tuple(records),
        stopped=stopped,
    )
    state.save()
    return state


@contextlib.contextmanager
def plane(
    directory: Path, running: Sequence[str], *, stopped: bool = False
) -> Iterator[cluster.ClusterState]:
    """A folder with every name of COMPONENTS recorded: those in `running` are live `sleep`s (stopped on
    exit), the others stopped."""
    records = []
    try:
        for name in COMPONENTS:
            if name in running:
                log = directory / "logs" / f"{name.replace('/', '-')}.log"
                _, record = processes.start(name, ["sleep", "300"], log_path=log)
                records.append(record)
            else:
                records.append(stopped_record(directory, name))
        yield write_state(directory, records, stopped=stopped)
    finally:
        for record in records:
            processes.stop(record, grace_seconds=2)
        for record in _recorded(directory):  # those `restart` started
            processes.stop(record, grace_seconds=2)


def _recorded(directory: Path) -> tuple[ProcessRecord, ...]:
    state = cluster.ClusterState.load(directory)
    return state.processes if state is not None else ()
