"""The configuration an Envoy replica starts from: who it is, where its admin page is, and where to
get everything else (our xDS server, over one aggregated gRPC stream).

Written as Envoy's JSON (Envoy reads a `.json` or `.yaml` bootstrap file); the manifests and the
development cluster write the same document for their replicas.
"""

from __future__ import annotations

from typing import Any

from vk_provider.xds.names import type_url

XDS_CLUSTER = "vk-provider-xds"
MAX_DOWNSTREAM_CONNECTIONS = 50_000
"""Far above any one replica's load; Envoy warns at start-up when there is no limit at all."""


def bootstrap(
    *,
    node_id: str,
    xds_host: str,
    xds_port: int,
    admin_host: str = "127.0.0.1",
    admin_port: int = 9901,
    node_cluster: str = "vk-provider-envoy",
) -> dict[str, Any]:
    """`node_id` must differ per replica: the xDS server reports each one's ACKs by it."""
    ads = {"ads": {}, "resource_api_version": "V3"}
    return {
        "node": {"id": node_id, "cluster": node_cluster},
        "admin": {"address": {"socket_address": {"address": admin_host, "port_value": admin_port}}},
        "dynamic_resources": {
            "ads_config": {
                "api_type": "GRPC",
                "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": XDS_CLUSTER}}],
                "set_node_on_first_message_only": True,
            },
            "lds_config": ads,
            "cds_config": ads,
        },
        "static_resources": {"clusters": [_xds_cluster(xds_host, xds_port)]},
        "overload_manager": {
            "resource_monitors": [
                {
                    "name": "envoy.resource_monitors.global_downstream_max_connections",
                    "typed_config": {
                        "@type": type_url(
                            "envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig"
                        ),
                        "max_active_downstream_connections": MAX_DOWNSTREAM_CONNECTIONS,
                    },
                }
            ]
        },
    }


def _xds_cluster(host: str, port: int) -> dict[str, Any]:
    """The xDS server as Envoy's one static cluster: gRPC needs HTTP/2; a Service name is resolved."""
    return {
        "name": XDS_CLUSTER,
        "type": "STRICT_DNS",
        "dns_lookup_family": "V4_PREFERRED",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": XDS_CLUSTER,
            "endpoints": [
                {
                    "lb_endpoints": [
                        {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}
                    ]
                }
            ],
        },
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": type_url("envoy.extensions.upstreams.http.v3.HttpProtocolOptions"),
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        },
    }
