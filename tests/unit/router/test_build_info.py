"""`vk_provider_build_info` once per process: a router serving alone and the xDS server export it; a
supervised worker does not (its supervisor does, once, over the summed families)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from vk_provider import __version__
from vk_provider.router.metrics import RouterMetrics
from vk_provider.xds.server import XdsServer
from vk_provider.xds.status import metrics_registry

SERIES = f'vk_provider_build_info{{version="{__version__}"}} 1.0'


def exposition(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def test_a_router_serving_alone_exports_it() -> None:
    assert SERIES in exposition(RouterMetrics(build_info=True).registry)


def test_a_supervised_worker_leaves_it_to_its_supervisor() -> None:
    assert "vk_provider_build_info" not in exposition(RouterMetrics().registry)


def test_the_xds_server_exports_it() -> None:
    assert SERIES in exposition(metrics_registry(XdsServer()))
