"""The provider contract's values as plugin API messages, and back.

Both directions are total over what the contract allows: a value sent and received again is equal to
itself (the tests check every type). Reading a message checks what protobuf cannot (a phase, a restart
policy, a container state kind from the closed sets): `MessageError` says which field was wrong, so the
node can blame the plugin and the plugin can refuse the request, each with a clear message.

`PodRequest.raw` (the pod as the API returned it) is not sent: plugins get plain values, never
Kubernetes objects.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, cast, get_args

from google.protobuf import timestamp_pb2
from google.protobuf.message import Message

from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import (
    Availability,
    ContainerPort,
    ContainerSpec,
    ContainerState,
    ContainerStateKind,
    ContainerTermination,
    ContainerUsage,
    ExecAction,
    GpuOffer,
    HttpGetAction,
    LocationAvailability,
    LogOptions,
    Placement,
    PodPhase,
    PodRef,
    PodRequest,
    PodState,
    Probe,
    RestartPolicy,
    TcpSocketAction,
    VolumeFile,
)

HttpScheme = Literal["HTTP", "HTTPS"]


class MessageError(ValueError):
    """A message that no contract value corresponds to; the text names the field."""


def _choice(value: str, allowed: object, field: str) -> str:
    choices = get_args(allowed)
    if value not in choices:
        raise MessageError(f"{field} is {value!r}, not one of {', '.join(choices)}")
    return value


def _optional(message: Message, field: str) -> str | None:
    return cast(str, getattr(message, field)) if message.HasField(field) else None


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value if value.tzinfo else value.replace(tzinfo=UTC))
    return stamp


def _time(message: Message, field: str) -> datetime | None:
    if not message.HasField(field):
        return None
    stamp: timestamp_pb2.Timestamp = getattr(message, field)
    return stamp.ToDatetime(tzinfo=UTC)


# --- References, probes, containers --------------------------------------------------------------


def ref_message(ref: PodRef) -> pb.PodRef:
    return pb.PodRef(namespace=ref.namespace, name=ref.name, uid=ref.uid)


def ref_value(message: pb.PodRef) -> PodRef:
    if not message.uid:
        raise MessageError("the pod reference has no uid")
    return PodRef(message.namespace, message.name, message.uid)


def probe_message(probe: Probe | None) -> pb.Probe | None:
    if probe is None:
        return None
    message = pb.Probe(
        initial_delay_seconds=probe.initial_delay_seconds,
        period_seconds=probe.period_seconds,
        timeout_seconds=probe.timeout_seconds,
        success_threshold=probe.success_threshold,
        failure_threshold=probe.failure_threshold,
    )
    action = probe.action
    if isinstance(action, HttpGetAction):
        message.http_get.CopyFrom(
            pb.HttpGetAction(
                port=action.port,
                path=action.path,
                scheme=action.scheme,
                host=action.host,
                headers=[pb.Header(name=name, value=value) for name, value in action.headers],
            )
        )
    elif isinstance(action, TcpSocketAction):
        message.tcp_socket.CopyFrom(pb.TcpSocketAction(port=action.port, host=action.host))
    else:
        message.exec.CopyFrom(pb.ExecAction(command=list(action.command)))
    return message


def probe_value(message: pb.Probe) -> Probe:
    which = message.WhichOneof("action")
    action: HttpGetAction | TcpSocketAction | ExecAction
    if which == "http_get":
        http = message.http_get
        scheme = _choice(http.scheme or "HTTP", HttpScheme, "a probe's scheme")
        action = HttpGetAction(
            port=http.port,
            path=http.path or "/",
            scheme=cast(HttpScheme, scheme),
            host=_optional(http, "host"),
            headers=tuple((header.name, header.value) for header in http.headers),
        )
    elif which == "tcp_socket":
        action = TcpSocketAction(port=message.tcp_socket.port, host=_optional(message.tcp_socket, "host"))
    elif which == "exec":
        action = ExecAction(command=tuple(message.exec.command))
    else:
        raise MessageError("a probe has no action")
    return Probe(
        action=action,
        initial_delay_seconds=message.initial_delay_seconds,
        period_seconds=message.period_seconds,
        timeout_seconds=message.timeout_seconds,
        success_threshold=message.success_threshold,
        failure_threshold=message.failure_threshold,
    )


def container_message(container: ContainerSpec) -> pb.ContainerSpec:
    return pb.ContainerSpec(
        name=container.name,
        image=container.image,
        command=list(container.command),
        args=list(container.args),
        env=[pb.EnvVar(name=name, value=value) for name, value in container.env],
        working_dir=container.working_dir,
        ports=[
            pb.ContainerPort(container_port=port.container_port, name=port.name, protocol=port.protocol)
            for port in container.ports
        ],
        requests=dict(container.requests),
        limits=dict(container.limits),
        readiness_probe=probe_message(container.readiness_probe),
        liveness_probe=probe_message(container.liveness_probe),
        startup_probe=probe_message(container.startup_probe),
    )


def _probe_field(message: pb.ContainerSpec, field: str) -> Probe | None:
    return probe_value(getattr(message, field)) if message.HasField(field) else None


def container_value(message: pb.ContainerSpec) -> ContainerSpec:
    return ContainerSpec(
        name=message.name,
        image=message.image,
        command=tuple(message.command),
        args=tuple(message.args),
        env=tuple((variable.name, variable.value) for variable in message.env),
        working_dir=_optional(message, "working_dir"),
        ports=tuple(
            ContainerPort(port.container_port, _optional(port, "name"), port.protocol or "TCP")
            for port in message.ports
        ),
        requests=dict(message.requests),
        limits=dict(message.limits),
        readiness_probe=_probe_field(message, "readiness_probe"),
        liveness_probe=_probe_field(message, "liveness_probe"),
        startup_probe=_probe_field(message, "startup_probe"),
    )


def pod_request_message(pod: PodRequest) -> pb.PodRequest:
    return pb.PodRequest(
        ref=ref_message(pod.ref),
        node_name=pod.node_name,
        containers=[container_message(container) for container in pod.containers],
        init_containers=[container_message(container) for container in pod.init_containers],
        restart_policy=pod.restart_policy,
        termination_grace_period_seconds=pod.termination_grace_period_seconds,
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
        volume_files={
            volume: pb.VolumeFiles(
                files=[pb.VolumeFile(path=item.path, content=item.content, mode=item.mode) for item in files]
            )
            for volume, files in pod.volume_files.items()
        },
    )


def pod_request_value(message: pb.PodRequest) -> PodRequest:
    policy = _choice(message.restart_policy or "Always", RestartPolicy, "restart_policy")
    return PodRequest(
        ref=ref_value(message.ref),
        node_name=message.node_name,
        containers=tuple(container_value(container) for container in message.containers),
        init_containers=tuple(container_value(container) for container in message.init_containers),
        restart_policy=cast(RestartPolicy, policy),
        termination_grace_period_seconds=message.termination_grace_period_seconds,
        labels=dict(message.labels),
        annotations=dict(message.annotations),
        volume_files={
            volume: tuple(VolumeFile(item.path, item.content, item.mode) for item in files.files)
            for volume, files in message.volume_files.items()
        },
    )


# --- States -----------------------------------------------------------------------------------------

_KINDS = {
    ContainerStateKind.WAITING: pb.CONTAINER_STATE_KIND_WAITING,
    ContainerStateKind.RUNNING: pb.CONTAINER_STATE_KIND_RUNNING,
    ContainerStateKind.TERMINATED: pb.CONTAINER_STATE_KIND_TERMINATED,
}
_KIND_VALUES = {number: kind for kind, number in _KINDS.items()}


def termination_message(termination: ContainerTermination | None) -> pb.ContainerTermination | None:
    if termination is None:
        return None
    return pb.ContainerTermination(
        exit_code=termination.exit_code,
        reason=termination.reason,
        message=termination.message,
        started_at=timestamp(termination.started_at),
        finished_at=timestamp(termination.finished_at),
    )


def _termination(message: Message, field: str) -> ContainerTermination | None:
    if not message.HasField(field):
        return None
    termination: pb.ContainerTermination = getattr(message, field)
    return ContainerTermination(
        exit_code=termination.exit_code,
        reason=_optional(termination, "reason"),
        message=_optional(termination, "message"),
        started_at=_time(termination, "started_at"),
        finished_at=_time(termination, "finished_at"),
    )


def container_state_message(state: ContainerState) -> pb.ContainerState:
    return pb.ContainerState(
        name=state.name,
        image=state.image,
        state=_KINDS[state.state],
        ready=state.ready,
        started=state.started,
        restart_count=state.restart_count,
        reason=state.reason,
        message=state.message,
        started_at=timestamp(state.started_at),
        termination=termination_message(state.termination),
        last_termination=termination_message(state.last_termination),
        container_id=state.container_id,
    )


def container_state_value(message: pb.ContainerState) -> ContainerState:
    kind = _KIND_VALUES.get(message.state)
    if kind is None:
        raise MessageError(f"container {message.name!r} has no state kind")
    return ContainerState(
        name=message.name,
        image=message.image,
        state=kind,
        ready=message.ready,
        started=message.started,
        restart_count=message.restart_count,
        reason=_optional(message, "reason"),
        message=_optional(message, "message"),
        started_at=_time(message, "started_at"),
        termination=_termination(message, "termination"),
        last_termination=_termination(message, "last_termination"),
        container_id=message.container_id,
    )


def placement_message(placement: Placement | None) -> pb.Placement | None:
    if placement is None:
        return None
    return pb.Placement(
        provider=placement.provider,
        price_per_hour=placement.price_per_hour,
        gpu_type=placement.gpu_type,
        gpu_count=placement.gpu_count,
        tier=placement.tier,
        locations=list(placement.locations),
    )


def _placement(message: pb.PodState) -> Placement | None:
    if not message.HasField("placement"):
        return None
    placement = message.placement
    return Placement(
        provider=placement.provider,
        price_per_hour=placement.price_per_hour if placement.HasField("price_per_hour") else None,
        gpu_type=_optional(placement, "gpu_type"),
        gpu_count=placement.gpu_count,
        tier=_optional(placement, "tier"),
        locations=tuple(placement.locations),
    )


def pod_state_message(state: PodState) -> pb.PodState:
    return pb.PodState(
        ref=ref_message(state.ref),
        phase=state.phase,
        containers=[container_state_message(container) for container in state.containers],
        init_containers=[container_state_message(container) for container in state.init_containers],
        pod_ip=state.pod_ip,
        started_at=timestamp(state.started_at),
        reason=state.reason,
        message=state.message,
        traffic_address=state.traffic_address,
        traffic_auth=state.traffic_auth,
        terminated=state.terminated,
        placement=placement_message(state.placement),
    )


def pod_state_value(message: pb.PodState) -> PodState:
    phase = _choice(message.phase, PodPhase, f"the phase of pod {message.ref.namespace}/{message.ref.name}")
    return PodState(
        ref=ref_value(message.ref),
        phase=cast(PodPhase, phase),
        containers=tuple(container_state_value(container) for container in message.containers),
        init_containers=tuple(container_state_value(container) for container in message.init_containers),
        pod_ip=_optional(message, "pod_ip"),
        started_at=_time(message, "started_at"),
        reason=_optional(message, "reason"),
        message=_optional(message, "message"),
        traffic_address=_optional(message, "traffic_address"),
        traffic_auth=_optional(message, "traffic_auth"),
        terminated=message.terminated,
        placement=_placement(message),
    )


# --- Logs, usage, capacity, offers ------------------------------------------------------------------


def logs_request_message(ref: PodRef, container: str, options: LogOptions) -> pb.StreamLogsRequest:
    return pb.StreamLogsRequest(
        ref=ref_message(ref),
        container=container,
        follow=options.follow,
        tail_lines=options.tail_lines,
        limit_bytes=options.limit_bytes,
        previous=options.previous,
        since_time=timestamp(options.since_time),
        timestamps=options.timestamps,
    )


def log_options_value(message: pb.StreamLogsRequest) -> LogOptions:
    return LogOptions(
        follow=message.follow,
        tail_lines=message.tail_lines if message.HasField("tail_lines") else None,
        limit_bytes=message.limit_bytes if message.HasField("limit_bytes") else None,
        previous=message.previous,
        since_time=_time(message, "since_time"),
        timestamps=message.timestamps,
    )


def usage_message(usage: ContainerUsage) -> pb.ContainerUsage:
    return pb.ContainerUsage(
        name=usage.name,
        cpu_usage_core_nanoseconds=usage.cpu_usage_core_nanoseconds,
        memory_working_set_bytes=usage.memory_working_set_bytes,
        timestamp=timestamp(usage.timestamp),
    )


def usage_value(message: pb.ContainerUsage) -> ContainerUsage:
    return ContainerUsage(
        name=message.name,
        cpu_usage_core_nanoseconds=message.cpu_usage_core_nanoseconds,
        memory_working_set_bytes=message.memory_working_set_bytes,
        timestamp=_time(message, "timestamp") or datetime.now(UTC),
    )


def offer_message(offer: GpuOffer) -> pb.GpuOffer:
    return pb.GpuOffer(
        gpu_type=offer.gpu_type,
        gpu_count=offer.gpu_count,
        price_per_hour=offer.price_per_hour,
        display_name=offer.display_name,
        memory_gb=offer.memory_gb,
        tier=offer.tier,
        availability=offer.availability,
        locations=[
            pb.LocationAvailability(location=item.location, availability=item.availability, name=item.name)
            for item in offer.locations
        ],
        max_count=offer.max_count,
    )


def offer_value(message: pb.GpuOffer) -> GpuOffer:
    availability = _optional(message, "availability")
    if availability is not None:
        _choice(availability, Availability, f"the availability of {message.gpu_type}")
    return GpuOffer(
        gpu_type=message.gpu_type,
        gpu_count=message.gpu_count,
        price_per_hour=message.price_per_hour,
        display_name=message.display_name,
        memory_gb=message.memory_gb if message.HasField("memory_gb") else None,
        tier=_optional(message, "tier"),
        availability=cast("Availability | None", availability),
        locations=tuple(
            LocationAvailability(
                item.location,
                cast(
                    Availability,
                    _choice(item.availability, Availability, f"the availability in {item.location}"),
                ),
                item.name,
            )
            for item in message.locations
        ),
        max_count=message.max_count if message.HasField("max_count") else None,
    )
