"""A dcgm-exporter stand-in: the exporter's metric names and labels for a node's GPUs, settable at run time.

The development cluster has no GPUs, so nothing could otherwise make one hot or failed. This serves what
dcgm-exporter 4.x serves on `:9400/metrics` (names and labels of its default counters:
`DCGM_FI_DEV_GPU_TEMP`, `DCGM_FI_DEV_XID_ERRORS`, `DCGM_FI_DEV_ROW_REMAP_FAILURE`,
`DCGM_FI_DEV_ROW_REMAP_PENDING`, `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`, `DCGM_FI_DEV_GPU_UTIL`, ..., each
labelled `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName` and the host label), and a small control
API on the same port:

- `GET /gpus`: every GPU's values, as JSON;
- `POST /gpus/{index}` (or `/gpus/all`) with a JSON object of `temperature`, `xid`, `rowRemapFailure`,
  `rowRemapPending`, `tensorActive`, `gpuUtil`: sets them (400 with the reason for an unknown field or
  a wrong value); and the NVLink error totals `nvlinkCrcFlitErrors`, `nvlinkCrcDataErrors`,
  `nvlinkReplayErrors`, `nvlinkRecoveryErrors` (running totals, served as
  `DCGM_FI_DEV_NVLINK_*_COUNT_TOTAL`, as by a dcgm-exporter whose counters file enables them: its
  default file leaves them out);
- `POST /serve` with `{"malformed": true}`: `/metrics` answers text that is not Prometheus exposition
  (as a wrong port or a proxy's error page would), `false` to serve metrics again;
- `GET /health`: 200, for probes.

Run it as a pod on a `local` node (image `DCGM_STANDIN_IMAGE`, whose entrypoint the node must map, see
`DCGM_STANDIN_ENTRYPOINT` and `exporter_pod`), so that the GPU policy finds it by its labels and maps
it to its node by `spec.nodeName`, as it finds the real exporter's DaemonSet pods; or from a shell:
`python -m vk_devtools.standins.dcgm --node gpu-a --gpus 4 --listen 127.0.0.1:9400`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import math
import socket
import sys
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
from aiohttp import web

from vk_provider.runtime.signals import until_signalled

logger = logging.getLogger("vk_devtools.standins.dcgm")

DCGM_STANDIN_IMAGE = "vk-provider/dcgm-exporter-standin:0.1.0"
"""The image name a stand-in pod uses; `local` nodes map it to `DCGM_STANDIN_ENTRYPOINT`."""
DCGM_STANDIN_ENTRYPOINT = (sys.executable, "-m", "vk_devtools.standins.dcgm")
"""What that image's ENTRYPOINT would run: this Python, so vk_devtools is importable."""
EXPORTER_PORT = 9400
EXPORTER_LABELS = {"app.kubernetes.io/name": "dcgm-exporter-standin"}
DEFAULT_MODEL = "NVIDIA H100 80GB HBM3"
HOST_LABELS = ("Hostname", "hostname")
"""dcgm-exporter's host label: `Hostname` in older builds, `hostname` from 4.x on."""

SETTABLE = ("temperature", "xid", "rowRemapFailure", "rowRemapPending", "tensorActive", "gpuUtil")
FLAGS = {"rowRemapFailure": "row_remap_failure", "rowRemapPending": "row_remap_pending"}
"""The settable true/false fields and the `Gpu` attribute of each."""
NVLINK_SETTABLE = {
    "nvlinkCrcFlitErrors": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "nvlinkCrcDataErrors": "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "nvlinkReplayErrors": "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "nvlinkRecoveryErrors": "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
}
"""NVLink error totals a test can raise: control API name -> the field served (0 until set)."""
# (name, type, help) in the exporter's order and wording; values come from `Gpu.values`.
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "If any rows pending remapping. 1=yes 0=no"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink data CRC errors."),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink retries."),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink recovery errors."),
)


@dataclasses.dataclass(slots=True)
class Gpu:
    """One stand-in GPU's settable values."""

    index: int
    uuid: str
    temperature: float = 45.0
    xid: int = 0
    """The last Xid raised, 0 for none: dcgm-exporter's DCGM_FI_DEV_XID_ERRORS."""
    row_remap_failure: bool = False
    row_remap_pending: bool = False
    """A remap waiting for the next GPU reset: DCGM_FI_DEV_ROW_REMAP_PENDING."""
    tensor_active: float = 0.0
    gpu_util: float = 0.0
    nvlink_errors: dict[str, int] = dataclasses.field(default_factory=dict)
    """NVLink error totals set so far, by field (`NVLINK_SETTABLE`'s values)."""

    def values(self) -> dict[str, float]:
        """Every served field's value, the unsettable ones derived from the settable."""
        busy = self.gpu_util / 100
        return {
            "DCGM_FI_DEV_SM_CLOCK": 345 + round(1635 * busy),
            "DCGM_FI_DEV_MEM_CLOCK": 2619,
            "DCGM_FI_DEV_MEMORY_TEMP": self.temperature - 3,
            "DCGM_FI_DEV_GPU_TEMP": self.temperature,
            "DCGM_FI_DEV_POWER_USAGE": round(70 + 630 * max(busy, self.tensor_active), 3),
            "DCGM_FI_DEV_GPU_UTIL": self.gpu_util,
            "DCGM_FI_DEV_XID_ERRORS": self.xid,
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 1 if self.row_remap_failure else 0,
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": 1 if self.row_remap_failure else 0,
            "DCGM_FI_DEV_ROW_REMAP_PENDING": 1 if self.row_remap_pending else 0,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": max(busy, self.tensor_active),
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": self.tensor_active,
            **{field: self.nvlink_errors.get(field, 0) for field in NVLINK_SETTABLE.values()},
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.index,
            "uuid": self.uuid,
            "temperature": self.temperature,
            "xid": self.xid,
            "rowRemapFailure": self.row_remap_failure,
            "rowRemapPending": self.row_remap_pending,
            "tensorActive": self.tensor_active,
            "gpuUtil": self.gpu_util,
            **{name: self.nvlink_errors.get(field, 0) for name, field in NVLINK_SETTABLE.items()},
        }


class ChangeError(ValueError):
    """A control request the stand-in refuses; the message says why."""


def _number(name: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ChangeError(f"{name} must be a number in {low:g}..{high:g}, not {value!r}")
    return float(value)


def _set_nvlink_errors(gpu: Gpu, change: Mapping[str, Any]) -> dict[str, Any]:
    """Set the NVLink totals of `change` on `gpu`; the rest of `change`."""
    for key in NVLINK_SETTABLE.keys() & change.keys():
        value = change[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ChangeError(f"{key} must be a running total (a whole number, 0 or more), not {value!r}")
        gpu.nvlink_errors[NVLINK_SETTABLE[key]] = value
    return {key: value for key, value in change.items() if key not in NVLINK_SETTABLE}


def apply_change(gpu: Gpu, change: Mapping[str, Any]) -> None:
    """Set the fields of `change` (the control API's names) on `gpu`, all or none."""
    if not isinstance(change, Mapping):
        raise ChangeError(f"the body must be a JSON object, not {change!r}")
    updated = dataclasses.replace(gpu, nvlink_errors=dict(gpu.nvlink_errors))
    for key, value in _set_nvlink_errors(updated, change).items():
        if key == "temperature":
            updated.temperature = _number(key, value, -40, 200)
        elif key == "xid":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ChangeError(f"xid must be an Xid number (0 for none), not {value!r}")
            updated.xid = value
        elif key in FLAGS:
            if not isinstance(value, bool):
                raise ChangeError(f"{key} must be true or false, not {value!r}")
            setattr(updated, FLAGS[key], value)
        elif key == "tensorActive":
            updated.tensor_active = _number(key, value, 0, 1)
        elif key == "gpuUtil":
            updated.gpu_util = _number(key, value, 0, 100)
        else:
            raise ChangeError(
                f"unknown field {key!r}: settable are {', '.join((*SETTABLE, *NVLINK_SETTABLE))}"
            )
    for field in dataclasses.fields(Gpu):
        setattr(gpu, field.name, getattr(updated, field.name))


@dataclasses.dataclass(slots=True)
class Exporter:
    """The stand-in's state: a node's GPUs and how their text is labelled."""

    node: str
    gpus: list[Gpu]
    model: str = DEFAULT_MODEL
    hostname: str = dataclasses.field(default_factory=socket.gethostname)
    """The host label's value; in a pod, the pod's host name (its name), as dcgm-exporter's."""
    host_label: str = "Hostname"
    malformed: bool = False

    @classmethod
    def for_node(cls, node: str, count: int, **settings: Any) -> Exporter:
        """`count` GPUs with UUIDs that stay the same for the same node name."""
        gpus = [
            Gpu(index=i, uuid=f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}.gpu{i}')}") for i in range(count)
        ]
        return cls(node=node, gpus=gpus, **settings)

    def render(self) -> str:
        """The exporter's text: HELP and TYPE, then one series per GPU, for every field."""
        if self.malformed:
            return "<html><body><h1>502 Bad Gateway</h1></body></html>\n"
        lines = []
        for name, kind, help_text in FIELDS:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            for gpu in self.gpus:
                lines.append(f"{name}{{{self._labels(gpu)}}} {_format(gpu.values()[name])}")
        return "\n".join(lines) + "\n"

    def _labels(self, gpu: Gpu) -> str:
        labels = {
            "gpu": str(gpu.index),
            "UUID": gpu.uuid,
            "pci_bus_id": f"00000000:{0x18 + gpu.index:02X}:00.0",
            "device": f"nvidia{gpu.index}",
            "modelName": self.model,
            self.host_label: self.hostname,
            "DCGM_FI_DRIVER_VERSION": "550.54.15",
        }
        return ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())

    def change(self, which: str, change: Mapping[str, Any]) -> list[Gpu]:
        """Apply `change` to GPU `which` (an index, or "all"); the GPUs changed."""
        if which == "all":
            chosen = self.gpus
        else:
            try:
                chosen = [self.gpus[int(which)]]
            except (ValueError, IndexError):
                raise ChangeError(f"no GPU {which!r} on this node: 0..{len(self.gpus) - 1} or all") from None
        for gpu in chosen:  # validated on the first, so a bad change leaves every GPU as it was
            apply_change(dataclasses.replace(gpu), change)
        for gpu in chosen:
            apply_change(gpu, change)
        return chosen


def _format(value: float) -> str:
    if isinstance(value, int) or (math.isfinite(value) and value == int(value) and abs(value) < 1e15):
        return str(int(value))
    return f"{value:.6f}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def make_app(exporter: Exporter) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=exporter.render(), content_type="text/plain", charset="utf-8")

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def listing(_: web.Request) -> web.Response:
        return web.json_response({"node": exporter.node, "gpus": [gpu.to_json() for gpu in exporter.gpus]})

    async def set_gpu(request: web.Request) -> web.Response:
        try:
            body = await request.json()
            changed = exporter.change(request.match_info["which"], body)
        except (ValueError, ChangeError) as error:  # json's errors are ValueErrors too
            return web.json_response({"error": str(error)}, status=400)
        logger.info("GPU %s set: %s", request.match_info["which"], json.dumps(body))
        return web.json_response({"gpus": [gpu.to_json() for gpu in changed]})

    async def serve(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError as error:
            return web.json_response({"error": str(error)}, status=400)
        if not isinstance(body, dict) or not isinstance(body.get("malformed"), bool):
            return web.json_response({"error": 'the body must be {"malformed": true|false}'}, status=400)
        exporter.malformed = body["malformed"]
        logger.info("serving %s", "malformed text" if exporter.malformed else "metrics")
        return web.json_response({"malformed": exporter.malformed})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    app.router.add_get("/gpus", listing)
    app.router.add_post("/gpus/{which}", set_gpu)
    app.router.add_post("/serve", serve)
    return app


async def set_gpu(url: str, which: int | str, timeout_seconds: float = 10.0, **change: Any) -> dict[str, Any]:
    """POST a change to the stand-in at `url` (http://host:port) for GPU `which` (or "all"), e.g.
    `await set_gpu(url, 0, temperature=85)`; raises ChangeError with the stand-in's reason on a 400."""
    names = {
        "row_remap_failure": "rowRemapFailure",
        "row_remap_pending": "rowRemapPending",
        "tensor_active": "tensorActive",
        "gpu_util": "gpuUtil",
    }
    names |= {_snake(name): name for name in NVLINK_SETTABLE}
    body = {names.get(key, key): value for key, value in change.items()}
    return await _post(f"{url}/gpus/{which}", body, timeout_seconds)


def _snake(name: str) -> str:
    """nvlinkReplayErrors -> nvlink_replay_errors, for `set_gpu`'s keyword arguments."""
    return "".join(f"_{letter.lower()}" if letter.isupper() else letter for letter in name)


async def serve_malformed(url: str, malformed: bool = True, timeout_seconds: float = 10.0) -> dict[str, Any]:
    """Make the stand-in at `url` serve text that is not Prometheus exposition (or metrics again)."""
    return await _post(f"{url}/serve", {"malformed": malformed}, timeout_seconds)


async def _post(url: str, body: Mapping[str, Any], timeout_seconds: float) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_seconds)) as session,
        session.post(url, json=body) as response,
    ):
        answer: dict[str, Any] = await response.json()
        if response.status == 400:
            raise ChangeError(answer.get("error", "refused"))
        response.raise_for_status()
        return answer


def exporter_pod(
    name: str,
    node: str,
    *,
    gpus: int,
    labels: Mapping[str, str] | None = None,
    port: int = EXPORTER_PORT,
    host_label: str = "Hostname",
) -> dict[str, Any]:
    """A stand-in pod for `node` (bound by spec.nodeName, as a DaemonSet's pods are), listening on its
    pod IP, labelled `EXPORTER_LABELS` and `labels`. Its node must map `DCGM_STANDIN_IMAGE`."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {**EXPORTER_LABELS, **(labels or {})}},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],  # as the exporter's DaemonSet: on tainted GPU nodes too
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "exporter",
                    "image": DCGM_STANDIN_IMAGE,
                    "args": [
                        "--listen",
                        f"$(POD_IP):{port}",
                        "--node",
                        "$(NODE_NAME)",
                        "--gpus",
                        str(gpus),
                        "--hostname",
                        "$(POD_NAME)",
                        "--host-label",
                        host_label,
                    ],
                    "env": [
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    ],
                    "ports": [{"name": "metrics", "containerPort": port}],
                    "readinessProbe": {"httpGet": {"path": "/health", "port": port}, "periodSeconds": 1},
                }
            ],
        },
    }


def _listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not host or not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, like 127.0.0.1:9400, not {text!r}")
    return host.strip("[]"), number


def _count(text: str) -> int:
    count = int(text)
    if not 1 <= count <= 64:
        raise argparse.ArgumentTypeError(f"--gpus must be 1..64, not {text}")
    return count


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m vk_devtools.standins.dcgm",
        description="A dcgm-exporter stand-in: a node's GPUs as the exporter serves them, with a control "
        "API (GET /gpus, POST /gpus/{index|all} {temperature, xid, rowRemapFailure, rowRemapPending, "
        "tensorActive, gpuUtil}, "
        'POST /serve {"malformed": bool}).',
    )
    parser.add_argument(
        "--node", required=True, help="the node whose GPUs these are (their UUIDs derive from it)"
    )
    parser.add_argument("--gpus", type=_count, default=8)
    parser.add_argument("--listen", type=_listen, default=("0.0.0.0", EXPORTER_PORT), metavar="HOST:PORT")  # noqa: S104 - a pod's exporter is scraped on its pod IP
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--hostname", default=None, help="the host label's value (default: this host's name)")
    parser.add_argument("--host-label", choices=HOST_LABELS, default="Hostname")
    parser.add_argument("--temperature", type=float, default=45.0, help="every GPU's starting temperature")
    return parser.parse_args(argv)


async def serve(exporter: Exporter, host: str, port: int, stop: asyncio.Event) -> int:
    runner = web.AppRunner(make_app(exporter))
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as error:
        logger.error("cannot listen on %s:%s: %s", host, port, error)
        await runner.cleanup()
        return 1
    logger.info(
        "dcgm-exporter stand-in for %s (%d GPUs) on %s:%s", exporter.node, len(exporter.gpus), host, port
    )
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s dcgm-standin %(levelname)s %(message)s"
    )
    exporter = Exporter.for_node(
        arguments.node,
        arguments.gpus,
        model=arguments.model,
        hostname=arguments.hostname or socket.gethostname(),
        host_label=arguments.host_label,
    )
    exporter.change("all", {"temperature": arguments.temperature})
    host, port = arguments.listen
    return asyncio.run(until_signalled(lambda stop: serve(exporter, host, port, stop)))


if __name__ == "__main__":
    sys.exit(main())
