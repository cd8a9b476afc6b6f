"""`vk-provider interconnect-exporter`: its flags, the environment, and clear errors for bad ones."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.unit.local import LOOPBACK
from vk_devtools.standins.sysfs import SysfsTree
from vk_provider.cli import main, parse_command_line
from vk_provider.interconnect.command import settings_from

pytestmark = pytest.mark.unit


def test_the_contract_s_flags_and_defaults() -> None:
    _, arguments = parse_command_line(["interconnect-exporter"], environ={})
    assert arguments.sysfs_root == Path("/sys")
    assert (arguments.port, arguments.interval_seconds, arguments.dcgm_exporter_url) == (9402, 10.0, None)


def test_every_flag_is_read_and_the_environment_too(tmp_path: Path) -> None:
    _, arguments = parse_command_line(
        [
            "interconnect-exporter",
            f"--sysfs-root={tmp_path}",
            "--port=0",
            "--interval-seconds=0.5",
            "--dcgm-exporter-url=http://127.0.0.1:9400/metrics",
        ],
        environ={"VK_PROVIDER_LISTEN_ADDRESS": "127.0.0.1"},
    )
    settings = settings_from(arguments)
    assert (settings.sysfs_root, settings.port, settings.interval_seconds) == (tmp_path, 0, 0.5)
    assert settings.dcgm_exporter_url == "http://127.0.0.1:9400/metrics"
    assert settings.listen_address == "127.0.0.1"


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--port=65536", "argument --port: expected a port from 0 to 65535, got 65536"),
        ("--port=http", "argument --port: expected a port from 0 to 65535, got 'http'"),
        ("--interval-seconds=0", "argument --interval-seconds: expected a number of seconds greater than 0"),
        ("--dcgm-exporter-url=dcgm:9400", "argument --dcgm-exporter-url: expected an http:// URL"),
    ],
)
def test_a_bad_flag_exits_2_naming_it(flag: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_command_line(["interconnect-exporter", flag], environ={})
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_sysfs_root_that_is_not_there_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "sys"
    assert main(["interconnect-exporter", f"--sysfs-root={missing}"]) == 2
    assert capsys.readouterr().err == (
        f"vk-provider interconnect-exporter: error: --sysfs-root {missing}: no such folder\n"
    )


async def test_the_command_serves_a_tree_until_sigterm(tmp_path: Path) -> None:
    """The command line as a DaemonSet runs it, against a stand-in tree instead of /sys."""
    tree = SysfsTree(tmp_path)
    tree.add_port("mlx5_0", 1)
    tree.set("mlx5_0", 1, "link_downed", 3)
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port = probe.getsockname()[1]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vk_provider",
        "interconnect-exporter",
        f"--sysfs-root={tmp_path}",
        f"--listen-address={LOOPBACK}",
        f"--port={port}",
        "--interval-seconds=0.2",
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        text = await _metrics_once_ready(f"http://{LOOPBACK}:{port}", process)
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            _, stderr = await process.communicate()
    assert 'vk_provider_interconnect_ib_link_downed_total{device="mlx5_0",port="1"} 3.0' in text
    assert process.returncode == 0, stderr.decode()


async def _metrics_once_ready(base: str, process: asyncio.subprocess.Process) -> str:
    async with aiohttp.ClientSession() as session, asyncio.timeout(30):
        while True:
            if process.returncode is not None:
                raise AssertionError(f"the exporter exited with {process.returncode}")
            try:
                async with session.get(f"{base}/readyz") as ready:
                    if ready.status == 200:
                        async with session.get(f"{base}/metrics") as metrics:
                            return await metrics.text()
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.05)  # a bounded poll while the process starts (noqa: sleep-ok)
