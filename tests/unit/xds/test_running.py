"""`serve_xds`: the tables a source hands over are served over gRPC, until cancelled."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from tests.unit.local import until
from vk_provider.routetable.table import Endpoint, RouteTable
from vk_provider.xds.names import CLUSTER_TYPE
from vk_provider.xds.running import serve_xds
from vk_provider.xds.server import XdsServer

from . import route, table


async def first_answer(call: Any, request: Any) -> Any:
    await call.write(request)
    return await call.read()


async def test_the_tables_a_source_hands_over_are_served_until_cancelled() -> None:
    started: asyncio.Future[tuple[XdsServer, int]] = asyncio.get_running_loop().create_future()

    async def source(apply: Callable[[RouteTable], None]) -> None:
        apply(table(route(home=(Endpoint("http://10.0.0.1:8080"),))))
        apply(table(route(home=(Endpoint("http://10.0.0.2:8080"),))))

    serving = asyncio.create_task(
        serve_xds(source, "127.0.0.1", 0, started=lambda server, port: started.set_result((server, port)))
    )
    server, port = await started
    await until(lambda: server.version == 2)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources()
        request = discovery_pb2.DiscoveryRequest(type_url=CLUSTER_TYPE)
        request.node.id = "a-client"
        await call.write(request)
        response = await call.read()
        assert (response.version_info, response.type_url, len(response.resources)) == ("2", CLUSTER_TYPE, 2)
        await until(lambda: server.acked() == {"a-client": 0})
        call.cancel()
    serving.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await serving
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources()
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await first_answer(call, discovery_pb2.DiscoveryRequest(type_url=CLUSTER_TYPE))
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_the_delta_protocol_is_refused_as_unimplemented() -> None:
    server = XdsServer()
    port = await server.start("127.0.0.1", 0)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).DeltaAggregatedResources()
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await first_answer(call, discovery_pb2.DeltaDiscoveryRequest(type_url=CLUSTER_TYPE))
            assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await server.stop()
