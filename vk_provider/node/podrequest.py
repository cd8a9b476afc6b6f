"""Turn an API pod into the provider's PodRequest, resolving every container's environment first.

The provider never sees the raw API object's variable references: envFrom, ConfigMap and Secret keys,
`$(VAR)` expansion, service links and the downward API are resolved here, with the kubelet's event
reasons for what is missing. So are the files of ConfigMap, Secret and projected volumes
(`volume_files`). A mandatory reference that is missing stops the pod before the provider is called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from vk_provider.environment import (
    EnvironmentEvent,
    ReferenceReader,
    TokenIssuer,
    expand,
    resolve_container_environment,
    resolve_volume_files,
)
from vk_provider.provider import (
    ContainerPort,
    ContainerSpec,
    ExecAction,
    HttpGetAction,
    PodRef,
    PodRequest,
    Probe,
    RestartPolicy,
    TcpSocketAction,
)

RawObject = dict[str, Any]


class InvalidPodSpecError(ValueError):
    """The pod asks for something this node cannot express (e.g. a named port no container declares)."""


def pod_ref(pod: Mapping[str, Any]) -> PodRef:
    metadata = pod["metadata"]
    return PodRef(namespace=metadata["namespace"], name=metadata["name"], uid=metadata["uid"])


def _resolve_port(port: int | str, ports: Sequence[ContainerPort], where: str) -> int:
    if isinstance(port, int):
        return port
    if port.isdigit():
        return int(port)
    for candidate in ports:
        if candidate.name == port:
            return candidate.container_port
    raise InvalidPodSpecError(f"{where}: no container port is named {port!r}")


def _probe(raw: Mapping[str, Any] | None, ports: Sequence[ContainerPort], where: str) -> Probe | None:
    if not raw:
        return None
    action: HttpGetAction | TcpSocketAction | ExecAction
    if "httpGet" in raw:
        http = raw["httpGet"]
        action = HttpGetAction(
            port=_resolve_port(http["port"], ports, where),
            path=http.get("path", "/"),
            scheme=http.get("scheme", "HTTP"),
            host=http.get("host"),
            headers=tuple((header["name"], header["value"]) for header in http.get("httpHeaders", [])),
        )
    elif "tcpSocket" in raw:
        tcp = raw["tcpSocket"]
        action = TcpSocketAction(port=_resolve_port(tcp["port"], ports, where), host=tcp.get("host"))
    elif "exec" in raw:
        action = ExecAction(command=tuple(raw["exec"].get("command", [])))
    else:
        raise InvalidPodSpecError(f"{where}: only httpGet, tcpSocket and exec probes are supported")
    return Probe(
        action=action,
        initial_delay_seconds=float(raw.get("initialDelaySeconds", 0)),
        period_seconds=float(raw.get("periodSeconds", 10)),
        timeout_seconds=float(raw.get("timeoutSeconds", 1)),
        success_threshold=int(raw.get("successThreshold", 1)),
        failure_threshold=int(raw.get("failureThreshold", 3)),
    )


async def _container(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    reader: ReferenceReader,
    pod_ip: str,
    host_ip: str,
    node_allocatable: Mapping[str, str],
    events: list[EnvironmentEvent],
) -> ContainerSpec:
    name = container["name"]
    resolved = await resolve_container_environment(
        pod, container, reader=reader, pod_ip=pod_ip, host_ip=host_ip, node_allocatable=node_allocatable
    )
    events.extend(resolved.events)
    variables = dict(resolved.variables)
    ports = tuple(
        ContainerPort(
            container_port=int(port["containerPort"]),
            name=port.get("name"),
            protocol=port.get("protocol", "TCP"),
        )
        for port in container.get("ports", [])
    )
    where = f"container {name!r}"
    resources = container.get("resources", {})
    return ContainerSpec(
        name=name,
        image=container.get("image", ""),
        # The kubelet expands $(VAR) in command and args with the container's own variables.
        command=tuple(expand(part, variables) for part in container.get("command", [])),
        args=tuple(expand(part, variables) for part in container.get("args", [])),
        env=resolved.variables,
        working_dir=container.get("workingDir"),
        ports=ports,
        requests=dict(resources.get("requests", {})),
        limits=dict(resources.get("limits", {})),
        readiness_probe=_probe(container.get("readinessProbe"), ports, f"{where} readinessProbe"),
        liveness_probe=_probe(container.get("livenessProbe"), ports, f"{where} livenessProbe"),
        startup_probe=_probe(container.get("startupProbe"), ports, f"{where} startupProbe"),
    )


async def build_pod_request(
    pod: Mapping[str, Any],
    *,
    reader: ReferenceReader,
    pod_ip: str,
    host_ip: str,
    node_allocatable: Mapping[str, str],
    tokens: TokenIssuer | None = None,
) -> tuple[PodRequest, list[EnvironmentEvent]]:
    """The request plus the environment events to record (optional references that were missing).
    With `tokens`, projected volumes resolve whole, ServiceAccount tokens included.

    Raises MandatoryReferenceError (nothing may be created: a missing reference of the environment or
    of a volume) or a ValueError for a spec we cannot run.
    """
    spec = pod["spec"]
    events: list[EnvironmentEvent] = []

    async def convert(container: Mapping[str, Any]) -> ContainerSpec:
        return await _container(
            pod,
            container,
            reader=reader,
            pod_ip=pod_ip,
            host_ip=host_ip,
            node_allocatable=node_allocatable,
            events=events,
        )

    containers = [await convert(container) for container in spec.get("containers", [])]
    init_containers = [await convert(container) for container in spec.get("initContainers", [])]
    # After the environment, as the kubelet mounts volumes before it makes containers; a missing
    # mandatory object stops the pod the same way (MandatoryReferenceError, here with FailedMount).
    volume_files = await resolve_volume_files(pod, reader, tokens=tokens)
    metadata = pod["metadata"]
    request = PodRequest(
        ref=pod_ref(pod),
        node_name=spec.get("nodeName", ""),
        containers=tuple(containers),
        init_containers=tuple(init_containers),
        restart_policy=cast(RestartPolicy, spec.get("restartPolicy", "Always")),
        termination_grace_period_seconds=float(spec.get("terminationGracePeriodSeconds", 30)),
        labels=dict(metadata.get("labels") or {}),
        annotations=dict(metadata.get("annotations") or {}),
        raw=pod,
        volume_files=volume_files,
    )
    return request, events
