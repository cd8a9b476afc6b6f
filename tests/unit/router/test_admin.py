"""Status, metrics and health on the admin listener only: the traffic port relays those paths to a
route like any other, and answers a Host it has no route for with a 404 that names nothing."""

from __future__ import annotations

import pytest

from tests.unit.router import admin_client, backends, route, router_client, table
from vk_provider.router import Router

ADMIN_PATHS = ("/-/status", "/-/metrics", "/-/healthz", "/-/readyz")


@pytest.mark.parametrize("path", ADMIN_PATHS)
async def test_the_traffic_port_serves_no_status_whatever_the_host(path: str) -> None:
    async with backends("home", "away") as (home, away):
        router = Router(
            table(route(hosts=("svc.example",), home=(home.endpoint(),), away=(away.endpoint(),), weight=50))
        )
        async with router_client(router) as client:
            async with client.get(path, headers={"Host": "evil.example"}) as response:
                text = await response.text()
            assert response.status == 404
            assert "no route for host 'evil.example'" in text
            assert home.url not in text
            assert away.url not in text
            # The route's own host gets the path relayed to its backends, as any other path.
            async with client.get(path, headers={"Host": "svc.example"}) as response:
                relayed = await response.text()
            assert response.status == 200
            assert relayed.split()[0] in ("home", "away")
            assert relayed.endswith(f"GET {path}")


async def test_the_admin_listener_answers_health_readiness_status_and_metrics() -> None:
    serving = False
    async with backends("home") as (home,):
        router = Router(table(route(hosts=("svc.example",), home=(home.endpoint(),))))
        async with admin_client(router, ready=lambda: serving) as admin:
            async with admin.get("/-/healthz") as response:
                assert (response.status, await response.text()) == (200, "ok\n")
            async with admin.get("/-/readyz") as response:
                assert response.status == 503  # the table is not loaded yet, or the router stops
            serving = True
            async with admin.get("/-/readyz") as response:
                assert (response.status, await response.text()) == (200, "ok\n")
            async with admin.get("/-/status") as response:
                document = await response.json()
            assert [(one["namespace"], one["name"]) for one in document["routes"]] == [("ml", "web")]
            async with admin.get("/-/metrics") as response:
                assert response.content_type == "text/plain"
                assert "vk_provider_router" in await response.text()
            async with admin.get("/anything-else") as response:
                assert response.status == 404
