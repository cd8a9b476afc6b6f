"""The interconnect exporter's *_per_second gauges as the policy reads them, and its thresholds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.unit.local import LOOPBACK
from vk_devtools.standins.sysfs import SysfsTree
from vk_provider.interconnect.exporter import Exporter, ExporterSettings
from vk_provider.policy.interconnect import (
    IB_LINK_DOWNED,
    IB_SYMBOL_ERRORS,
    NVLINK_CRC_ERRORS,
    InterconnectSettings,
    LinkRate,
    faulty_links,
    parse_interconnect_metrics,
)
from vk_provider.policy.scrape import MalformedExporterText

pytestmark = pytest.mark.unit

# In the contract's names (issue 34): a counter and a gauge per source, IB by {device, port}, NVLink
# by {gpu, uuid}; the policy reads the gauges only.
EXPORTER_TEXT = """\
# HELP vk_provider_interconnect_ib_symbol_errors_total Symbol errors the port counted (counters/symbol_error).
# TYPE vk_provider_interconnect_ib_symbol_errors_total counter
vk_provider_interconnect_ib_symbol_errors_total{device="mlx5_0",port="1"} 1200
vk_provider_interconnect_ib_symbol_errors_total{device="mlx5_1",port="1"} 3
# HELP vk_provider_interconnect_ib_symbol_errors_per_second Symbol errors per second over the last interval.
# TYPE vk_provider_interconnect_ib_symbol_errors_per_second gauge
vk_provider_interconnect_ib_symbol_errors_per_second{device="mlx5_0",port="1"} 12.5
vk_provider_interconnect_ib_symbol_errors_per_second{device="mlx5_1",port="1"} 0
# TYPE vk_provider_interconnect_ib_link_downed_per_second gauge
vk_provider_interconnect_ib_link_downed_per_second{device="mlx5_0",port="1"} 0
vk_provider_interconnect_ib_link_downed_per_second{device="mlx5_1",port="1"} 0.1
# TYPE vk_provider_interconnect_ib_receive_errors_per_second gauge
vk_provider_interconnect_ib_receive_errors_per_second{device="mlx5_0",port="1"} NaN
# TYPE vk_provider_interconnect_nvlink_crc_errors_per_second gauge
vk_provider_interconnect_nvlink_crc_errors_per_second{gpu="3",uuid="GPU-3"} 4
# TYPE vk_provider_interconnect_nvlink_replay_errors_per_second gauge
vk_provider_interconnect_nvlink_replay_errors_per_second{gpu="3",uuid="GPU-3"} 0
# TYPE vk_provider_interconnect_read_errors_total counter
vk_provider_interconnect_read_errors_total{source="sysfs"} 0
"""


def settings(**thresholds: float) -> InterconnectSettings:
    return InterconnectSettings.from_spec(
        {
            "exporter": {"namespace": "vk", "selector": {"matchLabels": {"app": "ic"}}},
            "thresholds": thresholds,
        }
    )


def test_the_gauges_are_read_and_the_counters_left() -> None:
    rates = parse_interconnect_metrics(EXPORTER_TEXT)
    assert LinkRate(IB_SYMBOL_ERRORS, "mlx5_0 port 1", 12.5) in rates
    assert LinkRate(IB_LINK_DOWNED, "mlx5_1 port 1", 0.1) in rates
    assert LinkRate(NVLINK_CRC_ERRORS, "GPU 3", 4.0) in rates
    assert len(rates) == 6  # 2 symbol, 2 link-down, 2 NVLink; the NaN receive rate reads as absent
    assert all(rate.gauge.endswith("_per_second") for rate in rates)


def test_a_rate_above_its_threshold_is_a_faulty_link() -> None:
    rates = parse_interconnect_metrics(EXPORTER_TEXT)
    assert faulty_links(rates, settings()) == [
        "mlx5_0 port 1: 12.5 symbol errors/s > 0/s",
        "mlx5_1 port 1: 0.1 link-down events/s > 0/s",
        "GPU 3: 4 NVLink CRC errors/s > 0/s",
    ]
    lenient = settings(ibSymbolErrorsPerSecond=20, ibLinkDownedPerSecond=0.1, nvlinkCrcErrorsPerSecond=4)
    assert faulty_links(rates, lenient) == []  # strictly above: at the threshold is fine


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<html>502</html>\n", "line 1 is not Prometheus text"),
        (
            'vk_provider_interconnect_ib_symbol_errors_per_second{port="1"} 3\n',
            "needs device and port labels",
        ),
        ("vk_provider_interconnect_nvlink_crc_errors_per_second 3\n", "needs a gpu or uuid label"),
    ],
)
def test_text_that_is_not_the_exporter_s_names_the_line(text: str, message: str) -> None:
    with pytest.raises(MalformedExporterText, match=message):
        parse_interconnect_metrics(text)


def test_defaults() -> None:
    read = settings()
    assert read.exporter.port == 9402
    assert read.exporter.path == "/metrics"
    assert set(read.thresholds.values()) == {0.0}
    assert "interconnect exporter" in read.exporter.name


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ([], r"spec\.health\.interconnect must be a mapping"),
        ({"exporter": {"namespace": "vk"}}, r"interconnect\.exporter\.selector"),
        (
            {"exporter": {"namespace": "vk", "selector": {"matchLabels": {"a": "b"}}}, "thresholds": []},
            "thresholds",
        ),
        (
            {"exporter": {"namespace": "vk", "selector": {"matchLabels": {"a": "b"}}}, "extra": 1},
            "unknown fields",
        ),
    ],
)
def test_bad_settings_name_the_field(spec: Any, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        InterconnectSettings.from_spec(spec)


async def test_what_the_real_exporter_serves_is_what_the_policy_reads(tmp_path: Path) -> None:
    """The contract both ways: the exporter of `vk_provider.interconnect` on a stand-in tree, its
    text read by the policy (a symbol-error rate of 3/s on one port, the others quiet)."""
    tree = SysfsTree(tmp_path)
    tree.add_port("mlx5_0", 1)
    tree.add_port("mlx5_1", 1)
    clock = [1000.0]
    exporter = Exporter(
        ExporterSettings(sysfs_root=tmp_path, listen_address=LOOPBACK, port=0), clock=lambda: clock[0]
    )
    await exporter.start()
    try:
        await exporter.read_once()
        tree.bump("mlx5_0", 1, "symbol_error", 30)
        clock[0] += 10
        await exporter.read_once()
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://{LOOPBACK}:{exporter.port}/metrics") as response,
        ):
            text = await response.text()
    finally:
        await exporter.aclose()
    rates = parse_interconnect_metrics(text)
    assert {rate.link for rate in rates} == {"mlx5_0 port 1", "mlx5_1 port 1"}
    assert faulty_links(rates, settings()) == ["mlx5_0 port 1: 3 symbol errors/s > 0/s"]
    assert faulty_links(rates, settings(ibSymbolErrorsPerSecond=3)) == []
