"""Helpers for the local provider's tests: building pods, waiting on conditions, and cleaning up.

Tests start real processes, so every provider is made through `local_provider`, which kills whatever its
state folder records as running when the test ends (pass or fail) and reaps the monitors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar

from vk_provider.errors import NotFoundError
from vk_provider.kit import procfs
from vk_provider.provider import (
    ContainerPort,
    ContainerSpec,
    ContainerState,
    ContainerStateKind,
    LogOptions,
    PodRef,
    PodRequest,
    PodState,
    Probe,
    ProviderContext,
)
from vk_providers.local import create_provider
from vk_providers.local.provider import LocalProvider

PYTHON = sys.executable
TEST_ADDRESS_RANGE = "127.77.0.0/16"
"""Not the default range, so the tests never meet a development daemon running on the same host."""
FAST_RESTARTS = {"restart_backoff_initial_seconds": 0.05, "restart_backoff_max_seconds": 0.2}
POLL_SECONDS = 0.02
T = TypeVar("T")


def make_provider(state_dir: Path, **config: Any) -> LocalProvider:
    settings = {"address_range": TEST_ADDRESS_RANGE, **FAST_RESTARTS, **config}
    return create_provider(
        ProviderContext(node_name="local-test", config=settings, host_ip="127.0.0.1", state_dir=state_dir)
    )


@contextlib.asynccontextmanager
async def local_provider(state_dir: Path, **config: Any) -> AsyncIterator[LocalProvider]:
    provider = make_provider(state_dir, **config)
    try:
        yield provider
    finally:
        await provider.aclose()
        await kill_processes_under(state_dir)


async def kill_processes_under(state_dir: Path) -> None:
    """SIGKILL every container and monitor the state folder knows of, and wait until they are gone."""
    processes = recorded_processes(state_dir)
    for pid, ticks in processes:
        if procfs.is_alive(pid, ticks):
            procfs.signal_group(pid, signal.SIGKILL)  # containers and monitors both lead their groups
    await wait_until(lambda: not any(procfs.is_alive(pid, ticks) for pid, ticks in processes))
    reap(pid for pid, _ in processes)


def recorded_processes(state_dir: Path) -> set[tuple[int, int]]:
    """(pid, start ticks) of every container and monitor in the state folder's status files and records."""
    processes: set[tuple[int, int]] = set()
    for status_path in state_dir.glob("pods/*/*/*.status.json"):
        status = json.loads(status_path.read_text())
        if status.get("container_pid") is not None and status.get("container_start_ticks") is not None:
            processes.add((status["container_pid"], status["container_start_ticks"]))
        processes.add((status["monitor_pid"], status["monitor_start_ticks"]))
    for record_path in state_dir.glob("pods/*/pod.json"):
        record = json.loads(record_path.read_text())
        for container in [*record["init_containers"], *record["containers"]]:
            if container["run"] is not None:
                processes.add((container["run"]["monitor_pid"], container["run"]["monitor_start_ticks"]))
    return processes


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those that are our children (monitors), so no zombie is left."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


async def wait_until(condition: Callable[[], bool], *, timeout_seconds: float = 30.0, what: str = "") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_seconds}s waiting for {what or condition}")
        await asyncio.sleep(POLL_SECONDS)


async def wait_for_pod(
    provider: LocalProvider,
    ref: PodRef,
    predicate: Callable[[PodState], bool],
    *,
    timeout_seconds: float = 30.0,
) -> PodState:
    """Poll the pod's state until the predicate holds; on timeout, fail showing the last state."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    while True:
        state = await provider.get_pod_state(ref)
        if state is not None and predicate(state):
            return state
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_seconds}s; the pod's last state: {state}")
        await asyncio.sleep(POLL_SECONDS)


async def eventually(check: Callable[[], Awaitable[T | None]], *, timeout_seconds: float = 30.0) -> T:
    """Call `check` until it returns something other than None."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    while True:
        result = await check()
        if result is not None:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_seconds}s waiting for {check}")
        await asyncio.sleep(POLL_SECONDS)


def container_named(state: PodState, name: str) -> ContainerState:
    return next(item for item in (*state.containers, *state.init_containers) if item.name == name)


def is_running(name: str = "main") -> Callable[[PodState], bool]:
    return lambda state: container_named(state, name).state is ContainerStateKind.RUNNING


def is_ready(name: str = "main") -> Callable[[PodState], bool]:
    return lambda state: container_named(state, name).ready


def has_restarted(times: int, name: str = "main") -> Callable[[PodState], bool]:
    return lambda state: container_named(state, name).restart_count >= times


def in_phase(phase: str) -> Callable[[PodState], bool]:
    return lambda state: state.phase == phase


def container(
    *command: str,
    name: str = "main",
    env: dict[str, str] | None = None,
    ports: tuple[int, ...] = (),
    readiness: Probe | None = None,
    liveness: Probe | None = None,
    startup: Probe | None = None,
    working_dir: str | None = None,
) -> ContainerSpec:
    return ContainerSpec(
        name=name,
        image="local",
        command=command,
        env=tuple((env or {}).items()),
        ports=tuple(ContainerPort(container_port=port) for port in ports),
        readiness_probe=readiness,
        liveness_probe=liveness,
        startup_probe=startup,
        working_dir=working_dir,
    )


def shell(script: str, **options: Any) -> ContainerSpec:
    return container("sh", "-c", script, **options)


def pod(
    uid: str,
    *containers: ContainerSpec,
    init: tuple[ContainerSpec, ...] = (),
    restart_policy: Literal["Always", "OnFailure", "Never"] = "Always",
    grace_period_seconds: float = 5.0,
) -> PodRequest:
    return PodRequest(
        ref=PodRef(namespace="default", name=f"pod-{uid}", uid=uid),
        node_name="local-test",
        containers=containers,
        init_containers=init,
        restart_policy=restart_policy,
        termination_grace_period_seconds=grace_period_seconds,
    )


def free_port(ip: str) -> int:
    with socket.socket() as probe:
        probe.bind((ip, 0))
        port: int = probe.getsockname()[1]
        return port


async def read_logs(provider: LocalProvider, ref: PodRef, name: str = "main", **options: Any) -> bytes:
    chunks = []
    async with contextlib.aclosing(provider.stream_logs(ref, name, LogOptions(**options))) as stream:
        async for chunk in stream:
            chunks.append(chunk)
    return b"".join(chunks)


async def logs_contain(provider: LocalProvider, ref: PodRef, expected: bytes, name: str = "main") -> None:
    async def check() -> bool | None:
        try:
            return True if expected in await read_logs(provider, ref, name) else None
        except NotFoundError:  # not started yet
            return None

    await eventually(check)
