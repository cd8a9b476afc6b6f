import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Capability(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CAPABILITY_UNSPECIFIED: _ClassVar[Capability]
    CAPABILITY_STATUS_PUSH: _ClassVar[Capability]
    CAPABILITY_POD_ADDRESS: _ClassVar[Capability]
    CAPABILITY_LOGS: _ClassVar[Capability]
    CAPABILITY_USAGE: _ClassVar[Capability]
    CAPABILITY_NODE_CAPACITY: _ClassVar[Capability]
    CAPABILITY_GPU_CATALOG: _ClassVar[Capability]
    CAPABILITY_EXEC: _ClassVar[Capability]
    CAPABILITY_ATTACH: _ClassVar[Capability]
    CAPABILITY_PORT_FORWARD: _ClassVar[Capability]

class ContainerStateKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTAINER_STATE_KIND_UNSPECIFIED: _ClassVar[ContainerStateKind]
    CONTAINER_STATE_KIND_WAITING: _ClassVar[ContainerStateKind]
    CONTAINER_STATE_KIND_RUNNING: _ClassVar[ContainerStateKind]
    CONTAINER_STATE_KIND_TERMINATED: _ClassVar[ContainerStateKind]
CAPABILITY_UNSPECIFIED: Capability
CAPABILITY_STATUS_PUSH: Capability
CAPABILITY_POD_ADDRESS: Capability
CAPABILITY_LOGS: Capability
CAPABILITY_USAGE: Capability
CAPABILITY_NODE_CAPACITY: Capability
CAPABILITY_GPU_CATALOG: Capability
CAPABILITY_EXEC: Capability
CAPABILITY_ATTACH: Capability
CAPABILITY_PORT_FORWARD: Capability
CONTAINER_STATE_KIND_UNSPECIFIED: ContainerStateKind
CONTAINER_STATE_KIND_WAITING: ContainerStateKind
CONTAINER_STATE_KIND_RUNNING: ContainerStateKind
CONTAINER_STATE_KIND_TERMINATED: ContainerStateKind

class GetPluginInfoRequest(_message.Message):
    __slots__ = ("node_name",)
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    def __init__(self, node_name: _Optional[str] = ...) -> None: ...

class PluginInfo(_message.Message):
    __slots__ = ("name", "version", "api_version", "capabilities")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    api_version: str
    capabilities: _containers.RepeatedScalarFieldContainer[Capability]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., api_version: _Optional[str] = ..., capabilities: _Optional[_Iterable[_Union[Capability, str]]] = ...) -> None: ...

class PodRef(_message.Message):
    __slots__ = ("namespace", "name", "uid")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ...) -> None: ...

class HttpGetAction(_message.Message):
    __slots__ = ("port", "path", "scheme", "host", "headers")
    PORT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SCHEME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    port: int
    path: str
    scheme: str
    host: str
    headers: _containers.RepeatedCompositeFieldContainer[Header]
    def __init__(self, port: _Optional[int] = ..., path: _Optional[str] = ..., scheme: _Optional[str] = ..., host: _Optional[str] = ..., headers: _Optional[_Iterable[_Union[Header, _Mapping]]] = ...) -> None: ...

class Header(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class TcpSocketAction(_message.Message):
    __slots__ = ("port", "host")
    PORT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    port: int
    host: str
    def __init__(self, port: _Optional[int] = ..., host: _Optional[str] = ...) -> None: ...

class ExecAction(_message.Message):
    __slots__ = ("command",)
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    command: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, command: _Optional[_Iterable[str]] = ...) -> None: ...

class Probe(_message.Message):
    __slots__ = ("http_get", "tcp_socket", "exec", "initial_delay_seconds", "period_seconds", "timeout_seconds", "success_threshold", "failure_threshold")
    HTTP_GET_FIELD_NUMBER: _ClassVar[int]
    TCP_SOCKET_FIELD_NUMBER: _ClassVar[int]
    EXEC_FIELD_NUMBER: _ClassVar[int]
    INITIAL_DELAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    FAILURE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    http_get: HttpGetAction
    tcp_socket: TcpSocketAction
    exec: ExecAction
    initial_delay_seconds: float
    period_seconds: float
    timeout_seconds: float
    success_threshold: int
    failure_threshold: int
    def __init__(self, http_get: _Optional[_Union[HttpGetAction, _Mapping]] = ..., tcp_socket: _Optional[_Union[TcpSocketAction, _Mapping]] = ..., exec: _Optional[_Union[ExecAction, _Mapping]] = ..., initial_delay_seconds: _Optional[float] = ..., period_seconds: _Optional[float] = ..., timeout_seconds: _Optional[float] = ..., success_threshold: _Optional[int] = ..., failure_threshold: _Optional[int] = ...) -> None: ...

class ContainerPort(_message.Message):
    __slots__ = ("container_port", "name", "protocol")
    CONTAINER_PORT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    container_port: int
    name: str
    protocol: str
    def __init__(self, container_port: _Optional[int] = ..., name: _Optional[str] = ..., protocol: _Optional[str] = ...) -> None: ...

class EnvVar(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class ContainerSpec(_message.Message):
    __slots__ = ("name", "image", "command", "args", "env", "working_dir", "ports", "requests", "limits", "readiness_probe", "liveness_probe", "startup_probe")
    class RequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class LimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIR_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    READINESS_PROBE_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_PROBE_FIELD_NUMBER: _ClassVar[int]
    STARTUP_PROBE_FIELD_NUMBER: _ClassVar[int]
    name: str
    image: str
    command: _containers.RepeatedScalarFieldContainer[str]
    args: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.RepeatedCompositeFieldContainer[EnvVar]
    working_dir: str
    ports: _containers.RepeatedCompositeFieldContainer[ContainerPort]
    requests: _containers.ScalarMap[str, str]
    limits: _containers.ScalarMap[str, str]
    readiness_probe: Probe
    liveness_probe: Probe
    startup_probe: Probe
    def __init__(self, name: _Optional[str] = ..., image: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Iterable[_Union[EnvVar, _Mapping]]] = ..., working_dir: _Optional[str] = ..., ports: _Optional[_Iterable[_Union[ContainerPort, _Mapping]]] = ..., requests: _Optional[_Mapping[str, str]] = ..., limits: _Optional[_Mapping[str, str]] = ..., readiness_probe: _Optional[_Union[Probe, _Mapping]] = ..., liveness_probe: _Optional[_Union[Probe, _Mapping]] = ..., startup_probe: _Optional[_Union[Probe, _Mapping]] = ...) -> None: ...

class VolumeFile(_message.Message):
    __slots__ = ("path", "content", "mode")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    path: str
    content: bytes
    mode: int
    def __init__(self, path: _Optional[str] = ..., content: _Optional[bytes] = ..., mode: _Optional[int] = ...) -> None: ...

class VolumeFiles(_message.Message):
    __slots__ = ("files",)
    FILES_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[VolumeFile]
    def __init__(self, files: _Optional[_Iterable[_Union[VolumeFile, _Mapping]]] = ...) -> None: ...

class PodRequest(_message.Message):
    __slots__ = ("ref", "node_name", "containers", "init_containers", "restart_policy", "termination_grace_period_seconds", "labels", "annotations", "volume_files")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class VolumeFilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: VolumeFiles
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[VolumeFiles, _Mapping]] = ...) -> None: ...
    REF_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    INIT_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    RESTART_POLICY_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    VOLUME_FILES_FIELD_NUMBER: _ClassVar[int]
    ref: PodRef
    node_name: str
    containers: _containers.RepeatedCompositeFieldContainer[ContainerSpec]
    init_containers: _containers.RepeatedCompositeFieldContainer[ContainerSpec]
    restart_policy: str
    termination_grace_period_seconds: float
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    volume_files: _containers.MessageMap[str, VolumeFiles]
    def __init__(self, ref: _Optional[_Union[PodRef, _Mapping]] = ..., node_name: _Optional[str] = ..., containers: _Optional[_Iterable[_Union[ContainerSpec, _Mapping]]] = ..., init_containers: _Optional[_Iterable[_Union[ContainerSpec, _Mapping]]] = ..., restart_policy: _Optional[str] = ..., termination_grace_period_seconds: _Optional[float] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., volume_files: _Optional[_Mapping[str, VolumeFiles]] = ...) -> None: ...

class ContainerTermination(_message.Message):
    __slots__ = ("exit_code", "reason", "message", "started_at", "finished_at")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    reason: str
    message: str
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    def __init__(self, exit_code: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ContainerState(_message.Message):
    __slots__ = ("name", "image", "state", "ready", "started", "restart_count", "reason", "message", "started_at", "termination", "last_termination", "container_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    RESTART_COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_FIELD_NUMBER: _ClassVar[int]
    LAST_TERMINATION_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    image: str
    state: ContainerStateKind
    ready: bool
    started: bool
    restart_count: int
    reason: str
    message: str
    started_at: _timestamp_pb2.Timestamp
    termination: ContainerTermination
    last_termination: ContainerTermination
    container_id: str
    def __init__(self, name: _Optional[str] = ..., image: _Optional[str] = ..., state: _Optional[_Union[ContainerStateKind, str]] = ..., ready: _Optional[bool] = ..., started: _Optional[bool] = ..., restart_count: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., termination: _Optional[_Union[ContainerTermination, _Mapping]] = ..., last_termination: _Optional[_Union[ContainerTermination, _Mapping]] = ..., container_id: _Optional[str] = ...) -> None: ...

class Placement(_message.Message):
    __slots__ = ("provider", "price_per_hour", "gpu_type", "gpu_count", "tier", "locations")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    PRICE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    provider: str
    price_per_hour: float
    gpu_type: str
    gpu_count: int
    tier: str
    locations: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, provider: _Optional[str] = ..., price_per_hour: _Optional[float] = ..., gpu_type: _Optional[str] = ..., gpu_count: _Optional[int] = ..., tier: _Optional[str] = ..., locations: _Optional[_Iterable[str]] = ...) -> None: ...

class PodState(_message.Message):
    __slots__ = ("ref", "phase", "containers", "init_containers", "pod_ip", "started_at", "reason", "message", "traffic_address", "traffic_auth", "terminated", "placement")
    REF_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    INIT_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    POD_IP_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRAFFIC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TRAFFIC_AUTH_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    ref: PodRef
    phase: str
    containers: _containers.RepeatedCompositeFieldContainer[ContainerState]
    init_containers: _containers.RepeatedCompositeFieldContainer[ContainerState]
    pod_ip: str
    started_at: _timestamp_pb2.Timestamp
    reason: str
    message: str
    traffic_address: str
    traffic_auth: str
    terminated: bool
    placement: Placement
    def __init__(self, ref: _Optional[_Union[PodRef, _Mapping]] = ..., phase: _Optional[str] = ..., containers: _Optional[_Iterable[_Union[ContainerState, _Mapping]]] = ..., init_containers: _Optional[_Iterable[_Union[ContainerState, _Mapping]]] = ..., pod_ip: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., traffic_address: _Optional[str] = ..., traffic_auth: _Optional[str] = ..., terminated: _Optional[bool] = ..., placement: _Optional[_Union[Placement, _Mapping]] = ...) -> None: ...

class CreatePodRequest(_message.Message):
    __slots__ = ("pod",)
    POD_FIELD_NUMBER: _ClassVar[int]
    pod: PodRequest
    def __init__(self, pod: _Optional[_Union[PodRequest, _Mapping]] = ...) -> None: ...

class CreatePodResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UpdatePodRequest(_message.Message):
    __slots__ = ("pod",)
    POD_FIELD_NUMBER: _ClassVar[int]
    pod: PodRequest
    def __init__(self, pod: _Optional[_Union[PodRequest, _Mapping]] = ...) -> None: ...

class UpdatePodResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeletePodRequest(_message.Message):
    __slots__ = ("ref", "grace_period_seconds")
    REF_FIELD_NUMBER: _ClassVar[int]
    GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ref: PodRef
    grace_period_seconds: float
    def __init__(self, ref: _Optional[_Union[PodRef, _Mapping]] = ..., grace_period_seconds: _Optional[float] = ...) -> None: ...

class DeletePodResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPodStateRequest(_message.Message):
    __slots__ = ("ref",)
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: PodRef
    def __init__(self, ref: _Optional[_Union[PodRef, _Mapping]] = ...) -> None: ...

class GetPodStateResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: PodState
    def __init__(self, state: _Optional[_Union[PodState, _Mapping]] = ...) -> None: ...

class ListPodsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPodsResponse(_message.Message):
    __slots__ = ("pods",)
    PODS_FIELD_NUMBER: _ClassVar[int]
    pods: _containers.RepeatedCompositeFieldContainer[PodState]
    def __init__(self, pods: _Optional[_Iterable[_Union[PodState, _Mapping]]] = ...) -> None: ...

class CheckHealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CheckHealthResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchPodStatesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPodAddressRequest(_message.Message):
    __slots__ = ("ref",)
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: PodRef
    def __init__(self, ref: _Optional[_Union[PodRef, _Mapping]] = ...) -> None: ...

class GetPodAddressResponse(_message.Message):
    __slots__ = ("address",)
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    address: str
    def __init__(self, address: _Optional[str] = ...) -> None: ...

class StreamLogsRequest(_message.Message):
    __slots__ = ("ref", "container", "follow", "tail_lines", "limit_bytes", "previous", "since_time", "timestamps")
    REF_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    TAIL_LINES_FIELD_NUMBER: _ClassVar[int]
    LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    SINCE_TIME_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    ref: PodRef
    container: str
    follow: bool
    tail_lines: int
    limit_bytes: int
    previous: bool
    since_time: _timestamp_pb2.Timestamp
    timestamps: bool
    def __init__(self, ref: _Optional[_Union[PodRef, _Mapping]] = ..., container: _Optional[str] = ..., follow: _Optional[bool] = ..., tail_lines: _Optional[int] = ..., limit_bytes: _Optional[int] = ..., previous: _Optional[bool] = ..., since_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., timestamps: _Optional[bool] = ...) -> None: ...

class LogChunk(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class GetUsageRequest(_message.Message):
    __slots__ = ("ref",)
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: PodRef
    def __init__(self, ref: _Optional[_Union[PodRef, _Mapping]] = ...) -> None: ...

class ContainerUsage(_message.Message):
    __slots__ = ("name", "cpu_usage_core_nanoseconds", "memory_working_set_bytes", "timestamp")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CPU_USAGE_CORE_NANOSECONDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_WORKING_SET_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    name: str
    cpu_usage_core_nanoseconds: int
    memory_working_set_bytes: int
    timestamp: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., cpu_usage_core_nanoseconds: _Optional[int] = ..., memory_working_set_bytes: _Optional[int] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetUsageResponse(_message.Message):
    __slots__ = ("containers",)
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    containers: _containers.RepeatedCompositeFieldContainer[ContainerUsage]
    def __init__(self, containers: _Optional[_Iterable[_Union[ContainerUsage, _Mapping]]] = ...) -> None: ...

class GetNodeCapacityRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetNodeCapacityResponse(_message.Message):
    __slots__ = ("capacity",)
    class CapacityEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    capacity: _containers.ScalarMap[str, str]
    def __init__(self, capacity: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListGpuOffersRequest(_message.Message):
    __slots__ = ("gpu_count",)
    GPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    gpu_count: int
    def __init__(self, gpu_count: _Optional[int] = ...) -> None: ...

class LocationAvailability(_message.Message):
    __slots__ = ("location", "availability", "name")
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    AVAILABILITY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    location: str
    availability: str
    name: str
    def __init__(self, location: _Optional[str] = ..., availability: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class GpuOffer(_message.Message):
    __slots__ = ("gpu_type", "gpu_count", "price_per_hour", "display_name", "memory_gb", "tier", "availability", "locations", "max_count")
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    PRICE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    AVAILABILITY_FIELD_NUMBER: _ClassVar[int]
    LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_COUNT_FIELD_NUMBER: _ClassVar[int]
    gpu_type: str
    gpu_count: int
    price_per_hour: float
    display_name: str
    memory_gb: int
    tier: str
    availability: str
    locations: _containers.RepeatedCompositeFieldContainer[LocationAvailability]
    max_count: int
    def __init__(self, gpu_type: _Optional[str] = ..., gpu_count: _Optional[int] = ..., price_per_hour: _Optional[float] = ..., display_name: _Optional[str] = ..., memory_gb: _Optional[int] = ..., tier: _Optional[str] = ..., availability: _Optional[str] = ..., locations: _Optional[_Iterable[_Union[LocationAvailability, _Mapping]]] = ..., max_count: _Optional[int] = ...) -> None: ...

class ListGpuOffersResponse(_message.Message):
    __slots__ = ("offers",)
    OFFERS_FIELD_NUMBER: _ClassVar[int]
    offers: _containers.RepeatedCompositeFieldContainer[GpuOffer]
    def __init__(self, offers: _Optional[_Iterable[_Union[GpuOffer, _Mapping]]] = ...) -> None: ...

class ContainerStreamStart(_message.Message):
    __slots__ = ("ref", "container", "command", "stdin", "stdout", "stderr", "tty")
    REF_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    ref: PodRef
    container: str
    command: _containers.RepeatedScalarFieldContainer[str]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool
    def __init__(self, ref: _Optional[_Union[PodRef, _Mapping]] = ..., container: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., stdin: _Optional[bool] = ..., stdout: _Optional[bool] = ..., stderr: _Optional[bool] = ..., tty: _Optional[bool] = ...) -> None: ...

class TerminalSize(_message.Message):
    __slots__ = ("width", "height")
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    width: int
    height: int
    def __init__(self, width: _Optional[int] = ..., height: _Optional[int] = ...) -> None: ...

class ContainerInput(_message.Message):
    __slots__ = ("start", "stdin", "stdin_closed", "resize")
    START_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    STDIN_CLOSED_FIELD_NUMBER: _ClassVar[int]
    RESIZE_FIELD_NUMBER: _ClassVar[int]
    start: ContainerStreamStart
    stdin: bytes
    stdin_closed: bool
    resize: TerminalSize
    def __init__(self, start: _Optional[_Union[ContainerStreamStart, _Mapping]] = ..., stdin: _Optional[bytes] = ..., stdin_closed: _Optional[bool] = ..., resize: _Optional[_Union[TerminalSize, _Mapping]] = ...) -> None: ...

class ContainerOutput(_message.Message):
    __slots__ = ("stdout", "stderr", "exit_code", "ended")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    stdout: bytes
    stderr: bytes
    exit_code: int
    ended: bool
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., exit_code: _Optional[int] = ..., ended: _Optional[bool] = ...) -> None: ...

class PortForwardStart(_message.Message):
    __slots__ = ("ref", "port")
    REF_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ref: PodRef
    port: int
    def __init__(self, ref: _Optional[_Union[PodRef, _Mapping]] = ..., port: _Optional[int] = ...) -> None: ...

class PortForwardInput(_message.Message):
    __slots__ = ("start", "data", "close_write")
    START_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CLOSE_WRITE_FIELD_NUMBER: _ClassVar[int]
    start: PortForwardStart
    data: bytes
    close_write: bool
    def __init__(self, start: _Optional[_Union[PortForwardStart, _Mapping]] = ..., data: _Optional[bytes] = ..., close_write: _Optional[bool] = ...) -> None: ...

class PortForwardOutput(_message.Message):
    __slots__ = ("data", "closed")
    DATA_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    closed: bool
    def __init__(self, data: _Optional[bytes] = ..., closed: _Optional[bool] = ...) -> None: ...
