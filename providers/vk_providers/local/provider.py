"""The local provider: pods bound to the virtual node run as processes on this host.

It stands in for the "home GPU nodes" of a development cluster that has no real kubelets, so it behaves
like a kubelet towards processes: a loopback IP per pod, init containers, restart policies with
crash-loop back-off, probes, graceful deletion, CRI logs, usage, and adoption of everything that still
runs when a new daemon starts on the same state folder, and exec, attach and port-forward (`streams`).
This module is the facade the node talks to; the work is done by `pods`, `containers`, `runs` (with
the `monitor` process), `probes`, `logs`, `usage`, `streams` and `addresses`.

State folder layout (`context.state_dir`):

    addresses.json                      pod UID -> 127.x.y.z
    pods/<uid>/pod.json                 the pod's record: request, IP, runs, deletion
    pods/<uid>/work/                    the default working directory of its containers
    pods/<uid>/<container>/spec.json    argv, env and working directory handed to the monitor
    pods/<uid>/<container>/<n>.log      the CRI log of run n (n = restart count)
    pods/<uid>/<container>/<n>.status.json   pids, start and exit of run n, written by its monitor
    pods/<uid>/<container>/monitor.log  the monitors' own errors

A deleted pod that has stopped is reported with `terminated=True` and kept (files, IP) until the node
calls `delete_pod` for it again, or `terminated_pod_retention_seconds` pass; then it is forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import shutil
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime

import aiohttp

from vk_provider.errors import (
    InvalidPodError,
    NotFoundError,
    ProviderError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.provider import (
    ByteSink,
    ContainerStreams,
    ContainerUsage,
    LogOptions,
    PodRef,
    PodRequest,
    PodState,
    PricedPod,
    ProviderContext,
    VolumeFile,
)
from vk_providers.local.addresses import AddressBook
from vk_providers.local.config import entrypoint_for, parse_settings
from vk_providers.local.logs import read_log
from vk_providers.local.mounts import joining_mounts_of
from vk_providers.local.pods import RECORD_NAME, PodRuntime
from vk_providers.local.records import read_json
from vk_providers.local.streams import attach_process, exec_process, forward_port
from vk_providers.local.usage import process_group_usage
from vk_providers.local.volumes import prepare_volumes, volume_folder, write_volume

logger = logging.getLogger(__name__)

_CONTAINER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
RESTART_POLICIES = ("Always", "OnFailure", "Never")


class LocalProvider:
    """PodLifecycle with status push, pod addresses, logs, usage and node capacity."""

    def __init__(self, context: ProviderContext) -> None:
        self._settings = parse_settings(context.config)
        self._pods_dir = context.state_dir / "pods"
        self._pods_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._addresses = AddressBook(context.state_dir / "addresses.json", self._settings.address_range)
        self._inherited_env = {
            name: os.environ[name] for name in self._settings.inherited_env if name in os.environ
        }
        self._pods: dict[str, PodRuntime] = {}
        self._started = False
        self._closed = False
        self._changed_uids: dict[str, None] = {}
        """UIDs whose state may have changed since the watcher last looked (ordered, no duplicates)."""
        self._change_signal = asyncio.Event()
        self._forget_timers: dict[str, asyncio.Task[None]] = {}
        self._http: aiohttp.ClientSession | None = None
        self._load_records()

    def _load_records(self) -> None:
        for directory in sorted(self._pods_dir.iterdir()):
            record = read_json(directory / RECORD_NAME)
            if record is None:
                continue
            try:
                pod = PodRuntime.from_record(
                    record,
                    directory=directory,
                    settings=self._settings,
                    inherited_env=self._inherited_env,
                    on_change=self._note_change,
                    on_terminated=self._schedule_forget,
                    http_session=self._http_session,
                )
            except (KeyError, TypeError, ValueError) as error:
                logger.warning("ignoring the unreadable pod record in %s: %s", directory, error)
                continue
            self._pods[pod.ref.uid] = pod
            logger.info("adopting pod %s", pod.ref)

    def _ensure_started(self) -> None:
        """Start supervising adopted pods; deferred to the first call made inside the event loop."""
        if self._closed:
            raise TemporaryProviderError("the local provider is closed")
        if self._started:
            return
        self._started = True
        for uid, pod in self._pods.items():
            pod.start()
            if pod.terminated:
                self._schedule_forget(uid)

    # PodLifecycle

    async def create_pod(self, pod: PodRequest) -> None:
        self._ensure_started()
        uid = pod.ref.uid
        if uid in self._pods:
            return
        _validate(pod, self._settings.image_entrypoints)
        pod_ip = self._addresses.reserve(uid)
        if self._settings.mount_volumes:
            (self._pods_dir / uid).mkdir(exist_ok=True, mode=0o700)
            prepare_volumes(pod, self._pods_dir / uid)  # before the runtime plans its mounts on them
        runtime = PodRuntime(
            pod,
            pod_ip=pod_ip,
            directory=self._pods_dir / uid,
            settings=self._settings,
            inherited_env=self._inherited_env,
            created_at=datetime.now(UTC),
            on_change=self._note_change,
            on_terminated=self._schedule_forget,
            http_session=self._http_session,
        )
        runtime.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        runtime.persist()
        self._pods[uid] = runtime
        runtime.start()
        self._note_change(uid)

    async def update_pod(self, pod: PodRequest) -> None:
        self._ensure_started()
        runtime = self._pods.get(pod.ref.uid)
        if runtime is None:
            logger.debug("update of pod %s, which this provider does not hold: ignored", pod.ref)
            return
        current = runtime.request
        if (pod.containers, pod.init_containers, pod.restart_policy) != (
            current.containers,
            current.init_containers,
            current.restart_policy,
        ):
            logger.warning(
                "pod %s: changes to containers or the restart policy are ignored "
                "(only labels and annotations can change on a running pod)",
                pod.ref,
            )
        if (pod.labels, pod.annotations) != (current.labels, current.annotations):
            runtime.request = _with_metadata(current, pod)
            runtime.persist()

    # SupportsServiceAccountTokens

    def mounts_service_account_tokens(self) -> bool:
        return self._settings.mount_volumes

    async def update_volume_files(
        self, ref: PodRef, volume_files: Mapping[str, tuple[VolumeFile, ...]]
    ) -> None:
        runtime = self._pod(ref)
        for name, files in volume_files.items():
            write_volume(volume_folder(runtime.directory, name), files)

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        """Start stopping the pod and return; its state becomes `terminated` once everything has stopped."""
        self._ensure_started()
        runtime = self._pods.get(ref.uid)
        if runtime is None:
            self._addresses.release(ref.uid)  # an address reserved by pod_address for a pod never created
            return
        if runtime.terminated:
            await self._forget(ref.uid)
            return
        runtime.begin_deletion(grace_period_seconds)

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        self._ensure_started()
        runtime = self._pods.get(ref.uid)
        return None if runtime is None else runtime.snapshot()

    async def list_pods(self) -> Sequence[PodState]:
        self._ensure_started()
        return [runtime.snapshot() for runtime in self._pods.values()]

    async def check_health(self) -> None:
        marker = self._settings.unhealthy_marker_file
        if marker is not None and marker.exists():
            raise ProviderUnavailableError(f"the local provider is marked unhealthy by {marker}")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._change_signal.set()  # ends watch_states
        timers = list(self._forget_timers.values())
        self._forget_timers.clear()
        for timer in timers:
            timer.cancel()
        await asyncio.gather(*timers, return_exceptions=True)
        for runtime in self._pods.values():
            await runtime.aclose()
        if self._http is not None:
            await self._http.close()

    # SupportsPodAddress

    async def pod_address(self, ref: PodRef) -> str:
        return self._addresses.reserve(ref.uid)

    # SupportsStatusPush

    async def watch_states(self) -> AsyncIterator[PodState]:
        self._ensure_started()
        last_sent: dict[str, PodState] = {}
        for uid in self._pods:
            self._changed_uids[uid] = None
        while not self._closed:
            if not self._changed_uids:
                self._change_signal.clear()
                await self._change_signal.wait()
                continue
            uids = list(self._changed_uids)
            self._changed_uids.clear()
            for uid in uids:
                runtime = self._pods.get(uid)
                if runtime is None:
                    last_sent.pop(uid, None)
                    continue
                state = runtime.snapshot()
                if last_sent.get(uid) != state:
                    last_sent[uid] = state
                    yield state

    def _note_change(self, uid: str) -> None:
        self._changed_uids[uid] = None
        self._change_signal.set()

    # SupportsLogs

    def stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        runtime = self._pods.get(ref.uid)
        if runtime is None:
            raise NotFoundError(f"pod {ref} is not held by the local provider")
        found = runtime.container_named(container)
        if found is None:
            raise NotFoundError(f"pod {ref} has no container {container!r}")
        try:
            path, run_has_ended = found.log_source(previous=options.previous)
        except LookupError as error:
            raise NotFoundError(str(error)) from None
        return read_log(path, options, run_has_ended if options.follow else None)

    # SupportsExec, SupportsAttach, SupportsPortForward

    async def exec_in_container(
        self, ref: PodRef, container: str, command: Sequence[str], streams: ContainerStreams
    ) -> int:
        runtime = self._pod(ref)
        found = runtime.container_named(container)
        if found is None:
            raise NotFoundError(f"pod {ref} has no container {container!r}")
        if found.running_status() is None:
            raise ProviderError(f"container {container!r} of pod {ref} is not running")
        launch = found.launch
        status = found.running_status()
        with contextlib.ExitStack() as stack:
            mounts_of = None
            if launch.has_namespaces and status is not None and status.container_pid is not None:
                mounts_of = stack.enter_context(joining_mounts_of(status.container_pid))
            return await exec_process(
                command, streams, env=launch.env, working_dir=launch.working_dir, enter=mounts_of
            )

    async def attach_to_container(self, ref: PodRef, container: str, streams: ContainerStreams) -> None:
        runtime = self._pod(ref)
        found = runtime.container_named(container)
        if found is None:
            raise NotFoundError(f"pod {ref} has no container {container!r}")
        run = found.run
        if found.running_status() is None or run is None:
            raise ProviderError(f"container {container!r} of pod {ref} is not running")
        stdin = run.stdin_path if found.launch.stdin else None
        output = read_log(
            run.log_path, LogOptions(follow=True, tail_lines=0), lambda: not run.monitor_alive()
        )
        try:
            await attach_process(stdin, output, streams)
        finally:
            await output.aclose()  # type: ignore[attr-defined]

    async def port_forward(
        self, ref: PodRef, port: int, incoming: AsyncIterator[bytes], send: ByteSink
    ) -> None:
        runtime = self._pod(ref)
        await forward_port(runtime.pod_ip, port, incoming, send)

    def _pod(self, ref: PodRef) -> PodRuntime:
        runtime = self._pods.get(ref.uid)
        if runtime is None or runtime.terminated:
            raise NotFoundError(f"pod {ref} is not held by the local provider")
        return runtime

    # SupportsUsage

    async def usage(self, ref: PodRef) -> Sequence[ContainerUsage]:
        runtime = self._pods.get(ref.uid)
        if runtime is None:
            raise NotFoundError(f"pod {ref} is not held by the local provider")
        groups = {}
        for container in runtime.all_containers():
            status = container.running_status()
            if status is not None and status.container_pid is not None:
                groups[container.name] = status.container_pid
        measured = process_group_usage(set(groups.values()))
        now = datetime.now(UTC)
        return [
            ContainerUsage(
                name=name,
                cpu_usage_core_nanoseconds=measured[group].cpu_nanoseconds,
                memory_working_set_bytes=measured[group].resident_bytes,
                timestamp=now,
            )
            for name, group in groups.items()
            if group in measured
        ]

    # SupportsNodeCapacity

    async def node_capacity(self) -> Mapping[str, str]:
        return dict(self._settings.capacity)

    # SupportsPodPrice

    def pod_price_per_hour(self, pod: PricedPod) -> float | None:
        """Nothing: its pods are processes on this host, paid for at no provider."""
        return 0.0

    # Housekeeping

    def _http_session(self) -> aiohttp.ClientSession:
        if self._http is None:
            # No keep-alive, as for the kubelet's probes: each attempt is a fresh connection, and none
            # outlives a container that is restarted.
            self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))
        return self._http

    def _schedule_forget(self, uid: str) -> None:
        runtime = self._pods.get(uid)
        if runtime is None or runtime.terminated_at is None or uid in self._forget_timers:
            return
        age_seconds = (datetime.now(UTC) - runtime.terminated_at).total_seconds()
        delay_seconds = max(0.0, self._settings.terminated_pod_retention_seconds - age_seconds)
        forgetting = self._forget_later(uid, delay_seconds)
        self._forget_timers[uid] = asyncio.create_task(forgetting, name=f"forget {uid}")

    async def _forget_later(self, uid: str, delay_seconds: float) -> None:
        await asyncio.sleep(delay_seconds)
        await self._forget(uid)

    async def _forget(self, uid: str) -> None:
        """Drop a stopped pod: its record, logs and address."""
        timer = self._forget_timers.pop(uid, None)
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()
        runtime = self._pods.pop(uid, None)
        if runtime is not None:
            await runtime.aclose()
            shutil.rmtree(runtime.directory, ignore_errors=True)
        self._addresses.release(uid)
        self._note_change(uid)


def _validate(pod: PodRequest, image_entrypoints: Mapping[str, tuple[str, ...]]) -> None:
    if not _UID.fullmatch(pod.ref.uid):
        raise InvalidPodError(f"pod UID {pod.ref.uid!r} is not a UID")
    if pod.restart_policy not in RESTART_POLICIES:
        allowed = ", ".join(RESTART_POLICIES)
        raise InvalidPodError(f"restart policy {pod.restart_policy!r} is not one of {allowed}")
    if not pod.containers:
        raise InvalidPodError("the pod has no containers")
    seen: set[str] = set()
    for spec in (*pod.init_containers, *pod.containers):
        if not _CONTAINER_NAME.fullmatch(spec.name):
            raise InvalidPodError(f"container name {spec.name!r} is not a DNS label")
        if spec.name in seen:
            raise InvalidPodError(f"container name {spec.name!r} is used twice")
        seen.add(spec.name)
        if not spec.command and entrypoint_for(spec.image, image_entrypoints) is None:
            raise InvalidPodError(
                f"container {spec.name!r} has no command: the local provider runs `command` + `args` as a "
                f"process on this host, and image_entrypoints names no entrypoint for {spec.image!r}"
            )


def _with_metadata(current: PodRequest, changed: PodRequest) -> PodRequest:
    return dataclasses.replace(current, labels=dict(changed.labels), annotations=dict(changed.annotations))
