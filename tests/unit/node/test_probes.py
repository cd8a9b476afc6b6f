"""The node daemon's probe endpoints: liveness at once, readiness once the daemon reached the cluster."""

from __future__ import annotations

import aiohttp
import pytest

from vk_provider.kit.probes import Readiness, serve_probes
from vk_provider.node.settings import SettingsError, load_settings


async def test_healthz_answers_at_once_and_readyz_only_once_ready(unused_tcp_port: int) -> None:
    readiness = Readiness()
    runner = await serve_probes(readiness, "127.0.0.1", unused_tcp_port)
    base = f"http://127.0.0.1:{unused_tcp_port}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/healthz") as response:
                assert response.status == 200
            async with session.get(f"{base}/readyz") as response:
                assert response.status == 503
                assert "apiserver" in await response.text()
            readiness.set_ready()
            async with session.get(f"{base}/readyz") as response:
                assert response.status == 200
    finally:
        await runner.cleanup()


def test_health_port_is_off_by_default_and_checked() -> None:
    assert load_settings(config_file=None, environ={}, flags={}).health_port == 0
    assert load_settings(config_file=None, environ={}, flags={"health_port": "10248"}).health_port == 10248
    with pytest.raises(SettingsError, match="health_port"):
        load_settings(config_file=None, environ={}, flags={"health_port": "70000"})
