"""The dcgm-exporter stand-in: its text parses with the policy's parser and carries the values set."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from tests.unit.local import LOOPBACK
from vk_devtools.standins import dcgm as standin
from vk_provider.policy.dcgm import MalformedExporterText, parse_exporter_metrics

pytestmark = pytest.mark.unit


def test_fresh_gpus_parse_as_cool_and_error_free() -> None:
    exporter = standin.Exporter.for_node("gpu-a", 4, hostname="dcgm-standin-x1")
    samples = parse_exporter_metrics(exporter.render())
    assert [sample.gpu for sample in samples] == ["0", "1", "2", "3"]
    assert all(sample.temperature_celsius == 45.0 for sample in samples)
    assert all(sample.xid == 0 and not sample.row_remap_failure for sample in samples)
    assert all(sample.tensor_active == 0.0 for sample in samples)
    # UUIDs are distinct and stable for the node, as a real GPU's.
    assert len({sample.uuid for sample in samples}) == 4
    again = parse_exporter_metrics(standin.Exporter.for_node("gpu-a", 4).render())
    assert [sample.uuid for sample in again] == [sample.uuid for sample in samples]


def test_values_set_round_trip_through_the_text() -> None:
    exporter = standin.Exporter.for_node("gpu-a", 4)
    exporter.change("2", {"temperature": 85, "tensorActive": 0.73, "gpuUtil": 100})
    exporter.change("1", {"xid": 79, "rowRemapFailure": True})
    exporter.change("3", {"rowRemapPending": True})
    samples = {sample.gpu: sample for sample in parse_exporter_metrics(exporter.render())}
    assert (samples["3"].row_remap_pending, samples["3"].row_remap_failure) == (True, False)
    assert not samples["1"].row_remap_pending
    assert samples["2"].temperature_celsius == 85.0
    assert samples["2"].tensor_active == pytest.approx(0.73)
    assert (samples["1"].xid, samples["1"].row_remap_failure) == (79, True)
    assert (samples["0"].xid, samples["0"].temperature_celsius) == (0, 45.0)


def test_the_exporters_names_and_labels() -> None:
    text = standin.Exporter.for_node("gpu-a", 1, hostname="dcgm-standin-x1", host_label="hostname").render()
    for name in (
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_DEV_GPU_UTIL",
    ):
        assert f"# TYPE {name} gauge" in text
    line = next(line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_TEMP{"))
    for label in (
        'gpu="0"',
        'UUID="GPU-',
        'device="nvidia0"',
        'modelName="NVIDIA H100',
        'hostname="dcgm-standin-x1"',
    ):
        assert label in line


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": "hot"},
        {"xid": -1},
        {"xid": True},
        {"tensorActive": 1.5},
        {"fan": 3},
        {"rowRemapFailure": 1},
        {"rowRemapPending": "yes"},
    ],
)
def test_a_bad_change_is_refused_and_changes_nothing(change: dict[str, object]) -> None:
    exporter = standin.Exporter.for_node("gpu-a", 2)
    before = exporter.render()
    with pytest.raises(standin.ChangeError):
        exporter.change("all", {"temperature": 90, **change})
    assert exporter.render() == before


def test_unknown_gpu_is_refused() -> None:
    with pytest.raises(standin.ChangeError, match="no GPU '4'"):
        standin.Exporter.for_node("gpu-a", 4).change("4", {"temperature": 80})


def test_a_pod_of_it_is_bound_to_its_node_and_runs_the_image() -> None:
    pod = standin.exporter_pod("dcgm-gpu-a", "gpu-a", gpus=4, labels={"pool": "home"})
    assert pod["spec"]["nodeName"] == "gpu-a"
    assert pod["metadata"]["labels"] == {**standin.EXPORTER_LABELS, "pool": "home"}
    [container] = pod["spec"]["containers"]
    assert container["image"] == standin.DCGM_STANDIN_IMAGE
    assert "command" not in container  # the node's image_entrypoints runs it
    assert standin.parse_arguments(container["args"]).gpus == 4


@pytest.mark.parametrize("argv", [["--node", "a", "--listen", "9400"], ["--node", "a", "--gpus", "0"], []])
def test_bad_command_lines_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        standin.parse_arguments(argv)
    assert exited.value.code == 2


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, standin.Exporter]]:
    exporter = standin.Exporter.for_node("gpu-a", 4)
    runner = web.AppRunner(standin.make_app(exporter))
    await runner.setup()
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port = probe.getsockname()[1]
    await web.TCPSite(runner, LOOPBACK, port).start()
    try:
        yield f"http://{LOOPBACK}:{port}", exporter
    finally:
        await runner.cleanup()


async def metrics_of(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as response:
        assert response.status == 200
        return await response.text()


async def test_control_api_sets_what_metrics_then_serve(served: tuple[str, standin.Exporter]) -> None:
    url, _ = served
    answer = await standin.set_gpu(url, 3, temperature=85, xid=79, row_remap_failure=True, tensor_active=0.5)
    assert answer["gpus"][0]["temperature"] == 85.0
    samples = {sample.gpu: sample for sample in parse_exporter_metrics(await metrics_of(url))}
    assert samples["3"].temperature_celsius == 85.0
    assert samples["3"].xid == 79
    assert samples["3"].row_remap_failure
    assert samples["3"].tensor_active == 0.5
    with pytest.raises(standin.ChangeError, match="xid must be"):
        await standin.set_gpu(url, "all", xid="79")
    async with aiohttp.ClientSession() as session, session.get(f"{url}/gpus") as response:
        listing = await response.json()
    assert [gpu["xid"] for gpu in listing["gpus"]] == [0, 0, 0, 79]


async def test_malformed_mode_serves_what_the_parser_rejects(served: tuple[str, standin.Exporter]) -> None:
    url, _ = served
    await standin.serve_malformed(url)
    with pytest.raises(MalformedExporterText):
        parse_exporter_metrics(await metrics_of(url))
    await standin.serve_malformed(url, False)
    assert len(parse_exporter_metrics(await metrics_of(url))) == 4


def test_nvlink_error_totals_are_served_per_gpu_and_refuse_what_is_no_total() -> None:
    exporter = standin.Exporter.for_node("gpu-a", 2)
    exporter.change("1", {"nvlinkReplayErrors": 12, "nvlinkCrcFlitErrors": 3})
    lines = [line for line in exporter.render().splitlines() if line.startswith("DCGM_FI_DEV_NVLINK_")]
    assert len(lines) == 4 * 2  # every NVLink field for every GPU, 0 until raised
    assert [line.rsplit(" ", 1)[1] for line in lines if "REPLAY" in line] == ["0", "12"]
    assert exporter.gpus[1].to_json()["nvlinkCrcFlitErrors"] == 3
    for bad in (-1, 1.5, True, "7"):
        with pytest.raises(standin.ChangeError, match="nvlinkReplayErrors must be a running total"):
            exporter.change("all", {"nvlinkReplayErrors": bad})
    assert exporter.gpus[1].nvlink_errors["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"] == 12


async def test_set_gpu_takes_nvlink_totals_as_keywords(served: tuple[str, standin.Exporter]) -> None:
    url, exporter = served
    await standin.set_gpu(url, 0, nvlink_crc_data_errors=5, nvlink_recovery_errors=1)
    assert exporter.gpus[0].to_json()["nvlinkCrcDataErrors"] == 5
    assert exporter.gpus[0].to_json()["nvlinkRecoveryErrors"] == 1
