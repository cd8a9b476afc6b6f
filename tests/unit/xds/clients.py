"""An xDS client by hand, as a stray would be: what a test needs to open a stream and be answered."""

from __future__ import annotations

from pathlib import Path

import grpc
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from vk_provider.xds.names import CLUSTER_TYPE

ANSWER_SECONDS = 10.0


def cluster_request(node_id: str) -> discovery_pb2.DiscoveryRequest:
    request = discovery_pb2.DiscoveryRequest(type_url=CLUSTER_TYPE)
    request.node.id = node_id
    return request


async def first_answer(channel: grpc.aio.Channel, node_id: str) -> discovery_pb2.DiscoveryResponse:
    """Ask for the clusters as `node_id`; the answer, then the stream is closed (AioRpcError if none)."""
    call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
        timeout=ANSWER_SECONDS
    )
    await call.write(cluster_request(node_id))
    answer: discovery_pb2.DiscoveryResponse = await call.read()
    call.cancel()
    return answer


def tls_credentials(ca: Path, client: tuple[Path, Path] | None) -> grpc.ChannelCredentials:
    """Trust `ca`; present `client` (certificate, key) when given."""
    return grpc.ssl_channel_credentials(
        root_certificates=ca.read_bytes(),
        certificate_chain=None if client is None else client[0].read_bytes(),
        private_key=None if client is None else client[1].read_bytes(),
    )
