"""GPU samples from dcgm-exporter: parse its Prometheus text, and scrape the exporter pod of each node
(through `scrape`, shared with the interconnect exporter).

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
- `DCGM_FI_DEV_ROW_REMAP_PENDING`: 1 while a remap waits for the next GPU reset to take effect (it can
  clear there: reported, not a reason to pull the node by default, see `severity`);
- `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`: ratio (0..1) of cycles the tensor pipe was active, the useful
  measure of work (`DCGM_FI_DEV_GPU_UTIL` saturates at 100 % with idle SMs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import aiohttp

from vk_provider.kit.kube import KubeApi
from vk_provider.policy.scrape import (
    ExporterSettings,
    MalformedExporterText,
    Scrape,
    exposition_samples,
    label_selector,
    scrape_pods,
)

__all__ = [
    "ExporterScrape",
    "ExporterSettings",
    "GpuSample",
    "MalformedExporterText",
    "label_selector",
    "max_temperature",
    "mean_tensor_active",
    "parse_exporter_metrics",
    "scrape_exporters",
]

TEMPERATURE = "DCGM_FI_DEV_GPU_TEMP"
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ROW_REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
READ_FIELDS = frozenset({TEMPERATURE, XID_ERRORS, ROW_REMAP_FAILURE, ROW_REMAP_PENDING, TENSOR_ACTIVE})

DEFAULT_PORT = 9400


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
    row_remap_pending: bool = False
    tensor_active: float | None = None
    """0..1; on a MIG GPU, the mean over its GPU instances."""


ExporterScrape = Scrape[list[GpuSample]]
"""One scrape of every dcgm-exporter pod: node -> its GPUs, and the exporters that could not be read."""


def parse_exporter_metrics(text: str) -> list[GpuSample]:
    """The GPUs in dcgm-exporter's text, in the order first seen. Series other than the fields read
    are ignored; NaN and blank values read as absent. Raises MalformedExporterText (a ValueError)
    naming the first line that is not exposition text."""
    fields: dict[tuple[str, str], dict[str, list[float]]] = {}
    for number, name, labels, value in exposition_samples(text, READ_FIELDS):
        gpu = labels.get("gpu", "")
        uuid = labels.get("UUID") or labels.get("uuid") or ""
        if not gpu and not uuid:
            raise MalformedExporterText(f"line {number}: {name} has neither a gpu nor a UUID label")
        values = fields.setdefault((gpu, uuid), {})
        if value is not None:
            values.setdefault(name, []).append(value)
    return [_gpu_sample(gpu, uuid, values) for (gpu, uuid), values in fields.items()]


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
        row_remap_pending=any(value >= 1 for value in values.get(ROW_REMAP_PENDING, ())),
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


async def scrape_exporters(
    api: KubeApi, settings: ExporterSettings, session: aiohttp.ClientSession
) -> ExporterScrape:
    """Every dcgm-exporter pod's GPUs, by node (`scrape.scrape_pods`); never raises for a bad exporter."""
    return await scrape_pods(api, settings, session, parse_exporter_metrics)
