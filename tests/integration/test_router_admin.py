"""The router's status and metrics answer on its admin listener only, never on the traffic port.

All traffic is away, so the status names the away endpoints' URLs (what an attacker wants: they can be
called around the router). Under load, `/-/status`, `/-/metrics`, `/-/healthz` and `/-/readyz` sent
to the traffic port with a Host no Offload routes get the router's plain 404, which names nothing;
with the Offload's own host they are relayed to its workloads like any path, whose answer is not the
table. The admin URL serves the table. No request of the load fails.
"""

from __future__ import annotations

import aiohttp
import pytest

from tests.integration.all_away import (
    ONE_STEP_AWAY,
    describe,
    flip_all_away,
    load,
    more_requests,
    router_document,
    wait_for_healthy_checks,
)
from tests.integration.migration_rig import NAME, RigFor
from vk_devtools.demo.load import failures

pytestmark = pytest.mark.usefixtures("traffic_rbac")

ADMIN_PATHS = ("/-/status", "/-/metrics", "/-/healthz", "/-/readyz")


async def test_the_status_page_is_not_served_on_the_traffic_port(rig_for: RigFor) -> None:
    async with rig_for(ONE_STEP_AWAY) as rig, load(rig, rate=20) as generator:
        await flip_all_away(rig)
        table = await wait_for_healthy_checks(rig, 2)
        away_urls = set(table["active_checks"])
        assert len(away_urls) == 2, table
        (route,) = [one for one in table["routes"] if one["name"] == NAME]
        assert route["away_weight"] == 100

        async with aiohttp.ClientSession() as session:
            for path in ADMIN_PATHS:
                async with session.get(
                    f"{rig.router_url}{path}", headers={"Host": "evil.example"}
                ) as response:
                    text = await response.text()
                assert response.status == 404, (path, text)
                assert "no route for host 'evil.example'" in text
                assert not [url for url in away_urls if url in text], text
                async with session.get(f"{rig.router_url}{path}", headers={"Host": rig.host}) as response:
                    relayed = await response.read()
                assert b"active_checks" not in relayed, relayed[:200]
                assert not [url for url in away_urls if url.encode() in relayed], relayed[:200]
        metrics = await router_document(rig, "metrics")
        assert "vk_provider_router_requests_total" in metrics
        await more_requests(generator, 40)
    outcomes = generator.outcomes
    assert not failures(outcomes), describe(failures(outcomes))
    print(f"{len(outcomes)} requests under load, {len(failures(outcomes))} failed")
