"""GPU samples from dcgm-exporter: parse its Prometheus text, and scrape the exporter pod of each node.

dcgm-exporter (a DaemonSet) serves one series per GPU and field on `:9400/metrics`, labelled `gpu`,
`UUID`, `device`, `modelName`, `pci_bus_id`, a host label (`Hostname` in older builds, `hostname` in
newer ones) and, on MIG GPUs, `GPU_I_PROFILE`/`GPU_I_ID`. The host label is the *exporter pod's* host
name, not the node's, so the scrape maps each exporter to its node by the pod's `spec.nodeName` and never
trusts a label for that.

Fields read (the exporter's default counters):
- `DCGM_FI_DEV_GPU_TEMP`: °C;
- `DCGM_FI_DEV_XID_ERRORS`: the value of the *last* Xid the GPU raised (0 = none). A gauge that keeps
  its value, so "when did it happen" is for `health.HealthMemory` to remember;
- `DCGM_FI_DEV_ROW_REMAP_FAILURE`: 1 when the GPU could not remap a failing memory row;
- `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`: ratio (0..1) of cycles the tensor pipe was active, the useful
  measure of work (`DCGM_FI_DEV_GPU_UTIL` saturates at 100 % with idle SMs).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject, resource_path

TEMPERATURE = "DCGM_FI_DEV_GPU_TEMP"
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
READ_FIELDS = frozenset({TEMPERATURE, XID_ERRORS, ROW_REMAP_FAILURE, TENSOR_ACTIVE})

DEFAULT_PORT = 9400
DEFAULT_PATH = "/metrics"
DEFAULT_TIMEOUT_SECONDS = 5.0
MAX_BODY_BYTES = 4 * 1024 * 1024
"""An exporter with 8 GPUs and every field serves well under 1 MiB; more is not an exporter."""


class MalformedExporterText(ValueError):
    """The text is not Prometheus exposition text (wrong port, an HTML page, a truncated body)."""


@dataclasses.dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU as its exporter reported it; a field the exporter did not serve (or served as NaN or
    blank) is None."""

    gpu: str
    """The `gpu` label, the GPU's index on its node."""
    uuid: str
    temperature_celsius: float | None = None
    xid: int | None = None
    """The last Xid the GPU raised, 0 for none."""
    row_remap_failure: bool = False
    tensor_active: float | None = None
    """0..1; on a MIG GPU, the mean over its GPU instances."""


@dataclasses.dataclass(frozen=True, slots=True)
class ExporterSettings:
    """Where the exporter pods are (spec.health.dcgmExporter of an OffloadPolicy)."""

    namespace: str
    selector: Mapping[str, Any]
    """A label selector: {matchLabels: {...}, matchExpressions: [...]}."""
    port: int = DEFAULT_PORT
    path: str = DEFAULT_PATH
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

    @classmethod
    def from_spec(
        cls, spec: Mapping[str, Any], *, where: str = "spec.health.dcgmExporter"
    ) -> ExporterSettings:
        """From the policy's `dcgmExporter` mapping; a wrong value raises ValueError naming the field."""
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where} must be a mapping, not {spec!r}")
        namespace = spec.get("namespace")
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"{where}.namespace must name the exporter pods' namespace, not {namespace!r}")
        selector = spec.get("selector")
        if not isinstance(selector, Mapping) or not (
            selector.get("matchLabels") or selector.get("matchExpressions")
        ):
            raise ValueError(
                f"{where}.selector must be a label selector like "
                f"{{matchLabels: {{app: nvidia-dcgm-exporter}}}}, not {selector!r}"
            )
        try:
            label_selector(selector)
        except ValueError as error:
            raise ValueError(f"{where}.selector: {error}") from None
        port = spec.get("port", DEFAULT_PORT)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"{where}.port must be a port number (1-65535), not {port!r}")
        path = spec.get("path", DEFAULT_PATH)
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"{where}.path must be an absolute URL path like /metrics, not {path!r}")
        timeout = spec.get("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"{where}.timeoutSeconds must be a number of seconds > 0, not {timeout!r}")
        return cls(
            namespace=namespace, selector=selector, port=port, path=path, timeout_seconds=float(timeout)
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ExporterScrape:
    """One scrape of every exporter pod."""

    samples: dict[str, list[GpuSample]] = dataclasses.field(default_factory=dict)
    """Node name -> its GPUs, for each node whose exporter answered."""
    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    """Node name (or `namespace/pod` for a pod on no node, or the namespace when listing failed) ->
    why there are no samples from it. A node with an answering exporter has no entry here."""


def parse_exporter_metrics(text: str) -> list[GpuSample]:
    """The GPUs in dcgm-exporter's text, in the order first seen. Series other than the fields read
    are ignored; NaN and blank values read as absent. Raises MalformedExporterText (a ValueError)
    naming the first line that is not exposition text."""
    fields: dict[tuple[str, str], dict[str, list[float]]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, labels, value = _sample(stripped, number)
        if name not in READ_FIELDS:
            continue
        gpu = labels.get("gpu", "")
        uuid = labels.get("UUID") or labels.get("uuid") or ""
        if not gpu and not uuid:
            raise MalformedExporterText(
                f"line {number}: {name} has neither a gpu nor a UUID label: {line[:200]!r}"
            )
        values = fields.setdefault((gpu, uuid), {})
        if value is not None:
            values.setdefault(name, []).append(value)
    return [_gpu_sample(gpu, uuid, values) for (gpu, uuid), values in fields.items()]


def _sample(line: str, number: int) -> tuple[str, dict[str, str], float | None]:
    """One exposition line through prometheus_client's parser; a blank value is None."""
    try:
        return _parsed(line)
    except ValueError as error:
        # A series with no value at all: tolerated as absent if the line is otherwise well formed.
        try:
            name, labels, _ = _parsed(f"{line} NaN")
        except ValueError:
            raise MalformedExporterText(
                f"line {number} is not Prometheus text ({error}): {line[:200]!r}"
            ) from None
        return name, labels, None


def _parsed(line: str) -> tuple[str, dict[str, str], float | None]:
    samples = [sample for family in text_string_to_metric_families(line + "\n") for sample in family.samples]
    if len(samples) != 1:
        raise ValueError(f"{len(samples)} samples in one line")
    sample = samples[0]
    value = float(sample.value)
    return sample.name, dict(sample.labels), None if math.isnan(value) else value


def _gpu_sample(gpu: str, uuid: str, values: Mapping[str, list[float]]) -> GpuSample:
    # On a MIG GPU the device fields (temperature, Xid) come once per GPU and the profiling fields once
    # per GPU instance, all with the parent's gpu and UUID: take the worst of the former and the mean
    # of the latter.
    temperatures = values.get(TEMPERATURE)
    xids = [int(value) for value in values.get(XID_ERRORS, ()) if value >= 0]
    tensor = values.get(TENSOR_ACTIVE)
    return GpuSample(
        gpu=gpu,
        uuid=uuid,
        temperature_celsius=max(temperatures) if temperatures else None,
        xid=max(xids) if xids else None,
        row_remap_failure=any(value >= 1 for value in values.get(ROW_REMAP_FAILURE, ())),
        tensor_active=sum(tensor) / len(tensor) if tensor else None,
    )


def max_temperature(samples: Iterable[GpuSample]) -> float | None:
    """The hottest GPU's temperature, None when no GPU reported one."""
    temperatures = [
        sample.temperature_celsius for sample in samples if sample.temperature_celsius is not None
    ]
    return max(temperatures) if temperatures else None


def mean_tensor_active(samples: Iterable[GpuSample]) -> float | None:
    """The mean tensor-pipe activity of the GPUs that reported it (0..1), None when none did."""
    ratios = [sample.tensor_active for sample in samples if sample.tensor_active is not None]
    return sum(ratios) / len(ratios) if ratios else None


def label_selector(selector: Mapping[str, Any]) -> str:
    """A LabelSelector mapping as the `labelSelector` query string; ValueError when it is not one."""
    terms = []
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise ValueError(f"matchLabels must be a mapping, not {match_labels!r}")
    terms += [f"{key}={value}" for key, value in sorted(match_labels.items())]
    for expression in selector.get("matchExpressions") or ():
        if not isinstance(expression, Mapping) or not isinstance(expression.get("key"), str):
            raise ValueError(f"a matchExpression needs a key, not {expression!r}")
        key, operator = expression["key"], expression.get("operator")
        values = expression.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                raise ValueError(f"matchExpression {key} {operator} needs values")
            terms.append(f"{key} {operator.lower()} ({','.join(str(value) for value in values)})")
        elif operator == "Exists":
            terms.append(key)
        elif operator == "DoesNotExist":
            terms.append(f"!{key}")
        else:
            raise ValueError(
                f"matchExpression operator must be In, NotIn, Exists or DoesNotExist, not {operator!r}"
            )
    return ",".join(terms)


async def scrape_exporters(
    api: KubeApi, settings: ExporterSettings, session: aiohttp.ClientSession
) -> ExporterScrape:
    """Find the exporter pods and GET each one's metrics, all at once, each within the timeout.

    Never raises for a bad exporter: a pod that is not running, does not answer, or answers with
    something else than exporter text becomes an `errors` entry for its node."""
    try:
        listing = await api.get(
            resource_path("v1", "pods", namespace=settings.namespace),
            query={"labelSelector": label_selector(settings.selector)},
        )
    except (KubeApiError, ValueError, aiohttp.ClientError, TimeoutError) as error:
        return ExporterScrape(errors={settings.namespace: f"cannot list the dcgm-exporter pods: {error}"})
    pods = sorted(listing.get("items") or [], key=lambda pod: str(pod.get("metadata", {}).get("name")))
    results = await asyncio.gather(*(_scrape_pod(pod, settings, session) for pod in pods))
    scrape = ExporterScrape()
    for key, outcome in results:
        if isinstance(outcome, list):
            scrape.samples.setdefault(key, outcome)
        else:
            scrape.errors.setdefault(key, outcome)
    for node in scrape.samples:  # another exporter pod on that node answered (a rolling update)
        scrape.errors.pop(node, None)
    return scrape


async def _scrape_pod(
    pod: RawObject, settings: ExporterSettings, session: aiohttp.ClientSession
) -> tuple[str, list[GpuSample] | str]:
    """(node, its GPUs) or (node or pod, why not)."""
    key, url, problem = _target(pod, settings)
    if url is None:
        return key, problem
    try:
        async with session.get(
            url, timeout=aiohttp.ClientTimeout(total=settings.timeout_seconds)
        ) as response:
            if response.status != 200:
                return key, f"{problem} answered HTTP {response.status}"
            body = await response.content.read(MAX_BODY_BYTES + 1)
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        return key, f"{problem} is unreachable: {error or type(error).__name__}"
    if len(body) > MAX_BODY_BYTES:
        return key, f"{problem} sent more than {MAX_BODY_BYTES} bytes"
    try:
        return key, parse_exporter_metrics(body.decode("utf-8", errors="replace"))
    except MalformedExporterText as error:
        return key, f"{problem} sent malformed metrics: {error}"


def _target(pod: RawObject, settings: ExporterSettings) -> tuple[str, str | None, str]:
    """(node or pod key, the metrics URL or None, the exporter's description or why it has no URL)."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    pod_key = f"{metadata.get('namespace', settings.namespace)}/{metadata.get('name', '?')}"
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:
        return pod_key, None, f"exporter pod {pod_key} is on no node yet"
    phase = status.get("phase")
    address = status.get("podIP")
    if metadata.get("deletionTimestamp"):
        return node, None, f"exporter pod {pod_key} is being deleted"
    if phase != "Running" or not address:
        return node, None, f"exporter pod {pod_key} is not running (phase {phase}, IP {address or 'none'})"
    host = f"[{address}]" if ":" in address else address
    url = f"http://{host}:{settings.port}{settings.path}"
    return node, url, f"exporter pod {pod_key} at {url}"
