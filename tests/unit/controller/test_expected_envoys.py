"""A weight step waits for the Envoys the controller expects, never for another client of the xDS server.

A stray (any client that connected and says its own node id) must not hold a step; an expected Envoy
that is not connected must. Checked on the pure selection, then end to end on a real xDS server's
status with a connected client that never ACKs.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from envoy.service.discovery.v3 import ads_pb2_grpc

from tests.unit.local import until
from tests.unit.xds import route, table
from tests.unit.xds.clients import cluster_request
from tests.unit.xds.running_envoy import requires_envoy
from tests.unit.xds.test_envoy import Echo, envoy_offload, plane
from vk_provider.cli import build_parser
from vk_provider.controller import expectedenvoys
from vk_provider.controller.dataplanes import EnvoyFleet
from vk_provider.controller.routers import RouterDirectory, RouteView
from vk_provider.kit.kube import KubeApi
from vk_provider.xds.status import serving_status

USABLE = {"home": 1, "away": 1}
NOT_CONNECTED = {"home": 0, "away": 0}


class ReadyPods:
    """The one call RouterDirectory makes to the API: list the pods of a selector (all Ready here)."""

    def __init__(self, *names: str) -> None:
        self.names = names

    async def get(self, path: str, *, query: dict[str, str]) -> dict[str, Any]:
        ready = [{"type": "Ready", "status": "True"}]
        return {
            "items": [
                {"metadata": {"name": name}, "status": {"podIP": f"10.0.0.{number}", "conditions": ready}}
                for number, name in enumerate(self.names, start=1)
            ]
        }


def test_by_name_the_expected_envoys_are_waited_for_and_any_other_client_is_a_stray() -> None:
    selection = expectedenvoys.by_name({"envoy-0": 50, "stray": None}, ["envoy-0", "envoy-1"], USABLE)
    assert selection.views == [
        RouteView("Envoy envoy-0", 50, USABLE),
        RouteView("Envoy envoy-1 (not connected to the xDS server)", None, NOT_CONNECTED),
    ]
    assert selection.strays == ["stray"]


def test_by_name_a_stray_that_never_acks_does_not_hold_a_step_the_envoys_applied() -> None:
    selection = expectedenvoys.by_name(
        {"envoy-0": 50, "envoy-1": 50, "stray": None}, ["envoy-0", "envoy-1"], USABLE
    )
    assert [view.away_weight for view in selection.views] == [50, 50]


def test_by_count_the_envoys_applying_the_served_weight_are_counted_first() -> None:
    selection = expectedenvoys.by_count({"a-stray": None, "envoy-0": 50, "envoy-1": 50}, 2, 50, USABLE)
    assert selection.views == [RouteView("Envoy envoy-0", 50, USABLE), RouteView("Envoy envoy-1", 50, USABLE)]
    assert selection.strays == ["a-stray"]


def test_by_count_a_lagging_envoy_holds_the_step_when_no_more_clients_than_expected_are_connected() -> None:
    selection = expectedenvoys.by_count({"envoy-0": 50, "envoy-1": 25}, 2, 50, USABLE)
    assert [view.away_weight for view in selection.views] == [50, 25]
    assert selection.strays == []


def test_by_count_fewer_connected_than_expected_leaves_the_rest_not_applied() -> None:
    selection = expectedenvoys.by_count({"envoy-0": 50}, 2, 50, USABLE)
    assert selection.views == [
        RouteView("Envoy envoy-0", 50, USABLE),
        RouteView("an Envoy replica not connected to the xDS server (1 of 2 are)", None, NOT_CONNECTED),
    ]


@requires_envoy
async def test_a_connected_client_that_never_acks_is_logged_as_a_stray_and_does_not_hold_the_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A real Envoy applies weight 40; a second client connected to the xDS server and ACKs nothing."""
    home, away = Echo("home"), Echo("away")
    async with (
        plane(tmp_path, home, away) as envoy_plane,
        serving_status(envoy_plane.server, "127.0.0.1", 0) as status_port,
        grpc.aio.insecure_channel(f"127.0.0.1:{envoy_plane.xds_port}") as channel,
    ):
        await envoy_plane.apply(
            table(route(away_weight=40, home=(home.endpoint(),), away=(away.endpoint(),)))
        )
        stray = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources()
        await stray.write(cluster_request("stray"))
        await stray.read()  # answered, never ACKed
        await until(lambda: envoy_plane.server.acked().get("stray") == 0)
        strays: list[int] = []
        admins = RouterDirectory(None, urls=[envoy_plane.envoy.admin_url], kind="envoy")
        fleet = EnvoyFleet(f"http://127.0.0.1:{status_port}", admins, strays_seen=strays.append)
        # Found by label: the Ready pods' names are the node ids waited for, connected or not.
        pods = ReadyPods("envoy-test-1", "envoy-gone")
        by_label = RouterDirectory(
            cast(KubeApi, pods), namespace="system", selector="app=envoy", kind="envoy", port=9902
        )
        labelled = EnvoyFleet(f"http://127.0.0.1:{status_port}", by_label)
        try:
            with caplog.at_level(logging.WARNING):
                views = await fleet.views(envoy_offload("chat"))
            labelled_views = await labelled.views(envoy_offload("chat"))
        finally:
            await fleet.close()
            await labelled.close()
            stray.cancel()
    assert views == [RouteView("Envoy envoy-test-1", 40, USABLE)]
    assert labelled_views == [
        RouteView("Envoy envoy-gone (not connected to the xDS server)", None, NOT_CONNECTED),
        RouteView("Envoy envoy-test-1", 40, USABLE),
    ]
    assert strays == [1]
    assert any(
        "not Envoys this controller expects" in r.message and "stray" in r.message for r in caplog.records
    )


def test_the_expected_count_is_a_whole_number_of_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert build_parser().parse_args(["controller", "--envoy-expected-count", "3"]).envoy_expected_count == 3
    assert build_parser().parse_args(["controller"]).envoy_expected_count is None
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["controller", "--envoy-expected-count", "0"])
    assert refused.value.code == 2
    assert "--envoy-expected-count" in capsys.readouterr().err
