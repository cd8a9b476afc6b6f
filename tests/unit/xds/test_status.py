"""The xDS server's `/-/status`, `/-/metrics` and `/-/healthz`: which weight each Envoy has applied.

The weights that matter are those an Envoy has ACKed, so the main tests drive a real Envoy; a stream
written here by hand stands in for an Envoy that stops ACKing (a real one cannot be held back).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.local import LOOPBACK, until
from vk_provider import __version__
from vk_provider.routetable.table import Endpoint, RouteTable
from vk_provider.xds.names import (
    CLUSTER_TYPE,
    LISTENER_TYPE,
    LOAD_ASSIGNMENT_TYPE,
    ROUTE_CONFIGURATION_NAME,
    ROUTE_CONFIGURATION_TYPE,
)
from vk_provider.xds.resources import build_resources
from vk_provider.xds.running import serve_xds
from vk_provider.xds.server import XdsServer
from vk_provider.xds.status import serving_status
from vk_provider.xds.tracking import WeightHistory

from . import route, table
from .running_envoy import requires_envoy
from .test_envoy import APPLY_SECONDS, _with_invalid_cluster, plane

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

GAUGES = {
    "vk_provider_xds_version",
    "vk_provider_xds_connected_envoys",
    "vk_provider_xds_envoy_applied_version",
    "vk_provider_xds_nacks",
    "vk_provider_build_info",
}


@dataclasses.dataclass
class StatusClient:
    url: str
    session: aiohttp.ClientSession

    async def get(self, path: str) -> tuple[int, str]:
        async with self.session.get(self.url + path) as response:
            return response.status, await response.text()

    async def status(self) -> dict[str, Any]:
        code, text = await self.get("/-/status")
        assert code == 200, text
        document: dict[str, Any] = json.loads(text)
        return document

    async def metrics(self) -> Samples:
        """Every sample, by name and labels, once the text has parsed and every family is a gauge."""
        code, text = await self.get("/-/metrics")
        assert code == 200, text
        families = list(text_string_to_metric_families(text))
        assert {family.name: family.type for family in families} == dict.fromkeys(GAUGES, "gauge")
        samples = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in families
            for sample in family.samples
        }
        # The process's version, always there; the tests compare the rest.
        assert samples.pop(("vk_provider_build_info", (("version", __version__),))) == 1
        return samples


@contextlib.asynccontextmanager
async def status_client(server: XdsServer) -> AsyncIterator[StatusClient]:
    async with serving_status(server, LOOPBACK, 0) as port, aiohttp.ClientSession() as session:
        yield StatusClient(f"http://{LOOPBACK}:{port}", session)


def web(away_weight: int) -> RouteTable:
    """`ml/web`: two home endpoints (one draining) and one away, at `away_weight`."""
    return table(
        route(
            namespace="ml",
            name="web",
            away_weight=away_weight,
            home=(Endpoint("http://127.0.0.1:9001"), Endpoint("http://127.0.0.2:9001", terminating=True)),
            away=(Endpoint("http://127.0.0.1:9002"),),
        )
    )


def web_entry(away_weight: int, applied: dict[str, int | None]) -> dict[str, Any]:
    return {
        "namespace": "ml",
        "name": "web",
        "away_weight": away_weight,
        "endpoints": {"home": {"total": 2, "usable": 1}, "away": {"total": 1, "usable": 1}},
        "applied": applied,
    }


@requires_envoy
async def test_the_weight_an_envoy_has_acked_is_reported_and_follows_each_ack(tmp_path: Path) -> None:
    async with plane(tmp_path) as envoy_plane, status_client(envoy_plane.server) as client:
        node = envoy_plane.envoy.node_id
        at_40, _ = await envoy_plane.apply(web(40))
        assert await client.status() == {
            "version": at_40,
            "envoys": [{"node": node, "applied_version": at_40, "nacks": []}],
            "routes": [web_entry(40, {node: 40})],
        }

        at_60, _ = await envoy_plane.apply(web(60))
        assert at_60 > at_40
        assert await client.status() == {
            "version": at_60,
            "envoys": [{"node": node, "applied_version": at_60, "nacks": []}],
            "routes": [web_entry(60, {node: 60})],
        }


@requires_envoy
async def test_a_refused_version_leaves_the_weight_before_applied_and_the_refusal_listed(
    tmp_path: Path,
) -> None:
    async with plane(tmp_path) as envoy_plane, status_client(envoy_plane.server) as client:
        server, node = envoy_plane.server, envoy_plane.envoy.node_id
        good, _ = await envoy_plane.apply(web(40))
        wanted = web(60)
        broken = _with_invalid_cluster(build_resources(wanted, server.settings))
        refused = server.publish(broken, table=wanted)
        assert refused == good + 1
        await until(lambda: bool(server.nacks()), within=APPLY_SECONDS)

        status = await client.status()
        assert status["version"] == refused
        (envoy,) = status["envoys"]
        (nack,) = envoy.pop("nacks")
        assert envoy == {"node": node, "applied_version": good}
        assert (nack["type_url"], nack["version"]) == (CLUSTER_TYPE, refused)
        assert "positive duration" in nack["message"]
        assert status["routes"] == [web_entry(60, {node: 40})]

        assert await client.metrics() == {
            ("vk_provider_xds_version", ()): refused,
            ("vk_provider_xds_connected_envoys", ()): 1,
            ("vk_provider_xds_envoy_applied_version", (("node", node),)): good,
            ("vk_provider_xds_nacks", (("node", node),)): 1,
        }


async def ack_once(call: Any, node: str, load_assignments: tuple[str, ...]) -> None:
    """Ask for every type and ACK what comes, as an Envoy starting does; then never read again: the
    versions that follow stay unACKed."""
    for type_url, names in (
        (CLUSTER_TYPE, ()),
        (LOAD_ASSIGNMENT_TYPE, load_assignments),
        (LISTENER_TYPE, ()),
        (ROUTE_CONFIGURATION_TYPE, (ROUTE_CONFIGURATION_NAME,)),
    ):
        ask = discovery_pb2.DiscoveryRequest(type_url=type_url, resource_names=names)
        ask.node.id = node
        await call.write(ask)
        response = await call.read()
        await call.write(
            discovery_pb2.DiscoveryRequest(
                type_url=type_url,
                resource_names=names,
                version_info=response.version_info,
                response_nonce=response.nonce,
            )
        )


async def ask_only(call: Any, node: str) -> None:
    """Ask for clusters and never ACK them."""
    ask = discovery_pb2.DiscoveryRequest(type_url=CLUSTER_TYPE)
    ask.node.id = node
    await call.write(ask)
    await call.read()


async def test_each_envoy_is_reported_at_the_weights_of_its_own_version_not_the_tables() -> None:
    server = XdsServer()
    first = server.update(web(40))
    assert server.store.current is not None
    load_assignments = tuple(server.store.current.resources.of_type(LOAD_ASSIGNMENT_TYPE))
    port = await server.start(LOOPBACK, 0)
    try:
        async with (
            status_client(server) as client,
            grpc.aio.insecure_channel(f"{LOOPBACK}:{port}") as channel,
        ):
            stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
            lagging, silent = stub.StreamAggregatedResources(), stub.StreamAggregatedResources()
            await ack_once(lagging, "lagging", load_assignments)
            await ask_only(silent, "silent")
            await until(lambda: server.acked() == {"lagging": first, "silent": 0})

            unknown_to_lagging = route(namespace="ml", name="new", away_weight=100, hosts=("n.example",))
            newer = server.update(table(*web(60).routes, unknown_to_lagging))
            status = await client.status()
            assert status["version"] == newer
            assert status["envoys"] == [
                {"node": "lagging", "applied_version": first, "nacks": []},
                {"node": "silent", "applied_version": 0, "nacks": []},
            ]
            applied = {entry["name"]: (entry["away_weight"], entry["applied"]) for entry in status["routes"]}
            assert applied == {
                "web": (60, {"lagging": 40, "silent": None}),
                "new": (100, {"lagging": None, "silent": None}),  # not in the version lagging has
            }
            assert await client.metrics() == {
                ("vk_provider_xds_version", ()): newer,
                ("vk_provider_xds_connected_envoys", ()): 2,
                ("vk_provider_xds_envoy_applied_version", (("node", "lagging"),)): first,
                ("vk_provider_xds_envoy_applied_version", (("node", "silent"),)): 0,
                ("vk_provider_xds_nacks", (("node", "lagging"),)): 0,
                ("vk_provider_xds_nacks", (("node", "silent"),)): 0,
            }
            lagging.cancel()
            silent.cancel()
    finally:
        await server.stop(0)


async def test_with_no_envoy_connected_there_are_no_envoys_and_nothing_applied() -> None:
    server = XdsServer()
    async with status_client(server) as client:
        assert await client.status() == {"version": 0, "envoys": [], "routes": []}
        version = server.update(web(40))
        assert await client.status() == {"version": version, "envoys": [], "routes": [web_entry(40, {})]}
        assert await client.metrics() == {
            ("vk_provider_xds_version", ()): version,
            ("vk_provider_xds_connected_envoys", ()): 0,
        }


async def test_healthz_answers_ok_and_other_paths_are_not_found() -> None:
    async with status_client(XdsServer()) as client:
        assert await client.get("/-/healthz") == (200, "ok\n")
        code, _ = await client.get("/-/nothing")
        assert code == 404


def test_the_history_keeps_only_the_newest_versions() -> None:
    history = WeightHistory(limit=3)
    for version in range(1, 6):
        history.record(version, table(route(name="web", away_weight=version * 10)))
    assert [history.weight(version, "default", "web") for version in range(1, 6)] == [None, None, 30, 40, 50]
    assert history.weight(5, "default", "other") is None
    assert history.weight(5, "elsewhere", "web") is None
    with pytest.raises(ValueError, match="at least 1"):
        WeightHistory(limit=0)


def test_a_version_served_again_for_a_new_table_stands_for_that_tables_weights() -> None:
    server = XdsServer()
    # Without endpoints the route answers by itself: its weight changes nothing Envoy gets.
    first = server.update(table(route(name="web", away_weight=40)))
    assert server.update(table(route(name="web", away_weight=60))) == first
    assert server.weights.weight(first, "default", "web") == 60
    assert server.table.routes[0].away_weight == 60


async def test_serve_xds_serves_the_status_beside_xds_until_cancelled() -> None:
    loop = asyncio.get_running_loop()
    xds_started: asyncio.Future[XdsServer] = loop.create_future()
    status_started: asyncio.Future[int] = loop.create_future()

    async def source(apply: Callable[[RouteTable], None]) -> None:
        apply(web(40))

    serving = asyncio.create_task(
        serve_xds(
            source,
            LOOPBACK,
            0,
            status=(LOOPBACK, 0),
            started=lambda server, _: xds_started.set_result(server),
            status_started=status_started.set_result,
        )
    )
    async with asyncio.timeout(5):
        server, port = await xds_started, await status_started
    await until(lambda: server.version == 1)
    url = f"http://{LOOPBACK}:{port}/-/status"
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as response:
            assert await response.json() == {"version": 1, "envoys": [], "routes": [web_entry(40, {})]}
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        with pytest.raises(aiohttp.ClientConnectorError):
            async with session.get(url):
                pass
