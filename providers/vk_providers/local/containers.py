"""One container of a pod: its state as the node sees it, and the loop that runs it and restarts it.

The loop starts a run (a monitor and the container's process), follows it with probes until it exits,
then applies the pod's restart policy with the kubelet's crash-loop back-off: the first restart is
immediate, the next ones wait `restart_backoff_initial_seconds`, doubling up to
`restart_backoff_max_seconds`, counted from when the run ended; a run that lasted longer than twice the
maximum resets the back-off. Init containers are restarted only after a failure (as Kubernetes treats
`Always` for them).

Everything needed to carry on after a daemon restart is in `to_record`: the loop can resume from a
recorded run, still running or already ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from vk_provider.provider import (
    ContainerSpec,
    ContainerState,
    ContainerStateKind,
    ContainerTermination,
    PodRef,
    RestartPolicy,
)
from vk_providers.local.config import LocalSettings
from vk_providers.local.monitor import START_ERROR_EXIT_CODE
from vk_providers.local.probes import ProbeListener, ProbeTarget, flags_at_start, run_probes
from vk_providers.local.records import (
    Json,
    termination_from_json,
    termination_to_json,
    write_json_atomically,
)
from vk_providers.local.runs import LOST_EXIT_CODE, MonitoredRun, RunStatus

logger = logging.getLogger(__name__)

NOT_STARTED = ContainerTermination(
    exit_code=LOST_EXIT_CODE,
    reason="PodDeleted",
    message="the pod was deleted before this container started",
)


class PodContext(Protocol):
    """What a container needs from its pod."""

    @property
    def ref(self) -> PodRef: ...
    @property
    def pod_ip(self) -> str: ...
    @property
    def restart_policy(self) -> RestartPolicy: ...
    @property
    def grace_period_seconds(self) -> float: ...
    @property
    def deleting(self) -> asyncio.Event: ...
    @property
    def settings(self) -> LocalSettings: ...

    def changed(self) -> None:
        """The pod's state changed: push it."""

    def persist(self) -> None:
        """Save the pod's record (runs, restart counts, terminations)."""

    def http_session(self) -> aiohttp.ClientSession: ...

    def stop_if_deleting(self, run: MonitoredRun) -> None:
        """Stop a run that started while the pod was being deleted."""


@dataclasses.dataclass(frozen=True, slots=True)
class Launch:
    """How to start the container's process."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    working_dir: str
    stdin: bool = False
    """The container asked for a stdin (`stdin: true`): `kubectl attach -i` can write to it."""
    mounts: tuple[Mapping[str, Any], ...] = ()
    """Its volumes (`source`, `target`, `read_only`), bound in a mount namespace of its own (`mounts`)."""
    host_name: str | None = None
    """Its host name, in a UTS namespace of its own; None: the host's."""

    @property
    def has_namespaces(self) -> bool:
        """Whether it runs in namespaces of its own, which an exec or an exec probe must join."""
        return bool(self.mounts) or self.host_name is not None


def container_environment(
    spec: ContainerSpec, *, pod_ip: str, pod_name: str, inherited: Mapping[str, str]
) -> dict[str, str]:
    """The process environment: a few host variables, HOSTNAME, the pod's own env, and POD_IP.

    The pod's env is already resolved by the node; a later duplicate name wins, as in Kubernetes. POD_IP
    is added unless the pod sets it itself (it usually does, through the downward API).
    """
    env = {**inherited, "HOSTNAME": pod_name}
    env.update(spec.env)
    if not any(name == "POD_IP" for name, _ in spec.env):
        env["POD_IP"] = pod_ip
    return env


def restart_allowed(policy: RestartPolicy, exit_code: int, *, is_init: bool) -> bool:
    if policy == "Never":
        return False
    if policy == "OnFailure" or is_init:
        return exit_code != 0
    return True


class ContainerRuntime:
    def __init__(
        self,
        spec: ContainerSpec,
        launch: Launch,
        directory: Path,
        *,
        pod_uid: str,
        is_init: bool,
        waiting_reason: str,
    ) -> None:
        self.spec = spec
        self.launch = launch
        self.directory = directory
        self.is_init = is_init
        self._pod_uid = pod_uid
        self.restart_count = 0
        self.crash_streak = 0
        """Restarts in a row that came without a long run in between; sets the next back-off."""
        self.run: MonitoredRun | None = None
        """The current run, or the last one."""
        self.launching: int | None = None
        """The number of the run being started, recorded before its monitor exists (see `restore`)."""
        self.finished = False
        """Terminated for good: it will not run again."""
        self.kind = ContainerStateKind.WAITING
        self.reason: str | None = waiting_reason
        self.message: str | None = None
        self.started_at: datetime | None = None
        self.termination: ContainerTermination | None = None
        self.last_termination: ContainerTermination | None = None
        self.ready = False
        self.started = False
        self._resumed_flags: tuple[bool, bool] | None = None
        """`started` and `ready` of the run a previous daemon recorded, for adopting it."""
        self._next_crash_streak = 0
        self._kill_detail: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def succeeded(self) -> bool:
        return self.finished and self.termination is not None and self.termination.exit_code == 0

    @property
    def has_run(self) -> bool:
        """Has ended at least once (and so counts towards a Running pod while it waits to restart)."""
        return self.termination is not None or self.last_termination is not None

    def running_status(self) -> RunStatus | None:
        """The current run's status while its process runs."""
        if self.kind is not ContainerStateKind.RUNNING or self.run is None:
            return None
        status = self.run.status()
        return status if status is not None and status.running else None

    def snapshot(self) -> ContainerState:
        return ContainerState(
            name=self.spec.name,
            image=self.spec.image,
            state=self.kind,
            ready=self.ready,
            started=self.started,
            restart_count=self.restart_count,
            reason=self.reason,
            message=self.message,
            started_at=self.started_at if self.kind is ContainerStateKind.RUNNING else None,
            termination=self.termination if self.kind is ContainerStateKind.TERMINATED else None,
            last_termination=self.last_termination,
            container_id="" if self.run is None else f"local://{self._pod_uid}/{self.name}/{self.run.number}",
        )

    def leave_pod_initializing(self) -> None:
        if self.kind is ContainerStateKind.WAITING and self.reason == "PodInitializing":
            self.reason = "ContainerCreating"

    async def supervise(self, pod: PodContext) -> None:
        """Run the container until it is finished for good, or the pod is deleted and it has stopped."""
        try:
            await self._supervise(pod)
        except Exception:
            logger.exception("pod %s: container %s: supervision failed", pod.ref, self.name)
            self._finish(
                ContainerTermination(
                    exit_code=LOST_EXIT_CODE,
                    reason="ContainerStatusUnknown",
                    message="the local provider lost track of this container (see the daemon's log)",
                    finished_at=datetime.now(UTC),
                ),
                pod,
            )

    async def _supervise(self, pod: PodContext) -> None:
        adopted = self.run if not self.finished else None
        while True:
            termination = await (
                self._follow(adopted, pod, resumed=self._resumed_flags)
                if adopted
                else self._start_and_follow(pod)
            )
            adopted = None
            if termination is None:  # deleted before it could start again
                self._finish(self.last_termination or NOT_STARTED, pod)
                return
            if pod.deleting.is_set() or not restart_allowed(
                pod.restart_policy, termination.exit_code, is_init=self.is_init
            ):
                self._finish(termination, pod)
                return
            await self._back_off(termination, pod)
            if pod.deleting.is_set():
                self._finish(termination, pod)
                return

    async def _start_and_follow(self, pod: PodContext) -> ContainerTermination | None:
        if pod.deleting.is_set():
            return None
        number = 0 if self.run is None else self.run.number + 1
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        spec_path = self.directory / "spec.json"
        launch = self.launch
        write_json_atomically(
            spec_path,
            {
                "argv": list(launch.argv),
                "env": dict(launch.env),
                "working_dir": launch.working_dir,
                "stdin": launch.stdin,
                "mounts": list(launch.mounts),
                "host_name": launch.host_name,
            },
        )
        # Created here rather than by the monitor, so the log can be read as soon as the run exists.
        (self.directory / f"{number}.log").touch(mode=0o600)
        self._set_state(ContainerStateKind.WAITING, "ContainerCreating", None)
        pod.changed()
        self.launching = number
        pod.persist()  # before the monitor exists: if we die once it does, the next daemon looks for it
        try:
            run, handshake = MonitoredRun.spawn(self.directory, number, spec_path)
        except OSError as error:
            self.launching = None
            logger.warning("pod %s: container %s: cannot start a monitor: %s", pod.ref, self.name, error)
            now = datetime.now(UTC)
            message = f"cannot start the monitor process: {error}"
            return ContainerTermination(START_ERROR_EXIT_CODE, "StartError", message, now, now)
        self.run, self.launching = run, None
        self.restart_count = number
        self.crash_streak = self._next_crash_streak
        pod.persist()
        await run.wait_started(handshake)
        pod.stop_if_deleting(run)
        return await self._follow(run, pod)

    async def _follow(
        self, run: MonitoredRun, pod: PodContext, *, resumed: tuple[bool, bool] | None = None
    ) -> ContainerTermination:
        """Watch a run (probing it) until its monitor exits; then it is TERMINATED.

        `resumed`: the `started` and `ready` a previous daemon recorded for this run, which an adopted
        run keeps until its probes say otherwise: otherwise every daemon restart would show its ready
        containers not ready for a moment, and the router would drop them (kubernetes#100277).
        """
        status = run.status()
        probing: asyncio.Task[None] | None = None
        if status is not None and status.running:
            self._set_state(ContainerStateKind.RUNNING, None, None)
            self.started_at = status.started_at
            if not self.is_init:
                # Set with the state, not by the probing task's first step: a status read (or pushed)
                # in between would show the container running, yet neither started nor ready.
                self.started, self.ready = resumed or flags_at_start(self.spec)
                probing = asyncio.create_task(
                    self._probe(run, pod, resumed=resumed), name=f"probes {pod.ref} {self.name}"
                )
            pod.changed()
        try:
            await run.wait_exited()
        finally:
            if probing is not None:
                probing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await probing
        termination = run.termination()
        if self._kill_detail is not None:
            termination = dataclasses.replace(termination, message=self._kill_detail)
            self._kill_detail = None
        self.termination = termination
        self.ready = self.started = False
        self._set_state(ContainerStateKind.TERMINATED, termination.reason, termination.message)
        pod.changed()
        return termination

    async def _probe(
        self, run: MonitoredRun, pod: PodContext, *, resumed: tuple[bool, bool] | None = None
    ) -> None:
        listener = ProbeListener(
            set_started=functools.partial(self._set_started, pod),
            set_ready=functools.partial(self._set_ready, pod),
            kill=functools.partial(self._kill_after_probe_failure, run, pod),
        )

        def container_pid() -> int | None:
            status = run.status()
            return status.container_pid if status is not None and status.running else None

        target = ProbeTarget(
            pod_ip=pod.pod_ip,
            env=self.launch.env,
            working_dir=self.launch.working_dir,
            mounted_process=container_pid if self.launch.has_namespaces else None,
        )
        try:
            await run_probes(self.spec, target, pod.http_session, listener, resumed=resumed)
        except Exception:
            logger.exception("pod %s: container %s: probing failed", pod.ref, self.name)

    def _set_started(self, pod: PodContext, started: bool) -> None:
        if self.started != started:
            self.started = started
            pod.persist()  # so that a later daemon adopting the run knows (see `_follow`)
            pod.changed()

    def _set_ready(self, pod: PodContext, ready: bool) -> None:
        if self.ready != ready:
            self.ready = ready
            pod.persist()  # so that a later daemon adopting the run knows (see `_follow`)
            pod.changed()

    async def _kill_after_probe_failure(self, run: MonitoredRun, pod: PodContext, detail: str) -> None:
        logger.info("pod %s: container %s: %s; stopping it", pod.ref, self.name, detail)
        self._kill_detail = detail
        run.terminate()
        try:
            async with asyncio.timeout(pod.grace_period_seconds):
                await run.wait_exited()
        except TimeoutError:
            run.kill()

    async def _back_off(self, termination: ContainerTermination, pod: PodContext) -> None:
        settings = pod.settings
        streak = 0 if self._ran_long(termination, settings) else self.crash_streak
        delay_seconds = 0.0
        if streak > 0:
            delay_seconds = settings.restart_backoff_initial_seconds * 2 ** (streak - 1)
            delay_seconds = min(delay_seconds, settings.restart_backoff_max_seconds)
        self._next_crash_streak = streak + 1
        self.last_termination = termination
        ended_at = termination.finished_at or datetime.now(UTC)
        remaining_seconds = delay_seconds - (datetime.now(UTC) - ended_at).total_seconds()
        if remaining_seconds <= 0:
            return
        ref = pod.ref
        self._set_state(
            ContainerStateKind.WAITING,
            "CrashLoopBackOff",
            f"back-off {delay_seconds:g}s restarting failed container={self.name} "
            f"pod={ref.name}_{ref.namespace}({ref.uid})",
        )
        pod.changed()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(remaining_seconds):
                await pod.deleting.wait()

    def _ran_long(self, termination: ContainerTermination, settings: LocalSettings) -> bool:
        if termination.started_at is None or termination.finished_at is None:
            return False
        ran_seconds = (termination.finished_at - termination.started_at).total_seconds()
        return ran_seconds > 2 * settings.restart_backoff_max_seconds

    def _finish(self, termination: ContainerTermination, pod: PodContext) -> None:
        self.finished = True
        self.termination = termination
        self.started = False
        # Kubernetes shows a completed init container as ready.
        self.ready = self.is_init and termination.exit_code == 0
        self._set_state(ContainerStateKind.TERMINATED, termination.reason, termination.message)
        pod.persist()
        pod.changed()

    def stop_without_running(self, pod: PodContext) -> None:
        """The pod is gone before this container ran again: it is finished as it last ended."""
        if not self.finished:
            self._finish(self.termination or self.last_termination or NOT_STARTED, pod)

    def _set_state(self, kind: ContainerStateKind, reason: str | None, message: str | None) -> None:
        self.kind, self.reason, self.message = kind, reason, message

    def log_source(self, *, previous: bool) -> tuple[Path, Callable[[], bool]]:
        """The log file to serve and a test for whether its run has ended; LookupError if there is none."""
        if self.run is None:
            raise LookupError(f"container {self.name!r} is waiting to start: {self.reason}")
        if previous:
            path = self.directory / f"{self.run.number - 1}.log"
            if self.run.number == 0 or not path.exists():
                raise LookupError(f"previous terminated container {self.name!r} not found")
            return path, lambda: True
        run = self.run
        return run.log_path, lambda: not run.monitor_alive()

    def _take_up_unrecorded_run(self, number: int) -> None:
        """The previous daemon died starting run `number`: adopt its monitor if it started one, so the
        container neither runs twice nor goes on running unknown to us after its pod is deleted."""
        found = MonitoredRun.find(self.directory, number)
        if found is None:
            logger.info("container %s: run %d never started; it starts again", self.directory, number)
            return
        logger.info("container %s: adopting run %d, started but not recorded", self.directory, number)
        self.run = found
        self.restart_count = number

    def to_record(self) -> Json:
        return {
            "name": self.name,
            "restart_count": self.restart_count,
            "crash_streak": self.crash_streak,
            "finished": self.finished,
            "termination": termination_to_json(self.termination),
            "last_termination": termination_to_json(self.last_termination),
            "run": None if self.run is None else self.run.to_json(),
            "launching": self.launching,
            "started": self.started,
            "ready": self.ready,
        }

    def restore(self, record: Mapping[str, Any]) -> None:
        """Take up the state a previous daemon recorded; `supervise` then resumes from it."""
        self.restart_count = int(record["restart_count"])
        self.crash_streak = int(record["crash_streak"])
        self.finished = bool(record["finished"])
        self.termination = termination_from_json(record["termination"])
        self.last_termination = termination_from_json(record["last_termination"])
        self.run = None if record["run"] is None else MonitoredRun.from_json(self.directory, record["run"])
        launching = record.get("launching")  # records of older daemons do not have it
        if launching is not None and (self.run is None or self.run.number < launching):
            self._take_up_unrecorded_run(int(launching))
        if "ready" in record:  # records of older daemons do not say
            self._resumed_flags = (bool(record.get("started")), bool(record["ready"]))
        if self.finished and self.termination is not None:
            self.ready = self.is_init and self.termination.exit_code == 0
            self._set_state(ContainerStateKind.TERMINATED, self.termination.reason, self.termination.message)
            return
        status = None if self.run is None else self.run.status()
        if status is not None and status.running and self.run is not None and self.run.monitor_alive():
            self._set_state(ContainerStateKind.RUNNING, None, None)
            self.started_at = status.started_at
            if self._resumed_flags is not None and not self.is_init:
                # Shown from the first status on, before supervision resumes (see `_follow`).
                self.started, self.ready = self._resumed_flags
