"""One pod on this host: its containers in Kubernetes' order, its phase, and its deletion.

Init containers run one after another, each to successful completion, before the other containers
start together. Deletion sends SIGTERM to every running container (through its monitor), SIGKILL to
what is left when the grace period ends, and once every container has stopped the pod is `terminated`:
the node may then remove it. The pod's record (`pod.json` in its folder) is rewritten whenever a run
starts or ends, so a later daemon can adopt the pod where this one left it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from vk_provider.provider import (
    ContainerSpec,
    ContainerStateKind,
    PodPhase,
    PodRef,
    PodRequest,
    PodState,
    RestartPolicy,
)
from vk_providers.local.config import LocalSettings, entrypoint_for
from vk_providers.local.containers import ContainerRuntime, Launch, container_environment
from vk_providers.local.mounts import pod_host_name
from vk_providers.local.records import (
    Json,
    pod_request_from_json,
    pod_request_to_json,
    time_from_json,
    time_to_json,
    write_json_atomically,
)
from vk_providers.local.runs import MonitoredRun
from vk_providers.local.volumes import plan_mounts

logger = logging.getLogger(__name__)

RECORD_NAME = "pod.json"
RECORD_VERSION = 1


class PodRuntime:
    def __init__(
        self,
        request: PodRequest,
        *,
        pod_ip: str,
        directory: Path,
        settings: LocalSettings,
        inherited_env: Mapping[str, str],
        created_at: datetime,
        on_change: Callable[[str], None],
        on_terminated: Callable[[str], None],
        http_session: Callable[[], aiohttp.ClientSession],
    ) -> None:
        self.request = request
        self.pod_ip = pod_ip
        self.directory = directory
        self.settings = settings
        self.created_at = created_at
        self.deleting = asyncio.Event()
        self.kill_deadline: float | None = None
        """When (time.time()) whatever still runs of a deleted pod gets SIGKILL."""
        self.terminated_at: datetime | None = None
        self._on_change = on_change
        self._on_terminated = on_terminated
        self._http_session = http_session
        self._main_task: asyncio.Task[None] | None = None
        self._kill_task: asyncio.Task[None] | None = None
        regular_waiting_reason = "PodInitializing" if request.init_containers else "ContainerCreating"
        self.init_containers = [
            self._container(spec, inherited_env, is_init=True, waiting_reason="PodInitializing")
            for spec in request.init_containers
        ]
        self.containers = [
            self._container(spec, inherited_env, is_init=False, waiting_reason=regular_waiting_reason)
            for spec in request.containers
        ]

    def _container(
        self, spec: ContainerSpec, inherited_env: Mapping[str, str], *, is_init: bool, waiting_reason: str
    ) -> ContainerRuntime:
        env = container_environment(spec, pod_ip=self.pod_ip, pod_name=self.ref.name, inherited=inherited_env)
        # Without an image there is no WORKDIR to default to; a scratch folder per pod plays its part.
        working_dir = spec.working_dir or str(self.directory / "work")
        # No command: the image's entrypoint, as a container runtime would run it (see image_entrypoints).
        entrypoint = spec.command or entrypoint_for(spec.image, self.settings.image_entrypoints) or ()
        launch = Launch(
            argv=(*entrypoint, *spec.args),
            env=env,
            working_dir=working_dir,
            stdin=self._wants_stdin(spec.name),
            mounts=plan_mounts(self.request, self.directory, spec.name)
            if self.settings.mount_volumes
            else (),
            # Namespaces need the same privilege as mounts, so a pod gets its host name with them.
            host_name=pod_host_name(self.ref.name) if self.settings.mount_volumes else None,
        )
        return ContainerRuntime(
            spec,
            launch,
            self.directory / spec.name,
            pod_uid=self.ref.uid,
            is_init=is_init,
            waiting_reason=waiting_reason,
        )

    def _wants_stdin(self, container: str) -> bool:
        spec = self.request.raw.get("spec") or {}
        for kind in ("initContainers", "containers"):
            for item in spec.get(kind) or ():
                if item.get("name") == container:
                    return bool(item.get("stdin"))
        return False

    # What containers ask of their pod (containers.PodContext).

    @property
    def ref(self) -> PodRef:
        return self.request.ref

    @property
    def restart_policy(self) -> RestartPolicy:
        return self.request.restart_policy

    @property
    def grace_period_seconds(self) -> float:
        return self.request.termination_grace_period_seconds

    def changed(self) -> None:
        self._on_change(self.ref.uid)

    def persist(self) -> None:
        write_json_atomically(self.directory / RECORD_NAME, self.to_record())

    def http_session(self) -> aiohttp.ClientSession:
        return self._http_session()

    def stop_if_deleting(self, run: MonitoredRun) -> None:
        if self.deleting.is_set():
            run.terminate()
            if self.kill_deadline is not None and self.kill_deadline <= time.time():
                run.kill()

    # Lifecycle.

    @property
    def terminated(self) -> bool:
        return self.terminated_at is not None

    def all_containers(self) -> Iterator[ContainerRuntime]:
        yield from self.init_containers
        yield from self.containers

    def container_named(self, name: str) -> ContainerRuntime | None:
        return next((container for container in self.all_containers() if container.name == name), None)

    def start(self) -> None:
        """Run (or resume) the pod in the background."""
        (self.directory / "work").mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.deleting.is_set() and not self.terminated:
            self._schedule_kill()
        self._main_task = asyncio.create_task(self._main(), name=f"pod {self.ref}")

    async def _main(self) -> None:
        try:
            if not self.terminated:
                await self._run_containers()
                await self.deleting.wait()
                self._mark_terminated()
        except Exception:
            logger.exception("pod %s: supervision failed", self.ref)

    async def _run_containers(self) -> None:
        for container in self.init_containers:
            if not container.finished:
                await container.supervise(self)
            if self.deleting.is_set() or not container.succeeded:
                return  # deleted, or an init container failed for good: the pod is Failed
        for container in self.containers:
            container.leave_pod_initializing()
        self.changed()
        async with asyncio.TaskGroup() as group:
            for container in self.containers:
                if not container.finished:
                    name = f"container {self.ref} {container.name}"
                    group.create_task(container.supervise(self), name=name)

    def begin_deletion(self, grace_period_seconds: float) -> None:
        """SIGTERM now, SIGKILL when the grace period ends; a later, shorter grace period wins."""
        deadline = time.time() + max(grace_period_seconds, 0.0)
        if self.kill_deadline is None or deadline < self.kill_deadline:
            self.kill_deadline = deadline
            self._schedule_kill()
        if not self.deleting.is_set():
            self.deleting.set()
            for container in self.all_containers():
                if container.run is not None and not container.finished:
                    container.run.terminate()
        self.persist()
        self.changed()

    def _schedule_kill(self) -> None:
        if self._kill_task is not None:
            self._kill_task.cancel()
        deadline = self.kill_deadline if self.kill_deadline is not None else time.time()
        self._kill_task = asyncio.create_task(self._kill_at(deadline), name=f"kill {self.ref}")

    async def _kill_at(self, deadline: float) -> None:
        await asyncio.sleep(max(0.0, deadline - time.time()))
        for container in self.all_containers():
            if container.run is not None:
                container.run.kill()

    def _mark_terminated(self) -> None:
        for container in self.all_containers():
            container.stop_without_running(self)
        self.terminated_at = datetime.now(UTC)
        if self._kill_task is not None:
            self._kill_task.cancel()
        self.persist()
        self.changed()
        self._on_terminated(self.ref.uid)

    async def aclose(self) -> None:
        """Stop supervising; the processes keep running for the next daemon to adopt."""
        tasks = [task for task in (self._main_task, self._kill_task) if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # State.

    def phase(self) -> PodPhase:
        if any(container.finished and not container.succeeded for container in self.init_containers):
            return "Failed"
        if not all(container.succeeded for container in self.init_containers):
            return "Pending"
        if all(container.finished for container in self.containers):
            return "Succeeded" if all(container.succeeded for container in self.containers) else "Failed"
        if any(
            container.kind is ContainerStateKind.RUNNING or container.has_run for container in self.containers
        ):
            return "Running"
        return "Pending"

    def traffic_address(self) -> str | None:
        for spec in self.request.containers:
            if spec.ports:
                return f"http://{self.pod_ip}:{spec.ports[0].container_port}"
        return None

    def snapshot(self) -> PodState:
        return PodState(
            ref=self.ref,
            phase=self.phase(),
            containers=tuple(container.snapshot() for container in self.containers),
            init_containers=tuple(container.snapshot() for container in self.init_containers),
            pod_ip=self.pod_ip,
            started_at=self.created_at,
            traffic_address=self.traffic_address(),
            terminated=self.terminated,
        )

    # Records.

    def to_record(self) -> Json:
        return {
            "version": RECORD_VERSION,
            "request": pod_request_to_json(self.request),
            "pod_ip": self.pod_ip,
            "created_at": time_to_json(self.created_at),
            "deleting": self.deleting.is_set(),
            "kill_deadline": self.kill_deadline,
            "terminated_at": time_to_json(self.terminated_at),
            "init_containers": [container.to_record() for container in self.init_containers],
            "containers": [container.to_record() for container in self.containers],
        }

    @classmethod
    def from_record(
        cls,
        record: Json,
        *,
        directory: Path,
        settings: LocalSettings,
        inherited_env: Mapping[str, str],
        on_change: Callable[[str], None],
        on_terminated: Callable[[str], None],
        http_session: Callable[[], aiohttp.ClientSession],
    ) -> PodRuntime:
        created_at = time_from_json(record["created_at"]) or datetime.now(UTC)
        pod = cls(
            pod_request_from_json(record["request"]),
            pod_ip=record["pod_ip"],
            directory=directory,
            settings=settings,
            inherited_env=inherited_env,
            created_at=created_at,
            on_change=on_change,
            on_terminated=on_terminated,
            http_session=http_session,
        )
        if record["deleting"]:
            pod.deleting.set()
        pod.kill_deadline = record["kill_deadline"]
        pod.terminated_at = time_from_json(record["terminated_at"])
        recorded = {item["name"]: item for item in [*record["init_containers"], *record["containers"]]}
        for container in pod.all_containers():
            if container.name in recorded:
                container.restore(recorded[container.name])
        if all(container.succeeded for container in pod.init_containers):
            for container in pod.containers:
                container.leave_pod_initializing()
        return pod
