"""The exporter in process: on a free port, reading a stand-in tree and a dcgm-exporter stand-in."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.local import LOOPBACK, closed_port_url
from vk_devtools.standins import dcgm as dcgm_standin
from vk_devtools.standins.sysfs import SysfsTree
from vk_provider.interconnect.exporter import Exporter, ExporterSettings, ListenError
from vk_provider.interconnect.names import IB_COUNTERS, NVLINK_COUNTERS

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def dcgm() -> AsyncIterator[tuple[str, dcgm_standin.Exporter]]:
    exporter = dcgm_standin.Exporter.for_node("gpu-a", 2)
    runner = web.AppRunner(dcgm_standin.make_app(exporter))
    await runner.setup()
    site = web.TCPSite(runner, LOOPBACK, 0)
    await site.start()
    try:
        yield f"http://{LOOPBACK}:{runner.addresses[0][1]}", exporter
    finally:
        await runner.cleanup()


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


def values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_the_endpoint_serves_every_contract_name_with_rates_of_the_last_interval(
    tmp_path: Path, dcgm: tuple[str, dcgm_standin.Exporter]
) -> None:
    dcgm_url, gpus = dcgm
    tree = SysfsTree(tmp_path)
    tree.add_port("mlx5_0", 1)
    clock = Clock()
    settings = ExporterSettings(
        sysfs_root=tmp_path, listen_address=LOOPBACK, port=0, dcgm_exporter_url=f"{dcgm_url}/metrics"
    )
    exporter = Exporter(settings, clock=clock)
    await exporter.start()
    try:
        base = f"http://{LOOPBACK}:{exporter.port}"
        assert exporter.port != 0
        assert (await get(f"{base}/readyz"))[0] == 503  # nothing read yet
        await exporter.read_once()
        assert (await get(f"{base}/readyz"))[0] == 200
        tree.bump("mlx5_0", 1, "symbol_error", 30)
        dcgm_standin.apply_change(gpus.gpus[1], {"nvlinkCrcFlitErrors": 4, "nvlinkReplayErrors": 9})
        clock.now += 10
        await exporter.read_once()
        status, text = await get(f"{base}/metrics")
        assert status == 200
    finally:
        await exporter.aclose()
    found = values(text)
    names = {name for name, _ in found}
    for counter in (*IB_COUNTERS[:3], *NVLINK_COUNTERS):
        assert counter.total_name in names
        assert counter.rate_name in names
    port = (("device", "mlx5_0"), ("port", "1"))
    gpu = (("gpu", "1"), ("uuid", gpus.gpus[1].uuid))
    assert found["vk_provider_interconnect_ib_symbol_errors_total", port] == 30
    assert found["vk_provider_interconnect_ib_symbol_errors_per_second", port] == pytest.approx(3.0)
    assert found["vk_provider_interconnect_nvlink_crc_errors_per_second", gpu] == pytest.approx(0.4)
    assert found["vk_provider_interconnect_nvlink_replay_errors_total", gpu] == 9
    assert found["vk_provider_interconnect_read_errors_total", (("source", "dcgm-exporter"),)] == 0
    assert "vk_provider_build_info" in names


async def test_an_unreachable_dcgm_exporter_is_a_read_error_and_infiniband_goes_on(tmp_path: Path) -> None:
    SysfsTree(tmp_path).add_port("mlx5_0", 1)
    settings = ExporterSettings(
        sysfs_root=tmp_path, listen_address=LOOPBACK, port=0, dcgm_exporter_url=f"{closed_port_url()}/metrics"
    )
    exporter = Exporter(settings)
    await exporter.start()
    try:
        await exporter.read_once()
        found = values(exporter.exposition().decode())
    finally:
        await exporter.aclose()
    assert found["vk_provider_interconnect_read_errors_total", (("source", "dcgm-exporter"),)] == 1
    assert (
        found["vk_provider_interconnect_ib_symbol_errors_total", (("device", "mlx5_0"), ("port", "1"))] == 0
    )


async def test_a_port_in_use_is_refused_at_start_naming_it(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        exporter = Exporter(ExporterSettings(sysfs_root=tmp_path, listen_address=LOOPBACK, port=port))
        with pytest.raises(ListenError, match=f"cannot listen on {LOOPBACK}:{port}"):
            await exporter.start()
        await exporter.aclose()


async def test_a_lasting_problem_is_counted_every_read_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree = SysfsTree(tmp_path)
    tree.add_port("mlx5_0", 1)
    tree.remove("mlx5_0", 1, "link_downed")
    exporter = Exporter(ExporterSettings(sysfs_root=tmp_path, listen_address=LOOPBACK, port=0))
    with caplog.at_level("WARNING", logger="vk_provider.interconnect.exporter"):
        for _ in range(3):
            await exporter.read_once()
    found = values(exporter.exposition().decode())
    assert found["vk_provider_interconnect_read_errors_total", (("source", "sysfs"),)] == 3
    missing = tree.counter_path("mlx5_0", 1, "link_downed")
    assert [record.getMessage() for record in caplog.records] == [
        f"read error (counted in read_errors_total; logged once): {missing}: missing"
    ]
