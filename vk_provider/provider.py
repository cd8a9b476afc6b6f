"""The provider contract: what the virtual node asks of a backend, and what it gets back.

A provider turns pods bound to the virtual node into workloads somewhere else (in memory, local
processes, RunPod, SageMaker, a remote cluster). It sees only the frozen value types below, never
Kubernetes client objects, so providers survive client upgrades and can be written without knowing
the API machinery.

The required surface is `PodLifecycle`. Everything else is an optional capability, detected with
`isinstance` against a runtime-checkable Protocol:

- `SupportsStatusPush`: the provider pushes pod states as they change; without it the node polls
  `get_pod_state`.
- `SupportsPodAddress`: the provider can say a pod's IP before the pod runs, so the downward API
  (`status.podIP`) resolves before creation.
- `SupportsLogs`: container logs for `kubectl logs`.
- `SupportsUsage`: CPU and memory usage for `kubectl top` and the kubelet stats endpoints.
- `SupportsNodeCapacity`: the provider reports what the node should advertise (GPUs, for one).
- `SupportsGpuCatalog`: the provider lists the GPUs it offers now, with prices and availability, for
  placement to choose from.
- `SupportsOfferPlacement`: the provider can be told which of its offers to use for a pod (placement
  by a provider that chooses among others, such as `chain`).
- `SupportsPodPrice`: the provider says what a pod will cost an hour before it is created (a price
  table, configured prices), so that the node's spend ceiling and cost metric count it; without it,
  and without a price on the pod, the pod's price is unknown.
- `SupportsExec`, `SupportsAttach`, `SupportsPortForward`: `kubectl exec` (and `cp`), `kubectl attach`
  and `kubectl port-forward`; the node serves the protocols, the provider only moves bytes.
- `SupportsServiceAccountTokens`: the provider mounts projected volumes whole, ServiceAccount tokens
  included, as a kubelet does; the node then requests the tokens and hands fresh ones before they expire.

Declarations, read with `getattr` (absent means False), say what a provider is rather than what it can
do; the conformance kit sets its expectations by them:

- `ephemeral_workloads = True` (a class attribute): the provider keeps its workloads in its own memory
  (as `mock` does), so a new instance for the same node finds none of them. The kit then skips the
  tests of a node restart instead of failing them (see `declares_ephemeral_workloads`).

A provider that chooses where each pod goes (the `chain`) says what it chose in `PodState.placement`;
the node writes that on the pod (see `vk_provider.kit.placement`).

Rules every provider follows:

1. **Idempotent per pod UID.** `create_pod` for a UID that already exists does nothing (or updates);
   `delete_pod` for an unknown UID succeeds. The node may call either any number of times, including
   after its own crash and restart.
2. **Return fast.** `create_pod` starts the work and returns; progress flows back through pushed or
   polled `PodState`s. Provisioning a GPU can take minutes; the node's queue must not wait for it.
3. **Errors are typed** (`vk_provider.errors`): `TemporaryProviderError` is retried with backoff
   (honouring `retry_after_seconds`), `InvalidPodError` fails the pod with the provider's message,
   `ProviderUnavailableError` from `check_health` marks the provider unavailable on the node.
4. **List what you own.** `list_pods` returns every workload the provider holds for this node, with
   the pod UID, so the node can adopt workloads after a restart and collect orphans.

Providers are found through the `vk_provider.providers` entry-point group: the entry point's value is
a factory `(ProviderContext) -> PodLifecycle`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

ENTRY_POINT_GROUP = "vk_provider.providers"

RestartPolicy = Literal["Always", "OnFailure", "Never"]
PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]


@dataclasses.dataclass(frozen=True, slots=True)
class PodRef:
    """Which pod: namespace and name for people, UID for identity (a recreated pod has a new UID)."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid})"


@dataclasses.dataclass(frozen=True, slots=True)
class HttpGetAction:
    port: int
    path: str = "/"
    scheme: Literal["HTTP", "HTTPS"] = "HTTP"
    host: str | None = None
    """None means the pod's own IP, as for a real kubelet."""
    headers: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class TcpSocketAction:
    port: int
    host: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ExecAction:
    command: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Probe:
    """A container probe with Kubernetes' defaults; named ports are already resolved to numbers."""

    action: HttpGetAction | TcpSocketAction | ExecAction
    initial_delay_seconds: float = 0.0
    period_seconds: float = 10.0
    timeout_seconds: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3


@dataclasses.dataclass(frozen=True, slots=True)
class ContainerPort:
    container_port: int
    name: str | None = None
    protocol: str = "TCP"


@dataclasses.dataclass(frozen=True, slots=True)
class ContainerSpec:
    """One container, with its environment fully resolved (envFrom, references, $(VAR), downward API)."""

    name: str
    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    """Resolved variables in the order Kubernetes defines them; a later duplicate name wins."""
    working_dir: str | None = None
    ports: tuple[ContainerPort, ...] = ()
    requests: Mapping[str, str] = dataclasses.field(default_factory=dict)
    limits: Mapping[str, str] = dataclasses.field(default_factory=dict)
    readiness_probe: Probe | None = None
    liveness_probe: Probe | None = None
    startup_probe: Probe | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class VolumeFile:
    """One file of a ConfigMap, Secret or projected volume, as the kubelet would write it."""

    path: str
    """Relative to the volume's root; may contain `/` (an item's path such as `conf/app.yaml`)."""
    content: bytes = dataclasses.field(repr=False)  # Secret contents must not reach a log by accident
    mode: int = 0o644
    """Permission bits: the item's `mode`, else the volume's `defaultMode`, else 0o644 (the API default)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PodRequest:
    """A pod as the provider should run it."""

    ref: PodRef
    node_name: str
    containers: tuple[ContainerSpec, ...]
    init_containers: tuple[ContainerSpec, ...] = ()
    restart_policy: RestartPolicy = "Always"
    termination_grace_period_seconds: float = 30.0
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The pod as the API returned it (JSON), for what the typed fields do not carry. Read-only."""
    volume_files: Mapping[str, tuple[VolumeFile, ...]] = dataclasses.field(default_factory=dict)
    """The files of the pod's ConfigMap, Secret and projected volumes (of ConfigMaps and Secrets only),
    by volume name, read by the node: a provider that can mount files need not read the home cluster.
    A volume resolved to no files (an optional object that is missing) maps to an empty tuple; a volume
    the node does not resolve (any other kind) is absent."""


class ContainerStateKind(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    TERMINATED = "terminated"


@dataclasses.dataclass(frozen=True, slots=True)
class ContainerTermination:
    exit_code: int
    reason: str | None = None
    message: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ContainerState:
    """One container as the provider sees it; times are timezone-aware UTC."""

    name: str
    image: str
    state: ContainerStateKind
    ready: bool = False
    started: bool = False
    restart_count: int = 0
    reason: str | None = None
    """For WAITING (e.g. ContainerCreating, CrashLoopBackOff) and TERMINATED (e.g. Completed, Error); for
    a RUNNING container that is not ready, the stage it is in (e.g. LoadingModel), which the node shows in
    the pod's ContainersReady and Ready conditions."""
    message: str | None = None
    started_at: datetime | None = None
    termination: ContainerTermination | None = None
    """Set when state is TERMINATED."""
    last_termination: ContainerTermination | None = None
    """The previous run's end, after a restart."""
    container_id: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Placement:
    """Where a provider that chooses among backends put a pod, and the list price it chose."""

    provider: str
    """The backend that holds the pod (for the `chain`, the member's name)."""
    price_per_hour: float | None = None
    """USD per hour for the whole pod at list price; None when no price was known at placement."""
    gpu_type: str | None = None
    """The backend's own id of the GPU type; None when the backend chose by its own defaults."""
    gpu_count: int = 0
    tier: str | None = None
    """The backend's pricing tier or cloud (e.g. RunPod's SECURE or COMMUNITY), if it has tiers."""
    locations: tuple[str, ...] = ()
    """The locations the pod was allowed in, in order of preference (the backend picks one); empty when
    the backend chose freely."""


@dataclasses.dataclass(frozen=True, slots=True)
class PodState:
    """What the provider knows of one pod. The node turns it into a full Kubernetes pod status."""

    ref: PodRef
    phase: PodPhase
    containers: tuple[ContainerState, ...] = ()
    init_containers: tuple[ContainerState, ...] = ()
    pod_ip: str | None = None
    started_at: datetime | None = None
    reason: str | None = None
    message: str | None = None
    traffic_address: str | None = None
    """Where the router should send this pod's traffic, e.g. http://127.0.0.5:8080 or an HTTPS URL."""
    traffic_auth: str | None = None
    """How the router must authenticate requests to `traffic_address`, None for plain requests: a
    marker `vk_provider.kit.traffic_auth` reads, e.g. `AwsSigV4(region="eu-west-1").marker()`."""
    terminated: bool = False
    """True once a deleted pod has fully stopped: the node may then remove the API object."""
    placement: Placement | None = None
    """Set by providers that choose where a pod goes (the `chain`); None from every other provider, and
    for pods whose placement this instance has not seen (e.g. adopted after a restart)."""


@dataclasses.dataclass(frozen=True, slots=True)
class LogOptions:
    """The kubelet's log options, already validated."""

    follow: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    previous: bool = False
    since_time: datetime | None = None
    """since_seconds is turned into since_time by the caller."""
    timestamps: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ContainerUsage:
    name: str
    cpu_usage_core_nanoseconds: int
    """Cumulative CPU time, as the kubelet reports it."""
    memory_working_set_bytes: int
    timestamp: datetime


PodEventSink = Callable[[PodRef, Literal["Normal", "Warning"], str, str], None]
"""(pod, event type, reason, message): posts an Event on the pod."""


class PodEvents:
    """Where a provider tells a pod's story as Events, for what the pod's status cannot say: a GPU type
    that refused for capacity and the one tried next, say. The node connects it to its event recorder
    once that exists (after the provider is built); until then, and without a node (tests, the CLI),
    an event is only kept in `recorded`."""

    KEPT = 100

    def __init__(self) -> None:
        self._sink: PodEventSink | None = None
        self.recorded: list[tuple[PodRef, str, str, str]] = []
        """The last events recorded (at most `KEPT`), for tests."""

    def connect(self, sink: PodEventSink) -> None:
        self._sink = sink

    def record(self, ref: PodRef, type: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.recorded.append((ref, type, reason, message))
        del self.recorded[: -self.KEPT]
        if self._sink is not None:
            self._sink(ref, type, reason, message)


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderContext:
    """What a provider factory receives."""

    node_name: str
    config: Mapping[str, Any]
    """The provider's own section of the node configuration."""
    host_ip: str
    """The address the node reports (status.hostIP of its pods)."""
    state_dir: Path
    """A folder the provider may keep files in (logs, bookkeeping); it survives daemon restarts."""
    pod_events: PodEvents = dataclasses.field(default_factory=PodEvents, compare=False, repr=False)
    """Events on pods, posted by the node (see `PodEvents`); not part of what a context is (equality)."""


EPHEMERAL_WORKLOADS_ATTRIBUTE = "ephemeral_workloads"


def declares_ephemeral_workloads(provider: object) -> bool:
    """Whether the provider declares that its workloads live in its own memory (only `True` counts, so a
    stray truthy value from an unrelated attribute is not taken for a declaration)."""
    return getattr(provider, EPHEMERAL_WORKLOADS_ATTRIBUTE, False) is True


@runtime_checkable
class PodLifecycle(Protocol):
    """The required part of every provider. See the module docstring for the rules."""

    async def create_pod(self, pod: PodRequest) -> None:
        """Start the pod's workload, or do nothing if this UID already has one."""

    async def update_pod(self, pod: PodRequest) -> None:
        """Apply a changed pod (labels, annotations, image) to an existing workload."""

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        """Stop the workload: ask politely, force after the grace period. Unknown UID: succeed."""

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        """The pod's current state, or None if the provider holds nothing for this UID."""

    async def list_pods(self) -> Sequence[PodState]:
        """Every workload the provider holds for this node."""

    async def check_health(self) -> None:
        """Return if the provider can take work; raise ProviderUnavailableError otherwise."""

    async def aclose(self) -> None:
        """Release clients and background tasks. Workloads keep running."""


@runtime_checkable
class SupportsStatusPush(Protocol):
    def watch_states(self) -> AsyncIterator[PodState]:
        """Yield each pod's state whenever it changes, for as long as the provider is open."""


@runtime_checkable
class SupportsPodAddress(Protocol):
    async def pod_address(self, ref: PodRef) -> str:
        """The IP the pod will have, reserved for this UID (the same answer every time)."""


@runtime_checkable
class SupportsLogs(Protocol):
    def stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        """The container's log as the kubelet would serve it; raises NotFoundError if unknown."""


@runtime_checkable
class SupportsUsage(Protocol):
    async def usage(self, ref: PodRef) -> Sequence[ContainerUsage]:
        """Current usage of each running container of the pod."""


@runtime_checkable
class SupportsServiceAccountTokens(Protocol):
    """A provider that mounts a pod's projected volumes whole, its ServiceAccount token among them.

    When `mounts_service_account_tokens()` says so (it may depend on the provider's settings), the node
    resolves every source of the pod's projected volumes into `PodRequest.volume_files`: ConfigMaps and
    Secrets as always, the downward API's `fieldRef` items, and `serviceAccountToken` sources as bound
    tokens from the TokenRequest API (bound to the pod, for its ServiceAccount, with the source's
    audience and lifetime). Before a token has lived 80% of its lifetime the node requests a new one and
    hands the pod's files again through `update_volume_files`, as the kubelet rotates projected tokens.
    The node's identity then needs `create` on `serviceaccounts/token`."""

    def mounts_service_account_tokens(self) -> bool:
        """True when the node should resolve and rotate ServiceAccount tokens for this provider."""

    async def update_volume_files(
        self, ref: PodRef, volume_files: Mapping[str, tuple[VolumeFile, ...]]
    ) -> None:
        """Replace the files of the pod's volumes (each volume whole, atomically for its readers)."""


@runtime_checkable
class SupportsHealthNote(Protocol):
    def health_note(self) -> str:
        """After a health check that passed: what the node's ProviderAvailable=True condition should say
        besides (e.g. a chain's member that refuses all work while the others take pods); "" for nothing."""


@runtime_checkable
class SupportsNodeCapacity(Protocol):
    async def node_capacity(self) -> Mapping[str, str]:
        """Resources to advertise, e.g. {"nvidia.com/gpu": "8"}; merged over the configured capacity."""


Availability = Literal["none", "low", "medium", "high"]
"""How much of an offer is in stock, on the coarse scale providers publish."""


@dataclasses.dataclass(frozen=True, slots=True)
class LocationAvailability:
    """An offer's stock in one place the provider can put a pod (a data center, region or zone)."""

    location: str
    """The provider's id for the place, as a pod would name it."""
    availability: Availability
    name: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class GpuOffer:
    """Pods of `gpu_count` GPUs of one type, in one tier of a provider, at a list price."""

    gpu_type: str
    """The provider's id for the GPU type, as a pod would ask for it."""
    gpu_count: int
    price_per_hour: float
    """USD per hour for all `gpu_count` GPUs (the provider's list price; discounts are not reflected)."""
    display_name: str = ""
    memory_gb: int | None = None
    """Memory of one GPU."""
    tier: str | None = None
    """The provider's pricing tier or cloud (e.g. RunPod's SECURE and COMMUNITY); None if it has one."""
    availability: Availability | None = None
    """Overall stock; None when the provider does not say."""
    locations: tuple[LocationAvailability, ...] = ()
    max_count: int | None = None
    """The most GPUs of this type one pod can have in this tier."""


@dataclasses.dataclass(frozen=True, slots=True)
class PricedPod:
    """What a pod's price can depend on, as the node knows it before the pod is created (its
    environment is not resolved yet, so `PodRequest` is not at hand)."""

    ref: PodRef
    annotations: Mapping[str, str]
    requests: Mapping[str, Fraction]
    """What the pod requests, as the kubelet counts it (its containers, or its largest init container,
    plus overhead), e.g. {"nvidia.com/gpu": Fraction(2), "cpu": Fraction(1, 2), "pods": Fraction(1)}."""


@runtime_checkable
class SupportsPodPrice(Protocol):
    def pod_price_per_hour(self, pod: PricedPod) -> float | None:
        """USD per hour the pod will cost at list price, for the whole pod; None when the provider
        cannot say (an instance type without a price, a resource without a configured price). Pure and
        quick: no call to the backend, since the node asks while it admits pods and meters their cost."""


@runtime_checkable
class SupportsGpuCatalog(Protocol):
    async def gpu_offers(self, *, gpu_count: int = 1) -> Sequence[GpuOffer]:
        """What the provider offers now for pods of `gpu_count` GPUs: types, tiers, prices, stock."""


@runtime_checkable
class SupportsOfferPlacement(Protocol):
    def request_for_offer(
        self,
        pod: PodRequest,
        offer: GpuOffer,
        *,
        locations: Sequence[str] = (),
        max_price_per_hour: float | None = None,
    ) -> PodRequest:
        """`pod` as this provider must receive it in `create_pod` (and `update_pod`) to run it on `offer`,
        one of its own `gpu_offers`: in one of `locations` (in that order) when any are given, refusing to
        pay more than `max_price_per_hour` when set. Pure: no call to the backend."""


@dataclasses.dataclass(frozen=True, slots=True)
class TerminalSize:
    width: int
    """Columns."""
    height: int
    """Rows."""


ByteSink = Callable[[bytes], Awaitable[None]]
"""Where output goes: returns once the bytes are on their way (so a slow client slows the producer);
raises ConnectionError once the client has gone."""


@dataclasses.dataclass(frozen=True, slots=True)
class ContainerStreams:
    """The streams of an exec or attach, as the client asked for them; None where it asked for none."""

    stdin: AsyncIterator[bytes] | None = None
    """Ends when the client closes its input (EOF for the process)."""
    stdout: ByteSink | None = None
    stderr: ByteSink | None = None
    """Always None with a tty: the terminal mixes both into stdout."""
    tty: bool = False
    resize: AsyncIterator[TerminalSize] | None = None
    """With a tty: the terminal's size, first its initial one, then each change."""


@runtime_checkable
class SupportsExec(Protocol):
    async def exec_in_container(
        self, ref: PodRef, container: str, command: Sequence[str], streams: ContainerStreams
    ) -> int:
        """Run `command` in the container with these streams and return its exit code once it has ended
        and its output has been written. Cancelled when the client leaves: then end the process and
        release everything. NotFoundError for an unknown pod or container, ProviderError (with a message
        for people) when the command cannot be run."""


@runtime_checkable
class SupportsAttach(Protocol):
    async def attach_to_container(self, ref: PodRef, container: str, streams: ContainerStreams) -> None:
        """Connect the streams to the container's running process (its stdin, if it was started with
        one, and its output from now on); return when the process ends. Cancelled when the client
        leaves: detach, leaving the process running."""


@runtime_checkable
class SupportsPortForward(Protocol):
    async def port_forward(
        self, ref: PodRef, port: int, incoming: AsyncIterator[bytes], send: ByteSink
    ) -> None:
        """Connect to `port` of the pod and copy both ways: `incoming` to the port (its end closes our
        side for writing), what the port answers to `send`; return when both directions are done.
        ProviderError (with a message for people) if the port cannot be reached."""


ProviderFactory = Callable[[ProviderContext], PodLifecycle]
