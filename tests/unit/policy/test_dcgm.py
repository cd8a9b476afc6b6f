"""dcgm-exporter text to GPU samples; the scrape of exporter pods (real HTTP exporters, a listing stub)."""

# ruff: noqa: E501 -- the exporter's real lines, label for label, are longer than the house limit

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web

from tests.unit.local import LOOPBACK
from vk_provider.kit.kube import KubeApi, KubeApiError
from vk_provider.policy.dcgm import (
    ExporterSettings,
    GpuSample,
    MalformedExporterText,
    label_selector,
    max_temperature,
    mean_tensor_active,
    parse_exporter_metrics,
    scrape_exporters,
)

pytestmark = pytest.mark.unit

# As dcgm-exporter 4.x serves it (older builds label the host `Hostname`, newer ones `hostname`).
EXPORTER_TEXT = """\
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:00:1E.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b",DCGM_FI_DRIVER_VERSION="550.54.15"} 41
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-1b2c",pci_bus_id="00000000:00:1F.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b",DCGM_FI_DRIVER_VERSION="550.54.15"} 85
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b"} 100
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b"} 0
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-1b2c",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b"} 79
# HELP DCGM_FI_DEV_ROW_REMAP_FAILURE Whether remapping of rows has failed
# TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge
DCGM_FI_DEV_ROW_REMAP_FAILURE{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b"} 0
DCGM_FI_DEV_ROW_REMAP_FAILURE{gpu="1",UUID="GPU-1b2c",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b"} 1
# HELP DCGM_FI_DEV_ROW_REMAP_PENDING If any rows pending remapping. 1=yes 0=no
# TYPE DCGM_FI_DEV_ROW_REMAP_PENDING gauge
DCGM_FI_DEV_ROW_REMAP_PENDING{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b"} 1
DCGM_FI_DEV_ROW_REMAP_PENDING{gpu="1",UUID="GPU-1b2c",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b"} 0
# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.
# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b"} 0.412000
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="1",UUID="GPU-1b2c",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="nvidia-dcgm-exporter-xpn6b"} 0.000000
"""


def test_exporter_text_becomes_one_sample_per_gpu() -> None:
    samples = parse_exporter_metrics(EXPORTER_TEXT)
    assert samples == [
        GpuSample(
            gpu="0",
            uuid="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",
            temperature_celsius=41.0,
            xid=0,
            row_remap_failure=False,
            row_remap_pending=True,
            tensor_active=pytest.approx(0.412),  # type: ignore[arg-type]
        ),
        GpuSample(
            gpu="1",
            uuid="GPU-1b2c",
            temperature_celsius=85.0,
            xid=79,
            row_remap_failure=True,
            tensor_active=0.0,
        ),
    ]
    assert max_temperature(samples) == 85.0
    assert mean_tensor_active(samples) == pytest.approx(0.206)


def test_lowercase_hostname_and_no_host_label_read_alike() -> None:
    newer = EXPORTER_TEXT.replace("Hostname=", "hostname=")
    bare = EXPORTER_TEXT.replace(',Hostname="nvidia-dcgm-exporter-xpn6b"', "")
    assert parse_exporter_metrics(newer) == parse_exporter_metrics(EXPORTER_TEXT)
    assert parse_exporter_metrics(bare) == parse_exporter_metrics(EXPORTER_TEXT)


def test_nan_and_blank_values_read_as_absent() -> None:
    text = (
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} NaN\n'
        'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a"} \n'
        'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0",UUID="GPU-a"}\n'
        'DCGM_FI_DEV_ROW_REMAP_FAILURE{gpu="0",UUID="GPU-a"} nan\n'
    )
    assert parse_exporter_metrics(text) == [
        GpuSample(gpu="0", uuid="GPU-a", temperature_celsius=None, xid=None, tensor_active=None)
    ]


def test_mig_instances_fold_into_their_gpu() -> None:
    mig = 'gpu="0",UUID="GPU-m",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",Hostname="h"'
    text = (
        f"DCGM_FI_DEV_GPU_TEMP{{{mig}}} 60\n"
        f'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{mig},GPU_I_PROFILE="3g.20gb",GPU_I_ID="1"}} 0.8\n'
        f'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{mig},GPU_I_PROFILE="3g.20gb",GPU_I_ID="2"}} 0.2\n'
        f'DCGM_FI_DEV_XID_ERRORS{{{mig},GPU_I_PROFILE="3g.20gb",GPU_I_ID="2"}} 43\n'
    )
    [sample] = parse_exporter_metrics(text)
    assert sample.temperature_celsius == 60.0
    assert sample.tensor_active == pytest.approx(0.5)
    assert sample.xid == 43


def test_other_series_and_empty_text_give_no_gpus() -> None:
    assert parse_exporter_metrics("") == []
    assert parse_exporter_metrics("# just a comment\ngo_goroutines 12\n") == []


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("<html><body>502 Bad Gateway</body></html>\n", 1),
        ('DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} 40\nDCGM_FI_DEV_GPU_TEMP{gpu="1" 41\n', 2),
        ('DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} hot\n', 1),
        ("DCGM_FI_DEV_GPU_TEMP 40\n", 1),  # no gpu, no UUID: whose temperature?
    ],
)
def test_malformed_text_is_a_clear_error(text: str, line: int) -> None:
    with pytest.raises(MalformedExporterText, match=f"line {line}"):
        parse_exporter_metrics(text)


def test_label_selectors() -> None:
    assert label_selector({"matchLabels": {"app": "dcgm", "tier": "gpu"}}) == "app=dcgm,tier=gpu"
    assert (
        label_selector(
            {
                "matchExpressions": [
                    {"key": "app", "operator": "In", "values": ["a", "b"]},
                    {"key": "x", "operator": "Exists"},
                    {"key": "y", "operator": "DoesNotExist"},
                ]
            }
        )
        == "app in (a,b),x,!y"
    )
    with pytest.raises(ValueError, match="operator"):
        label_selector({"matchExpressions": [{"key": "app", "operator": "Near"}]})


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"selector": {"matchLabels": {"app": "x"}}}, "namespace"),
        ({"namespace": "gpu"}, "selector"),
        ({"namespace": "gpu", "selector": {"matchLabels": {"app": "x"}}, "port": 0}, "port"),
        ({"namespace": "gpu", "selector": {"matchLabels": {"app": "x"}}, "path": "metrics"}, "path"),
    ],
)
def test_exporter_settings_name_the_wrong_field(spec: Mapping[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=rf"dcgmExporter\.{field}"):
        ExporterSettings.from_spec(spec)


# --- scrape_exporters: real exporters over HTTP, the pod listing from a stub --------------------------


class PodListing:
    """Answers the pod listing of `scrape_exporters` (the only API call it makes)."""

    def __init__(self, pods: list[dict[str, Any]] | KubeApiError) -> None:
        self.pods = pods
        self.queries: list[Mapping[str, Any] | None] = []

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self.queries.append(query)
        if isinstance(self.pods, KubeApiError):
            raise self.pods
        return {"items": self.pods}


def pod(name: str, node: str | None, address: str | None, *, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "gpu", "labels": {"app": "dcgm"}},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, **({"podIP": address} if address else {})},
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
async def exporter_port() -> AsyncIterator[tuple[int, dict[str, str]]]:
    """An HTTP server on 127.0.0.1 answering /metrics with exporter text and /broken with HTML."""
    bodies = {"/metrics": EXPORTER_TEXT, "/broken": "<html>oops</html>\n"}

    async def answer(request: web.Request) -> web.Response:
        return web.Response(text=bodies[request.path])

    app = web.Application()
    for path in bodies:
        app.router.add_get(path, answer)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, LOOPBACK, port)
    await site.start()
    try:
        yield port, bodies
    finally:
        await runner.cleanup()


async def test_scrape_maps_each_exporter_to_its_pods_node(exporter_port: tuple[int, dict[str, str]]) -> None:
    port, _ = exporter_port
    listing = PodListing(
        [
            # The Hostname label says "nvidia-dcgm-exporter-xpn6b"; the node is what spec.nodeName says.
            pod("dcgm-a", "gpu-node-a", LOOPBACK),
            pod("dcgm-b", "gpu-node-b", None, phase="Pending"),
            pod("dcgm-c", None, None, phase="Pending"),
            pod("dcgm-d", "gpu-node-d", "127.0.0.2"),  # nobody listens there on that port
        ]
    )
    settings = ExporterSettings(namespace="gpu", selector={"matchLabels": {"app": "dcgm"}}, port=port)
    async with aiohttp.ClientSession() as session:
        scrape = await scrape_exporters(cast(KubeApi, listing), settings, session)
    assert listing.queries == [{"labelSelector": "app=dcgm"}]
    assert scrape.samples == {"gpu-node-a": parse_exporter_metrics(EXPORTER_TEXT)}
    assert set(scrape.errors) == {"gpu-node-b", "gpu/dcgm-c", "gpu-node-d"}
    assert "not running (phase Pending" in scrape.errors["gpu-node-b"]
    assert "on no node" in scrape.errors["gpu/dcgm-c"]
    assert "unreachable" in scrape.errors["gpu-node-d"]


async def test_malformed_or_failing_exporter_is_an_error_entry(
    exporter_port: tuple[int, dict[str, str]],
) -> None:
    port, _ = exporter_port
    listing = PodListing([pod("dcgm-a", "gpu-node-a", LOOPBACK)])
    async with aiohttp.ClientSession() as session:
        broken = ExporterSettings("gpu", {"matchLabels": {"app": "dcgm"}}, port=port, path="/broken")
        scrape = await scrape_exporters(cast(KubeApi, listing), broken, session)
        assert scrape.samples == {}
        assert "malformed metrics: line 1" in scrape.errors["gpu-node-a"]
        missing = ExporterSettings("gpu", {"matchLabels": {"app": "dcgm"}}, port=port, path="/nothing")
        scrape = await scrape_exporters(cast(KubeApi, listing), missing, session)
        assert "answered HTTP 404" in scrape.errors["gpu-node-a"]


async def test_a_failed_listing_is_an_error_not_a_crash() -> None:
    listing = PodListing(KubeApiError(403, "Forbidden", 'pods is forbidden: cannot list resource "pods"'))
    settings = ExporterSettings("gpu", {"matchLabels": {"app": "dcgm"}})
    async with aiohttp.ClientSession() as session:
        scrape = await scrape_exporters(cast(KubeApi, listing), settings, session)
    assert scrape.samples == {}
    assert "forbidden" in scrape.errors["gpu"]
