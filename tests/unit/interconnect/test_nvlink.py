"""NVLink error counters from a dcgm-exporter's text: the stand-in's, real lines, and text that is not it."""

# ruff: noqa: E501 -- the exporter's real lines, label for label, are longer than the house limit

from __future__ import annotations

import pytest

from vk_devtools.standins import dcgm as standin
from vk_provider.interconnect.names import NVLINK_CRC_ERRORS, NVLINK_RECOVERY_ERRORS, NVLINK_REPLAY_ERRORS
from vk_provider.interconnect.nvlink import GpuNvlink, NvlinkReadError, parse_nvlink_counters

pytestmark = pytest.mark.unit

# As dcgm-exporter 4.x serves the NVLink fields once its counters file enables them.
EXPORTER_TEXT = """\
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-604ac76c",pci_bus_id="00000000:00:1E.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="dcgm-xpn6b"} 41
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-604ac76c",device="nvidia0",Hostname="dcgm-xpn6b"}
# HELP DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL Total number of NVLink flow-control CRC errors.
# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="0",UUID="GPU-604ac76c",device="nvidia0",Hostname="dcgm-xpn6b"} 3
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="1",UUID="GPU-1b2c",device="nvidia1",Hostname="dcgm-xpn6b"} 0
# HELP DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL Total number of NVLink data CRC errors.
# TYPE DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL{gpu="0",UUID="GPU-604ac76c",device="nvidia0",Hostname="dcgm-xpn6b"} 4
DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL{gpu="1",UUID="GPU-1b2c",device="nvidia1",Hostname="dcgm-xpn6b"}
# HELP DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL Total number of NVLink retries.
# TYPE DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{gpu="0",UUID="GPU-604ac76c",device="nvidia0",Hostname="dcgm-xpn6b"} 12
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{gpu="1",UUID="GPU-1b2c",device="nvidia1",Hostname="dcgm-xpn6b"} 1
"""


def test_crc_is_flit_plus_data_and_a_field_not_served_is_absent() -> None:
    gpus = parse_nvlink_counters(EXPORTER_TEXT)
    assert gpus == [
        GpuNvlink("0", "GPU-604ac76c", {NVLINK_CRC_ERRORS: 7, NVLINK_REPLAY_ERRORS: 12}),
        # GPU 1's data CRC line has no value: its CRC total is the flit count alone.
        GpuNvlink("1", "GPU-1b2c", {NVLINK_CRC_ERRORS: 0, NVLINK_REPLAY_ERRORS: 1}),
    ]


def test_the_stand_in_s_raised_counters_come_through() -> None:
    exporter = standin.Exporter.for_node("gpu-a", 2)
    exporter.change("1", {"nvlinkCrcFlitErrors": 5, "nvlinkCrcDataErrors": 2, "nvlinkReplayErrors": 30})
    exporter.change("0", {"nvlinkRecoveryErrors": 1})
    gpus = {gpu.gpu: gpu for gpu in parse_nvlink_counters(exporter.render())}
    assert gpus["1"].uuid == exporter.gpus[1].uuid
    assert gpus["1"].totals == {NVLINK_CRC_ERRORS: 7, NVLINK_REPLAY_ERRORS: 30, NVLINK_RECOVERY_ERRORS: 0}
    assert gpus["0"].totals == {NVLINK_CRC_ERRORS: 0, NVLINK_REPLAY_ERRORS: 0, NVLINK_RECOVERY_ERRORS: 1}


def test_an_exporter_without_the_nvlink_fields_gives_no_gpus() -> None:
    lines = [line for line in EXPORTER_TEXT.splitlines() if "NVLINK" not in line]
    assert parse_nvlink_counters("\n".join(lines)) == []
    assert parse_nvlink_counters("") == []


def test_text_that_is_not_a_dcgm_exporter_s_is_refused() -> None:
    with pytest.raises(NvlinkReadError, match="not a dcgm-exporter's text"):
        parse_nvlink_counters("<html><body><h1>502 Bad Gateway</h1></body></html>\n")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{gpu="0",UUID="GPU-1"} many', "not Prometheus text"),
        ('DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{Hostname="x"} 3', "neither a gpu nor a UUID"),
    ],
)
def test_a_malformed_nvlink_line_is_refused_naming_it(line: str, problem: str) -> None:
    with pytest.raises(NvlinkReadError, match=problem):
        parse_nvlink_counters(line + "\n")
