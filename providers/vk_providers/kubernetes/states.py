"""Remote pods back to pod states, their traffic address and log queries. Pure, no I/O.

States: the remote pod's status is the pod's status. Phase, container states, readiness, restart
counts and last terminations are copied; a failed pod's reason and message are the remote pod's, or
else its first failed container's exit code and message (a container that failed without a message is
described by its last log lines, which the provider reads, as the kubelet's `FallbackToLogsOnError`
does). A remote pod that cannot be scheduled is Pending with reason `Unschedulable` and the remote
scheduler's message.

A remote container that runs but is not ready yet (its readiness probe has not passed: a model still
loading, an `initialDelaySeconds` not over) is running and not ready, with the reason
`WaitingForReadiness` and a message saying what the remote cluster waits for: the node shows it as the
stage in the pod's Ready condition, and the pod is never failed for it; only the remote cluster's own
verdict (its pod Failed, or the container restarted by its liveness probe) counts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any

from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.provider import (
    ContainerState,
    ContainerStateKind,
    ContainerTermination,
    LogOptions,
    PodPhase,
    PodRef,
    PodState,
)
from vk_providers.kubernetes.config import KubernetesSettings
from vk_providers.kubernetes.translate import (
    NAME_ANNOTATION,
    NAMESPACE_ANNOTATION,
    NODE_ANNOTATION,
    TRAFFIC_PORT_NAME,
    UID_ANNOTATION,
)

WAITING_FOR_READINESS_REASON = "WaitingForReadiness"
"""A running remote container whose readiness the remote cluster has not confirmed yet."""


def owner_ref(remote: Mapping[str, Any], node_name: str) -> PodRef | None:
    """The home pod a remote object stands for, if this node made it."""
    annotations = (remote.get("metadata") or {}).get("annotations") or {}
    if annotations.get(NODE_ANNOTATION) != node_name or not annotations.get(UID_ANNOTATION):
        return None
    return PodRef(
        annotations.get(NAMESPACE_ANNOTATION, ""),
        annotations.get(NAME_ANNOTATION, ""),
        annotations[UID_ANNOTATION],
    )


def _termination(raw: Mapping[str, Any] | None) -> ContainerTermination | None:
    if not raw:
        return None
    return ContainerTermination(
        exit_code=int(raw.get("exitCode", 0)),
        reason=raw.get("reason"),
        message=raw.get("message"),
        started_at=parse_timestamp(raw.get("startedAt")),
        finished_at=parse_timestamp(raw.get("finishedAt")),
    )


def failed_containers_without_message(remote: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(name, restart count) of containers that ended in failure and said nothing about why."""
    found = []
    for status in _all_statuses(remote):
        terminated = (status.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0 and not terminated.get("message"):
            found.append((str(status.get("name")), int(status.get("restartCount", 0))))
    return found


def _all_statuses(remote: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = remote.get("status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _container_state(
    spec: Mapping[str, Any],
    status: Mapping[str, Any] | None,
    *,
    waiting_reason: str,
    waiting_message: str | None,
    log_messages: Mapping[str, str],
) -> ContainerState:
    name = str(spec.get("name", ""))
    image = str(spec.get("image", ""))
    if status is None:
        return ContainerState(
            name=name,
            image=image,
            state=ContainerStateKind.WAITING,
            reason=waiting_reason,
            message=waiting_message,
        )
    state = status.get("state") or {}
    base = ContainerState(
        name=name,
        image=image,
        state=ContainerStateKind.WAITING,
        ready=bool(status.get("ready")),
        started=bool(status.get("started")),
        restart_count=int(status.get("restartCount", 0)),
        last_termination=_termination((status.get("lastState") or {}).get("terminated")),
        container_id=str(status.get("containerID") or ""),
    )
    if "running" in state:
        running = dataclasses.replace(
            base,
            state=ContainerStateKind.RUNNING,
            started_at=parse_timestamp(state["running"].get("startedAt")),
        )
        if running.ready:
            return running
        return dataclasses.replace(
            running, reason=WAITING_FOR_READINESS_REASON, message=_readiness_wait(spec)
        )
    ended = _termination(state.get("terminated"))
    if ended is not None:
        if not ended.message and ended.exit_code != 0 and name in log_messages:
            ended = dataclasses.replace(ended, message=log_messages[name])
        return dataclasses.replace(
            base,
            state=ContainerStateKind.TERMINATED,
            reason=ended.reason,
            message=ended.message,
            started_at=ended.started_at,
            termination=ended,
        )
    waiting = state.get("waiting") or {}
    return dataclasses.replace(
        base,
        reason=waiting.get("reason") or waiting_reason,
        message=waiting.get("message") or waiting_message,
    )


def _readiness_wait(spec: Mapping[str, Any]) -> str:
    """What the remote cluster waits for before it calls a running container ready."""
    probe = spec.get("readinessProbe")
    if not isinstance(probe, Mapping):
        return "running in the remote cluster, not ready yet"
    delay = probe.get("initialDelaySeconds")
    after = f", first tried {delay}s after the start" if isinstance(delay, int) and delay > 0 else ""
    return f"running in the remote cluster; its readiness probe has not passed yet{after}"


def _unschedulable_message(status: Mapping[str, Any]) -> str | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "not scheduled")
    return None


def pod_state(
    ref: PodRef,
    remote: Mapping[str, Any],
    *,
    settings: KubernetesSettings,
    service: Mapping[str, Any] | None = None,
    log_messages: Mapping[str, str] | None = None,
) -> PodState:
    """The state to report for `ref`, held remotely as the pod `remote` (with its Service, if read).

    `log_messages`: container name -> the last log lines of a container that failed without a message.
    """
    spec = remote.get("spec") or {}
    status = remote.get("status") or {}
    logs = log_messages or {}
    unschedulable = _unschedulable_message(status)
    waiting_reason = "Unschedulable" if unschedulable else "ContainerCreating"
    waiting_message = (
        f"the remote cluster cannot schedule the pod: {unschedulable}" if unschedulable else None
    )

    def states(specs_key: str, statuses_key: str) -> tuple[ContainerState, ...]:
        by_name = {item.get("name"): item for item in status.get(statuses_key) or []}
        return tuple(
            _container_state(
                container,
                by_name.get(container.get("name")),
                waiting_reason=waiting_reason,
                waiting_message=waiting_message,
                log_messages=logs,
            )
            for container in spec.get(specs_key) or []
        )

    containers = states("containers", "containerStatuses")
    init_containers = states("initContainers", "initContainerStatuses")
    phase: PodPhase = status.get("phase") or "Pending"
    reason, message = status.get("reason"), status.get("message")
    if phase == "Failed" and not message:
        reason, message = _failure(init_containers + containers)
    elif phase == "Pending" and unschedulable:
        reason, message = "Unschedulable", waiting_message
    pod_ip = status.get("podIP") or None
    deleting = bool((remote.get("metadata") or {}).get("deletionTimestamp"))
    return PodState(
        ref=ref,
        phase=phase,
        containers=containers,
        init_containers=init_containers,
        pod_ip=pod_ip if settings.service_type == "ClusterIP" else None,
        started_at=parse_timestamp(status.get("startTime")),
        reason=reason,
        message=message,
        traffic_address=traffic_address(remote, service, settings),
        terminated=deleting and phase in ("Succeeded", "Failed"),
    )


def _failure(containers: Sequence[ContainerState]) -> tuple[str | None, str | None]:
    for container in containers:
        ended = container.termination
        if ended is not None and ended.exit_code != 0:
            detail = f": {ended.message}" if ended.message else ""
            return (
                ended.reason or "Error",
                f"container {container.name!r} exited with code {ended.exit_code}{detail}",
            )
    return None, None


def traffic_port(remote: Mapping[str, Any]) -> int | None:
    """The container port named `http`, else the first TCP port of any container."""
    ports = [
        port
        for container in (remote.get("spec") or {}).get("containers") or []
        for port in container.get("ports") or []
        if str(port.get("protocol", "TCP")).upper() == "TCP"
    ]
    for port in ports:
        if port.get("name") == TRAFFIC_PORT_NAME:
            return int(port["containerPort"])
    return int(ports[0]["containerPort"]) if ports else None


def traffic_address(
    remote: Mapping[str, Any], service: Mapping[str, Any] | None, settings: KubernetesSettings
) -> str | None:
    """Where the router sends the pod's traffic, by service type; None until it is known."""
    port = traffic_port(remote)
    status = remote.get("status") or {}
    if port is None:
        return None
    if settings.service_type == "ClusterIP":
        ip = status.get("podIP")
        return f"http://{_host(ip)}:{port}" if ip else None
    service_port = _service_port(service, port)
    if service_port is None:
        return None
    if settings.service_type == "NodePort":
        host_ip, node_port = status.get("hostIP"), service_port.get("nodePort")
        return f"http://{_host(host_ip)}:{node_port}" if host_ip and node_port else None
    ingress = (((service or {}).get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    for entry in ingress:
        host = entry.get("ip") or entry.get("hostname")
        if host:
            return f"http://{_host(host)}:{service_port['port']}"
    return None


def _service_port(service: Mapping[str, Any] | None, target: int) -> Mapping[str, Any] | None:
    for port in ((service or {}).get("spec") or {}).get("ports") or []:
        if port.get("targetPort") == target or port.get("port") == target:
            return dict(port)
    return None


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def log_query(container: str, options: LogOptions) -> dict[str, str | int | bool]:
    """The remote pod log's query for the kubelet's options (the same names, as the apiserver takes)."""
    query: dict[str, str | int | bool] = {"container": container}
    if options.follow:
        query["follow"] = True
    if options.previous:
        query["previous"] = True
    if options.timestamps:
        query["timestamps"] = True
    if options.tail_lines is not None:
        query["tailLines"] = options.tail_lines
    if options.limit_bytes is not None:
        query["limitBytes"] = options.limit_bytes
    if options.since_time is not None:
        query["sinceTime"] = options.since_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return query
