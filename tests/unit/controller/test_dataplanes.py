"""Which data plane an Offload's migration runs on, and what the controller learns from the xDS server."""

from __future__ import annotations

import pytest

from vk_provider.controller.dataplanes import BuiltinRouters, DataPlaneNotConfigured, DataPlanes, EnvoyFleet
from vk_provider.controller.routers import RouterDirectory, RouterUnreachable
from vk_provider.offload.spec import parse_offload
from vk_provider.routetable.table import RouteTable
from vk_provider.xds.server import XdsServer
from vk_provider.xds.status import serving_status


def offload(data_plane: str) -> dict[str, object]:
    return {
        "metadata": {"namespace": "ml", "name": "chat"},
        "spec": {
            "home": {"deployment": "chat", "service": "chat"},
            "placement": "home",
            "route": {"hosts": ["chat.test"]},
            "traffic": {"dataPlane": data_plane},
        },
    }


def routers() -> RouterDirectory:
    return RouterDirectory(None, urls=["http://127.0.0.1:9"])


def test_each_offload_gets_the_data_plane_it_names() -> None:
    builtin = BuiltinRouters(routers())
    envoy = EnvoyFleet("http://127.0.0.1:9", routers())
    planes = DataPlanes(builtin, envoy)
    assert planes.of(parse_offload(offload("builtin"))) is builtin
    assert planes.of(parse_offload(offload("envoy"))) is envoy


def test_a_data_plane_the_controller_was_not_started_with_is_refused_with_the_flag_to_add() -> None:
    planes = DataPlanes(BuiltinRouters(routers()))
    with pytest.raises(DataPlaneNotConfigured, match=r"envoy.*--envoy-xds-url.*it drives: builtin"):
        planes.of(parse_offload(offload("envoy")))


async def test_without_a_connected_envoy_nothing_counts_as_applied() -> None:
    server = XdsServer()
    server.update(RouteTable())
    async with serving_status(server, "127.0.0.1", 0) as port:
        fleet = EnvoyFleet(f"http://127.0.0.1:{port}", routers())
        try:
            with pytest.raises(RouterUnreachable, match="no Envoy is connected to the xDS server"):
                await fleet.views(parse_offload(offload("envoy")))
        finally:
            await fleet.close()


async def test_an_unreachable_xds_server_is_named() -> None:
    fleet = EnvoyFleet("http://127.0.0.1:9", routers())
    try:
        with pytest.raises(RouterUnreachable, match=r"the xDS server http://127.0.0.1:9/-/status"):
            await fleet.views(parse_offload(offload("envoy")))
    finally:
        await fleet.close()
