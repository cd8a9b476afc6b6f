"""The router believes no more than it must: hand-made home endpoints are refused, on the real plane,
while legitimate traffic flows. (Signing for other services, and away addresses our nodes did not
seal: test_router_seals.)

- Home: all traffic goes to the home Service's two replicas. A hand-made EndpointSlice labelled with the
  Service's name (as anyone who may write EndpointSlices in the namespace can make one; the pattern of
  CVE-2021-25740) points at a decoy. The router takes home endpoints only from the slices of Kubernetes'
  EndpointSlice controller: the decoy gets nothing, no request fails, and the slice gets one Warning
  Event, not one per resync.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from tests.integration.all_away import (
    ONE_STEP_AWAY,
    describe,
    load,
    more_requests,
    router_log_lines,
    warnings_on,
)
from tests.integration.migration_rig import NAME, Rig, RigFor, pod_range, router_route
from tests.integration.test_router_trust import decoy
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import failures
from vk_provider.kit.kube import MERGE_PATCH
from vk_provider.offload.homeslices import MANAGED_BY_LABEL
from vk_provider.offload.names import (
    UNTRUSTED_ENDPOINT_SLICE_REASON,
)
from vk_provider.routetable.building import SERVICE_NAME_LABEL

pytestmark = pytest.mark.usefixtures("traffic_rbac")

HAND_MADE = "chat-hand-made"
S3_MARKER = "aws-sigv4; service=s3; region=eu-west-1"
MORE_REQUESTS = 60
"""Requests the load must complete after each refusal is seen: a few seconds of traffic at 20/s."""


def decoy_address() -> str:
    """An address of a /24 of the dev pod network no node of this run holds: one the apiserver accepts
    in an EndpointSlice (not loopback) and this host serves."""
    return str(ipaddress.IPv4Network(pod_range()).network_address + 10)


def hand_made_slice(address: str, port: int) -> dict[str, Any]:
    """What someone who may write EndpointSlices makes: the Service's name label, any address, no
    manager (a forged manager label would be refused alike, as would the mirroring controller's)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": HAND_MADE, "labels": {SERVICE_NAME_LABEL: NAME}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }


async def test_a_hand_made_endpointslice_gets_no_home_traffic(rig_for: RigFor, namespace: str) -> None:
    app, decoy_hits = decoy()
    address = decoy_address()
    async with TestServer(app, host=address) as decoy_server, rig_for(ONE_STEP_AWAY) as rig:
        home_before = await _home_endpoints(rig)
        async with load(rig, rate=20) as generator:
            await more_requests(generator, 20)
            created = await rig.api.create(
                f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
                hand_made_slice(address, decoy_server.port),
            )
            uid = created["metadata"]["uid"]
            events = await wait_for(
                lambda: warnings_on(rig, uid, UNTRUSTED_ENDPOINT_SLICE_REASON),
                timeout_seconds=30,
                what=f"the router's {UNTRUSTED_ENDPOINT_SLICE_REASON} Event:\n{rig.router.log_tail(20)}",
            )
            # Resyncs: each change of the slice wakes a rebuild that reads it again; no second Event.
            # Each change is given the time of a third of the remaining requests to be seen.
            path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/{HAND_MADE}"
            for round_ in range(3):
                await rig.api.patch(
                    path, {"metadata": {"annotations": {"touched": str(round_)}}}, content_type=MERGE_PATCH
                )
                await more_requests(generator, MORE_REQUESTS // 3)
            home_after = await _home_endpoints(rig)
            await generator.stop()
    outcomes = generator.outcomes
    assert not failures(outcomes), describe(failures(outcomes))
    assert decoy_hits == [], decoy_hits
    assert {rig.side_of(outcome.served_by) for outcome in outcomes} == {"home"}
    assert home_before == home_after == {"total": 2, "usable": 2}, (home_before, home_after)
    for event in events:
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "EndpointSlice"
        assert f"no {MANAGED_BY_LABEL} label" in str(event["message"])
    # Routers of other tests that watch the whole cluster may warn too: this router's log says it
    # warned exactly once.
    ours = router_log_lines(rig, UNTRUSTED_ENDPOINT_SLICE_REASON, HAND_MADE)
    assert len(ours) == 1, ours
    print(
        f"{len(outcomes)} requests, 0 failed, all home, 0 to the hand-made slice's {address}; "
        f"event: {events[0]['message']}"
    )


async def _home_endpoints(rig: Rig) -> dict[str, int]:
    route = await router_route(rig)
    assert route is not None
    home: dict[str, int] = route["endpoints"]["home"]
    return {"total": home["total"], "usable": home["usable"]}
