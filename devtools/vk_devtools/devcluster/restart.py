"""`vk-provider dev restart COMPONENT`: start one component again, as `up` started it.

The component is stopped first if it still runs (a wedged one is restarted as readily as a dead one),
then started with the command line, environment and log file `up` recorded, and waited for as `up`
waits for it. The state file gets the new process, so `status`, `down` and later restarts find it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from vk_devtools.devcluster import cluster, processes
from vk_devtools.devcluster.processes import ProcessRecord

ALIAS_PREFIXES = ("kube-", cluster.NODE_PREFIX)
"""A component may be named without these: `apiserver` for `kube-apiserver`, `local-gpu` for
`node/local-gpu`."""


class UnknownComponentError(Exception):
    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"no component named {name!r}; the components are: {', '.join(known)}")


class NotRestartableError(Exception):
    """The state file predates `dev restart`: it does not say how the component was started."""


def resolve(state: cluster.ClusterState, name: str) -> str:
    """The recorded component `name` means: its exact name, or that name without an alias prefix."""
    known = state.component_names()
    if name in known:
        return name
    matches = [full for full in known if any(full == prefix + name for prefix in ALIAS_PREFIXES)]
    if len(matches) == 1:
        return matches[0]
    raise UnknownComponentError(name, known)


@dataclasses.dataclass(frozen=True, slots=True)
class Restarted:
    name: str
    was_running: bool
    record: ProcessRecord
    seconds: float
    health_checked: bool
    """False for a component with nothing to ask (the controller): it was started, no more is known."""


def restart(state: cluster.ClusterState, name: str, *, timeout_seconds: float) -> Restarted:
    """Restart the component `name` (already resolved) of `state`'s plane.

    Raises NotRestartableError for a record without a command line, ComponentFailedError when it
    exits or does not become healthy in time (its new process stays recorded, so `down` stops it).
    """
    old = state.record(name)
    if old is None:
        raise UnknownComponentError(name, state.component_names())
    if not old.argv:
        raise NotRestartableError(
            f"the state of {state.directory} was written before `dev restart` existed and does not say "
            f"how {name} was started"
        )
    began = time.monotonic()
    began_at = datetime.now(UTC)
    was_running = processes.is_running(old)
    process, record = processes.restart(old)
    _save_record(state.directory, record)
    healthy = cluster.health_check(state, name, since=began_at)
    if healthy is not None:
        processes.wait_until(
            name, healthy, process=process, log_path=Path(record.log), timeout_seconds=timeout_seconds
        )
    return Restarted(
        name=name,
        was_running=was_running,
        record=record,
        seconds=time.monotonic() - began,
        health_checked=healthy is not None,
    )


def _save_record(directory: Path, record: ProcessRecord) -> None:
    """Replace the component's record in the state file, read afresh under a lock, so two restarts at
    once (of different components) both stay recorded."""
    with _state_lock(directory):
        current = cluster.ClusterState.load(directory)
        if current is None:
            raise RuntimeError(
                f"the state file of {directory} disappeared during the restart of {record.name}"
            )
        current.with_record(record).save()


@contextlib.contextmanager
def _state_lock(directory: Path) -> Iterator[None]:
    with (directory / "state.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
