"""The router's active checks: verdicts by threshold, what they GET, and what they report."""

from __future__ import annotations

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from vk_provider.router.metrics import RouterMetrics
from vk_provider.routetable.building import CheckTarget
from vk_provider.routetable.health import ActiveChecks, CheckSettings


class Backend:
    def __init__(self) -> None:
        self.status = 200
        self.paths: list[str] = []

    def app(self) -> web.Application:
        async def answer(request: web.Request) -> web.Response:
            self.paths.append(request.path)
            return web.Response(status=self.status)

        app = web.Application()
        app.router.add_get("/{tail:.*}", answer)
        return app


async def test_verdicts_follow_the_thresholds_and_each_change_rebuilds() -> None:
    backend = Backend()
    changes: list[dict[str, bool]] = []
    metrics = RouterMetrics()
    checks: ActiveChecks

    def changed() -> None:
        changes.append(checks.verdicts)

    checks = ActiveChecks(
        CheckSettings(timeout_seconds=2, healthy_threshold=2, unhealthy_threshold=2),
        on_change=changed,
        metrics=metrics,
    )
    async with TestServer(backend.app()) as server, aiohttp.ClientSession() as session:
        url = str(server.make_url("")).rstrip("/")
        checks.set_targets([CheckTarget(url, url + "/ready")])
        await checks.check_all(session)
        assert checks.verdicts == {}  # one pass is not yet two
        await checks.check_all(session)
        assert changes == [{url: True}]
        backend.status = 503
        await checks.check_all(session)
        assert checks.verdicts == {url: True}  # one failure is not yet two
        await checks.check_all(session)
        assert changes == [{url: True}, {url: False}]
        assert checks.status()[url]["last_result"] == "HTTP 503"
        backend.status = 302  # a redirect passes, as for a kubelet's probe
        await checks.check_all(session)
        await checks.check_all(session)
        assert checks.verdicts == {url: True}
    assert set(backend.paths) == {"/ready"}
    exposition = metrics.exposition().decode()
    assert 'vk_provider_router_active_checks_total{result="pass"} 4.0' in exposition
    assert 'vk_provider_router_active_checks_total{result="fail"} 2.0' in exposition


async def test_an_unreachable_address_fails_and_a_dropped_target_is_forgotten() -> None:
    checks = ActiveChecks(CheckSettings(timeout_seconds=1, unhealthy_threshold=1))
    async with TestServer(Backend().app()) as server, aiohttp.ClientSession() as session:
        dead = f"http://127.0.0.1:{server.port}"
    # The server is closed: nothing listens there any more.
    async with aiohttp.ClientSession() as session:
        checks.set_targets([CheckTarget(dead, dead + "/")])
        await checks.check_all(session)
        assert checks.verdicts == {dead: False}
        assert "Error" in checks.status()[dead]["last_result"]
        checks.set_targets([])
        assert checks.verdicts == {}
        assert checks.status() == {}
