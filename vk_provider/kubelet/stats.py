"""Resource usage of the virtual node's pods, in the two shapes the kubelet serves it.

- `GET /stats/summary`: the `stats/v1alpha1` Summary JSON (older metrics-servers, `kubectl get
  --raw`, monitoring agents);
- `GET /metrics/resource`: the Prometheus resource metrics that metrics-server reads for `kubectl top`
  and the HorizontalPodAutoscaler.

Both are built from one sampling pass: pods bound to the node (from the daemon's watch cache) give
identity and start times, the provider's `usage` gives per-container cumulative CPU and working set.
A provider only knows the working set, so `usageBytes` repeats it, and node totals are sums over pods
(there is no host under a virtual node to measure).

`usageNanoCores` is a rate, which a cumulative counter cannot give from one sample. As the kubelet's
CRI stats provider does, each Summary request keeps the sample of every container and computes the
rate against the previous request's sample; on the first request for a container (or after its counter
went backwards, i.e. it restarted) there is no rate and `usageNanoCores` is omitted. A pod's or the
node's rate is a sum, given only when every part has one: a partial sum would understate the usage.

The resource metrics are written by hand rather than with prometheus-client: series need explicit
timestamps (the time of the sample, as the kubelet gives), labels go in the order namespace, pod,
container, and numbers are formatted as Go's text encoder formats them, so the output matches a
kubelet's byte for byte apart from that label order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from vk_provider.errors import NotFoundError
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.provider import ContainerUsage, PodRef

logger = logging.getLogger(__name__)

RESOURCE_METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_CONCURRENT_USAGE_CALLS = 16
"""Usage calls to a remote provider are slow; a few at once keep a scrape short without flooding it."""

PodUsage = Callable[[PodRef], Awaitable[Sequence[ContainerUsage]]]
"""Current usage of each running container of a pod (`SupportsUsage.usage`); NotFoundError if none."""

_FINISHED_PHASES = ("Succeeded", "Failed")
_NANOSECONDS_PER_SECOND = 1_000_000_000


@dataclasses.dataclass(frozen=True, slots=True)
class ContainerSample:
    name: str
    started_at: datetime | None
    cpu_core_nanoseconds: int
    memory_working_set_bytes: int
    time: datetime


@dataclasses.dataclass(frozen=True, slots=True)
class PodSample:
    ref: PodRef
    started_at: datetime | None
    containers: tuple[ContainerSample, ...]
    failed: bool = False
    """The provider's usage call failed: the pod's usage is unknown (not zero)."""


# Sampling


async def sample_pods(usage: PodUsage, bound_pods: Iterable[Mapping[str, Any]]) -> list[PodSample]:
    """The usage of every unfinished bound pod the provider holds, ordered by namespace and name."""
    limit = asyncio.Semaphore(MAX_CONCURRENT_USAGE_CALLS)

    async def sample(ref: PodRef, pod: Mapping[str, Any]) -> PodSample | None:
        async with limit:
            return await _sample_pod(usage, ref, pod)

    candidates = [(_pod_ref(pod), pod) for pod in bound_pods if _is_unfinished(pod)]
    samples = await asyncio.gather(*(sample(ref, pod) for ref, pod in candidates if ref is not None))
    found = [sample for sample in samples if sample is not None]
    return sorted(found, key=lambda sample: (sample.ref.namespace, sample.ref.name))


async def _sample_pod(usage: PodUsage, ref: PodRef, pod: Mapping[str, Any]) -> PodSample | None:
    status = pod.get("status") or {}
    started_at = _api_time(status.get("startTime"))
    try:
        containers_usage = await usage(ref)
    except NotFoundError:
        return None  # not (or no longer) running at the provider: nothing to report, and no error
    except Exception:
        logger.warning("usage of pod %s could not be read", ref, exc_info=True)
        return PodSample(ref=ref, started_at=started_at, containers=(), failed=True)
    container_starts = _container_start_times(status)
    containers = tuple(_container_sample(item, container_starts.get(item.name)) for item in containers_usage)
    return PodSample(ref=ref, started_at=started_at, containers=containers)


def _container_sample(usage: ContainerUsage, started_at: datetime | None) -> ContainerSample:
    return ContainerSample(
        name=usage.name,
        started_at=started_at,
        cpu_core_nanoseconds=usage.cpu_usage_core_nanoseconds,
        memory_working_set_bytes=usage.memory_working_set_bytes,
        time=_utc(usage.timestamp),
    )


def _pod_ref(pod: Mapping[str, Any]) -> PodRef | None:
    metadata = pod.get("metadata") or {}
    namespace, name, uid = metadata.get("namespace"), metadata.get("name"), metadata.get("uid")
    if not (namespace and name and uid):
        return None
    return PodRef(namespace=str(namespace), name=str(name), uid=str(uid))


def _is_unfinished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in _FINISHED_PHASES


def _container_start_times(status: Mapping[str, Any]) -> dict[str, datetime]:
    """When each running container started, from the statuses the node wrote to the API."""
    starts: dict[str, datetime] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or ():
            started = _api_time(((container.get("state") or {}).get("running") or {}).get("startedAt"))
            if started is not None:
                starts[str(container.get("name"))] = started
    return starts


def _api_time(value: object) -> datetime | None:
    moment = parse_timestamp(value)
    return None if moment is None else moment.astimezone(UTC)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# CPU rates between Summary requests


@dataclasses.dataclass(slots=True)
class _CpuSample:
    time: datetime
    core_nanoseconds: int
    nano_cores: int | None


class CpuRateCache:
    """The previous CPU sample of each container, keyed by (pod UID, container name)."""

    def __init__(self) -> None:
        self._samples: dict[tuple[str, str], _CpuSample] = {}

    def nano_cores(self, key: tuple[str, str], time: datetime, core_nanoseconds: int) -> int | None:
        """The usage rate since the previous sample of `key`, or None when there is none to compare."""
        previous = self._samples.get(key)
        if previous is not None and time <= previous.time:
            return previous.nano_cores  # not a newer sample (the provider caches): answer as last time
        rate = None if previous is None else _rate(previous, time, core_nanoseconds)
        self._samples[key] = _CpuSample(time=time, core_nanoseconds=core_nanoseconds, nano_cores=rate)
        return rate

    def keep_only(self, keys: set[tuple[str, str]]) -> None:
        """Forget containers that are gone, so the cache does not grow with every pod ever run."""
        for key in self._samples.keys() - keys:
            del self._samples[key]


def _rate(previous: _CpuSample, time: datetime, core_nanoseconds: int) -> int | None:
    if core_nanoseconds < previous.core_nanoseconds:
        return None  # the counter restarted with the container: no rate until the next sample
    elapsed_microseconds = (time - previous.time) // _ONE_MICROSECOND
    used = core_nanoseconds - previous.core_nanoseconds
    return used * 1_000_000 // elapsed_microseconds


# Summary


def build_summary(
    *,
    node_name: str,
    node_started_at: datetime,
    samples: Sequence[PodSample],
    rates: CpuRateCache,
    now: datetime,
) -> dict[str, Any]:
    """The stats/v1alpha1 Summary, with CPU and memory only (a virtual node has no host to measure)."""
    pods = [_pod_summary(sample, rates) for sample in samples]
    rates.keep_only(
        {(sample.ref.uid, container.name) for sample in samples for container in sample.containers}
    )
    measured = [pod for pod in pods if "cpu" in pod]
    node: dict[str, Any] = {
        "nodeName": node_name,
        "startTime": _json_time(node_started_at),
        "cpu": _sum_cpu([pod["cpu"] for pod in measured], now),
        "memory": _sum_memory([pod["memory"] for pod in measured], now),
    }
    return {"node": node, "pods": pods}


def _pod_summary(sample: PodSample, rates: CpuRateCache) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "podRef": {"name": sample.ref.name, "namespace": sample.ref.namespace, "uid": sample.ref.uid},
    }
    if sample.started_at is not None:
        summary["startTime"] = _json_time(sample.started_at)
    containers = [_container_summary(sample.ref.uid, container, rates) for container in sample.containers]
    summary["containers"] = containers
    if containers:  # no container usage: the pod's usage is unknown, not zero
        latest = max(container.time for container in sample.containers)
        summary["cpu"] = _sum_cpu([container["cpu"] for container in containers], latest)
        summary["memory"] = _sum_memory([container["memory"] for container in containers], latest)
    return summary


def _container_summary(uid: str, sample: ContainerSample, rates: CpuRateCache) -> dict[str, Any]:
    summary: dict[str, Any] = {"name": sample.name}
    if sample.started_at is not None:
        summary["startTime"] = _json_time(sample.started_at)
    cpu: dict[str, Any] = {"time": _json_time(sample.time)}
    nano_cores = rates.nano_cores((uid, sample.name), sample.time, sample.cpu_core_nanoseconds)
    if nano_cores is not None:
        cpu["usageNanoCores"] = nano_cores
    cpu["usageCoreNanoSeconds"] = sample.cpu_core_nanoseconds
    summary["cpu"] = cpu
    summary["memory"] = _memory(sample.time, sample.memory_working_set_bytes)
    return summary


def _sum_cpu(parts: Sequence[Mapping[str, Any]], time: datetime) -> dict[str, Any]:
    cpu: dict[str, Any] = {"time": _json_time(time)}
    if all("usageNanoCores" in part for part in parts):
        cpu["usageNanoCores"] = sum(part["usageNanoCores"] for part in parts)
    cpu["usageCoreNanoSeconds"] = sum(part["usageCoreNanoSeconds"] for part in parts)
    return cpu


def _sum_memory(parts: Sequence[Mapping[str, Any]], time: datetime) -> dict[str, Any]:
    return _memory(time, sum(part["workingSetBytes"] for part in parts))


def _memory(time: datetime, working_set_bytes: int) -> dict[str, Any]:
    # The working set is all a provider reports; usage is at least that, and the kubelet's own
    # usageBytes differs from it only by inactive file pages, which a remote workload does not expose.
    return {"time": _json_time(time), "usageBytes": working_set_bytes, "workingSetBytes": working_set_bytes}


def _json_time(moment: datetime) -> str:
    """As metav1.Time serialises: RFC 3339 in UTC, to the second."""
    return _utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


# Resource metrics


@dataclasses.dataclass(frozen=True, slots=True)
class _Family:
    name: str
    kind: str
    help: str


_CONTAINER_CPU = _Family(
    "container_cpu_usage_seconds_total",
    "counter",
    "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
)
_CONTAINER_MEMORY = _Family(
    "container_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the container in bytes"
)
_CONTAINER_START = _Family(
    "container_start_time_seconds",
    "gauge",
    "[STABLE] Start time of the container since unix epoch in seconds",
)
_NODE_CPU = _Family(
    "node_cpu_usage_seconds_total",
    "counter",
    "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
)
_NODE_MEMORY = _Family(
    "node_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the node in bytes"
)
_POD_CPU = _Family(
    "pod_cpu_usage_seconds_total",
    "counter",
    "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
)
_POD_MEMORY = _Family(
    "pod_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the pod in bytes"
)
_SCRAPE_ERROR_HELP = "1 if there was an error while getting container metrics, 0 otherwise"
_RESOURCE_SCRAPE_ERROR = _Family("resource_scrape_error", "gauge", f"[STABLE] {_SCRAPE_ERROR_HELP}")
_SCRAPE_ERROR = _Family("scrape_error", "gauge", f"[ALPHA] {_SCRAPE_ERROR_HELP}")
"""The older name, which metrics-server before 0.7 reads; newer kubelets serve both."""

_Labels = tuple[tuple[str, str], ...]
_Series = tuple[_Labels, float, datetime | None]


def render_resource_metrics(samples: Sequence[PodSample], now: datetime) -> str:
    """The kubelet's /metrics/resource text; a pod whose usage call failed sets the scrape error instead."""
    measured = [sample for sample in samples if not sample.failed and sample.containers]
    containers = [(pod, container) for pod in measured for container in pod.containers]
    node_time = max((container.time for _, container in containers), default=now)
    scrape_error = 1.0 if any(sample.failed for sample in samples) else 0.0
    families: list[tuple[_Family, list[_Series]]] = [
        (_CONTAINER_CPU, [(_labels(p, c), _seconds(c.cpu_core_nanoseconds), c.time) for p, c in containers]),
        (
            _CONTAINER_MEMORY,
            [(_labels(p, c), float(c.memory_working_set_bytes), c.time) for p, c in containers],
        ),
        (_CONTAINER_START, list(_start_times(containers))),
        (_NODE_CPU, [((), _seconds(sum(c.cpu_core_nanoseconds for _, c in containers)), node_time)]),
        (_NODE_MEMORY, [((), float(sum(c.memory_working_set_bytes for _, c in containers)), node_time)]),
        (_POD_CPU, [(_labels(p), _seconds(_pod_cpu(p)), _pod_time(p)) for p in measured]),
        (_POD_MEMORY, [(_labels(p), float(_pod_memory(p)), _pod_time(p)) for p in measured]),
        (_RESOURCE_SCRAPE_ERROR, [((), scrape_error, None)]),
        (_SCRAPE_ERROR, [((), scrape_error, None)]),
    ]
    return "".join(_render_family(family, series) for family, series in families if series)


def _start_times(containers: Sequence[tuple[PodSample, ContainerSample]]) -> Iterator[_Series]:
    for pod, container in containers:
        if container.started_at is not None:
            started = container.started_at
            yield _labels(pod, container), _unix_seconds(started), started


def _labels(pod: PodSample, container: ContainerSample | None = None) -> _Labels:
    labels = (("namespace", pod.ref.namespace), ("pod", pod.ref.name))
    return labels if container is None else (*labels, ("container", container.name))


def _pod_cpu(pod: PodSample) -> int:
    return sum(container.cpu_core_nanoseconds for container in pod.containers)


def _pod_memory(pod: PodSample) -> int:
    return sum(container.memory_working_set_bytes for container in pod.containers)


def _pod_time(pod: PodSample) -> datetime:
    return max(container.time for container in pod.containers)


def _seconds(nanoseconds: int) -> float:
    return float(nanoseconds) / _NANOSECONDS_PER_SECOND  # as the kubelet: float64(ns) / float64(second)


def _unix_seconds(moment: datetime) -> float:
    return float(_unix_nanoseconds(moment)) / _NANOSECONDS_PER_SECOND


def _unix_nanoseconds(moment: datetime) -> int:
    return (_utc(moment) - _EPOCH) // _ONE_MICROSECOND * 1000


def _render_family(family: _Family, series: Sequence[_Series]) -> str:
    lines = [f"# HELP {family.name} {_escape_help(family.help)}", f"# TYPE {family.name} {family.kind}"]
    for labels, value, time in sorted(series, key=lambda item: item[0]):
        lines.append(_sample_line(family.name, labels, value, time))
    return "\n".join(lines) + "\n"


def _sample_line(name: str, labels: _Labels, value: float, time: datetime | None) -> str:
    text = name
    if labels:
        text += "{" + ",".join(f'{label}="{_escape_label_value(v)}"' for label, v in labels) + "}"
    text += " " + format_go_float(value)
    if time is not None:
        text += f" {_unix_nanoseconds(time) // 1_000_000}"
    return text


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_go_float(value: float) -> str:
    """A float as Go's strconv.FormatFloat(value, 'g', -1, 64), which the Prometheus Go encoder uses.

    The shortest digits that read back as the same float (Python's repr finds the same ones), written
    with an exponent when the decimal exponent is below -4 or at least 6, e.g. 67108864 -> 6.7108864e+07.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    return sign + ("0" if value == 0 else _go_shortest(abs(value)))


def _go_shortest(value: float) -> str:
    _, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    point = len(digit_tuple) + int(exponent)  # the value is 0.<digits> * 10**point
    digits = "".join(str(digit) for digit in digit_tuple).rstrip("0")
    decimal_exponent = point - 1
    if decimal_exponent < -4 or decimal_exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{mantissa}e{'-' if decimal_exponent < 0 else '+'}{abs(decimal_exponent):02d}"
    if point <= 0:
        return f"0.{'0' * -point}{digits}"
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return f"{digits[:point]}.{digits[point:]}"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICROSECOND = timedelta(microseconds=1)
