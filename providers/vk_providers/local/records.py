"""Pod requests and terminations as JSON, and atomic JSON files: what lets a later daemon carry on.

The provider keeps a record per pod in its state folder (the request it was given, the pod's IP, each
container's runs). A daemon that starts on the same folder reads them back and adopts the pods, so the
request must survive the trip to JSON and back exactly; the value types are spelled out field by field
rather than pickled, so a record stays readable by people and by later versions.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from vk_provider.provider import (
    ContainerPort,
    ContainerSpec,
    ContainerTermination,
    ExecAction,
    HttpGetAction,
    PodRef,
    PodRequest,
    Probe,
    TcpSocketAction,
)

logger = logging.getLogger(__name__)

Json = dict[str, Any]


def write_json_atomically(path: Path, data: Any) -> None:
    """Readers see the old file or the new one, never half of one; private, because env may hold secrets."""
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(data, file)
    os.replace(temporary, path)


def read_json(path: Path) -> Any | None:
    """The file's content, or None when it is missing or unreadable (logged: that is a lost record)."""
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        logger.warning("ignoring unreadable %s: %s", path, error)
        return None


def time_to_json(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def time_from_json(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def termination_to_json(termination: ContainerTermination | None) -> Json | None:
    if termination is None:
        return None
    return {
        "exit_code": termination.exit_code,
        "reason": termination.reason,
        "message": termination.message,
        "started_at": time_to_json(termination.started_at),
        "finished_at": time_to_json(termination.finished_at),
    }


def termination_from_json(data: Json | None) -> ContainerTermination | None:
    if data is None:
        return None
    return ContainerTermination(
        exit_code=int(data["exit_code"]),
        reason=data.get("reason"),
        message=data.get("message"),
        started_at=time_from_json(data.get("started_at")),
        finished_at=time_from_json(data.get("finished_at")),
    )


def pod_request_to_json(pod: PodRequest) -> Json:
    return {
        "ref": dataclasses.asdict(pod.ref),
        "node_name": pod.node_name,
        "containers": [_container_to_json(container) for container in pod.containers],
        "init_containers": [_container_to_json(container) for container in pod.init_containers],
        "restart_policy": pod.restart_policy,
        "termination_grace_period_seconds": pod.termination_grace_period_seconds,
        "labels": dict(pod.labels),
        "annotations": dict(pod.annotations),
        "raw": dict(pod.raw),
    }


def pod_request_from_json(data: Json) -> PodRequest:
    return PodRequest(
        ref=PodRef(**data["ref"]),
        node_name=data["node_name"],
        containers=tuple(_container_from_json(item) for item in data["containers"]),
        init_containers=tuple(_container_from_json(item) for item in data["init_containers"]),
        restart_policy=data["restart_policy"],
        termination_grace_period_seconds=float(data["termination_grace_period_seconds"]),
        labels=dict(data["labels"]),
        annotations=dict(data["annotations"]),
        raw=dict(data["raw"]),
    )


def _container_to_json(container: ContainerSpec) -> Json:
    return {
        "name": container.name,
        "image": container.image,
        "command": list(container.command),
        "args": list(container.args),
        "env": [list(pair) for pair in container.env],
        "working_dir": container.working_dir,
        "ports": [dataclasses.asdict(port) for port in container.ports],
        "requests": dict(container.requests),
        "limits": dict(container.limits),
        "readiness_probe": _probe_to_json(container.readiness_probe),
        "liveness_probe": _probe_to_json(container.liveness_probe),
        "startup_probe": _probe_to_json(container.startup_probe),
    }


def _container_from_json(data: Json) -> ContainerSpec:
    return ContainerSpec(
        name=data["name"],
        image=data["image"],
        command=tuple(data["command"]),
        args=tuple(data["args"]),
        env=tuple((str(name), str(value)) for name, value in data["env"]),
        working_dir=data["working_dir"],
        ports=tuple(ContainerPort(**port) for port in data["ports"]),
        requests=dict(data["requests"]),
        limits=dict(data["limits"]),
        readiness_probe=_probe_from_json(data["readiness_probe"]),
        liveness_probe=_probe_from_json(data["liveness_probe"]),
        startup_probe=_probe_from_json(data["startup_probe"]),
    )


def _probe_to_json(probe: Probe | None) -> Json | None:
    if probe is None:
        return None
    action = probe.action
    kind = {HttpGetAction: "httpGet", TcpSocketAction: "tcpSocket", ExecAction: "exec"}[type(action)]
    return {
        "action": {kind: dataclasses.asdict(action)},
        "initial_delay_seconds": probe.initial_delay_seconds,
        "period_seconds": probe.period_seconds,
        "timeout_seconds": probe.timeout_seconds,
        "success_threshold": probe.success_threshold,
        "failure_threshold": probe.failure_threshold,
    }


def _probe_from_json(data: Json | None) -> Probe | None:
    if data is None:
        return None
    ((kind, fields),) = data["action"].items()
    return Probe(
        action=_action_from_json(kind, fields),
        initial_delay_seconds=float(data["initial_delay_seconds"]),
        period_seconds=float(data["period_seconds"]),
        timeout_seconds=float(data["timeout_seconds"]),
        success_threshold=int(data["success_threshold"]),
        failure_threshold=int(data["failure_threshold"]),
    )


def _action_from_json(kind: str, fields: Mapping[str, Any]) -> HttpGetAction | TcpSocketAction | ExecAction:
    if kind == "httpGet":
        return HttpGetAction(
            port=int(fields["port"]),
            path=fields["path"],
            scheme=fields["scheme"],
            host=fields["host"],
            headers=tuple((str(name), str(value)) for name, value in fields["headers"]),
        )
    if kind == "tcpSocket":
        return TcpSocketAction(port=int(fields["port"]), host=fields["host"])
    if kind == "exec":
        return ExecAction(command=tuple(fields["command"]))
    raise ValueError(f"unknown probe action {kind!r}")
