"""The configuration an Envoy replica starts from: who it is, where its admin page is, and where to
get everything else (our xDS server, over one aggregated gRPC stream).

The admin page stays on loopback: it can also drain, stop or reconfigure the Envoy. What others need
from it, the statistics the migration gates read and the readiness a probe asks, is passed through
a listener of its own (`stats_port`), which serves those two paths and nothing else.

Written as Envoy's JSON (Envoy reads a `.json` or `.yaml` bootstrap file); the manifests and the
development cluster write the same document for their replicas.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from typing import Any

from vk_provider.xds.listener import CONNECTION_MANAGER_TYPE, ROUTER_FILTER_TYPE, http_listener
from vk_provider.xds.names import type_url

XDS_CLUSTER = "vk-provider-xds"
ADMIN_CLUSTER = "vk-provider-envoy-admin"
STATS_LISTENER = "vk-provider-stats"
PASSED_ADMIN_PATHS = ("/stats/prometheus", "/ready")
STATS_FLUSH_INTERVAL = "1s"
MAX_DOWNSTREAM_CONNECTIONS = 50_000
"""Far above any one replica's load; Envoy warns at start-up when there is no limit at all."""
TLS_SOCKET_TYPE = type_url("envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext")


@dataclasses.dataclass(frozen=True)
class XdsClientTls:
    """How an Envoy proves itself to the xDS server (mutual TLS), as paths inside the Envoy's
    filesystem: its client certificate and key, and the CA the server's certificate must come from.

    The server's certificate must also name the host Envoy dials (`xds_host`: a DNS name, or an IP
    address in development), so a certificate of the same CA issued to something else is refused.
    """

    cert_file: str
    key_file: str
    ca_file: str


MANIFEST_XDS_CLIENT_TLS = XdsClientTls(
    cert_file="/etc/vk-provider/xds-client/tls.crt",
    key_file="/etc/vk-provider/xds-client/tls.key",
    ca_file="/etc/vk-provider/xds-client/ca.crt",
)
"""Where the Envoy pods of the manifests mount their Secret `vk-provider-envoy-xds-client`."""


def bootstrap(
    *,
    node_id: str,
    xds_host: str,
    xds_port: int,
    admin_host: str = "127.0.0.1",
    admin_port: int = 9901,
    node_cluster: str = "vk-provider-envoy",
    stats_port: int | None = None,
    xds_tls: XdsClientTls | None = None,
) -> dict[str, Any]:
    """`node_id` must differ per replica: the xDS server reports each one's ACKs by it (the manifests
    set it from the pod's name with Envoy's `--service-node`, which overrides this one).

    `stats_port`: where `/stats/prometheus` and `/ready` are served to the pod network (all
    addresses); None serves them nowhere but on the admin page.

    `xds_tls`: dial the xDS server over mutual TLS (what `vk-provider xds` requires unless started
    with --allow-plaintext); None dials plaintext.
    """
    ads = {"ads": {}, "resource_api_version": "V3"}
    clusters = [_xds_cluster(xds_host, xds_port, xds_tls)]
    listeners = []
    if stats_port is not None:
        clusters.append(_static_cluster(ADMIN_CLUSTER, admin_host, admin_port, http2=False))
        listeners.append(_stats_listener(stats_port))
    return {
        "node": {"id": node_id, "cluster": node_cluster},
        # Histograms (the gates' latency) reach /stats only at a flush: every second, not every five.
        "stats_flush_interval": STATS_FLUSH_INTERVAL,
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
        "static_resources": {"clusters": clusters, "listeners": listeners},
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


def _xds_cluster(host: str, port: int, tls: XdsClientTls | None) -> dict[str, Any]:
    """The xDS server: gRPC needs HTTP/2; a Service name is resolved."""
    cluster = _static_cluster(XDS_CLUSTER, host, port, http2=True)
    if tls is not None:
        cluster["transport_socket"] = _client_tls_socket(host, tls)
    return cluster


def _client_tls_socket(host: str, tls: XdsClientTls) -> dict[str, Any]:
    """Present the client certificate; trust only the CA given, and only a certificate naming `host`."""
    try:
        ipaddress.ip_address(host)
        san_type, server_name = "IP_ADDRESS", None
    except ValueError:
        san_type, server_name = "DNS", host
    context: dict[str, Any] = {
        "@type": TLS_SOCKET_TYPE,
        "common_tls_context": {
            "alpn_protocols": ["h2"],  # gRPC
            "tls_certificates": [
                {"certificate_chain": {"filename": tls.cert_file}, "private_key": {"filename": tls.key_file}}
            ],
            "validation_context": {
                "trusted_ca": {"filename": tls.ca_file},
                "match_typed_subject_alt_names": [{"san_type": san_type, "matcher": {"exact": host}}],
            },
        },
    }
    if server_name is not None:
        context["sni"] = server_name
    return {"name": "envoy.transport_sockets.tls", "typed_config": context}


def _static_cluster(name: str, host: str, port: int, *, http2: bool) -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "name": name,
        "type": "STRICT_DNS",
        "dns_lookup_family": "V4_PREFERRED",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [
                {
                    "lb_endpoints": [
                        {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}
                    ]
                }
            ],
        },
    }
    if http2:
        cluster["typed_extension_protocol_options"] = {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": type_url("envoy.extensions.upstreams.http.v3.HttpProtocolOptions"),
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        }
    return cluster


def _stats_listener(port: int) -> dict[str, Any]:
    """A listener passing `PASSED_ADMIN_PATHS` (exact paths, any query) to the admin page; 404 else."""
    routes = [{"match": {"path": path}, "route": {"cluster": ADMIN_CLUSTER}} for path in PASSED_ADMIN_PATHS]
    manager = {
        "@type": CONNECTION_MANAGER_TYPE,
        "stat_prefix": "vk_provider_stats",
        "route_config": {"virtual_hosts": [{"name": "stats", "domains": ["*"], "routes": routes}]},
        "http_filters": [
            {"name": "envoy.filters.http.router", "typed_config": {"@type": ROUTER_FILTER_TYPE}}
        ],
    }
    # On every address: the controller scrapes it from the pod network.
    return http_listener(STATS_LISTENER, "0.0.0.0", port, manager)  # noqa: S104


MANIFEST_NODE_ID = "set-by-service-node"
"""The bootstrap's node id in the manifests: each Envoy pod replaces it with its own name."""


def manifest_config_map(
    *, namespace: str, xds_host: str, xds_port: int, stats_port: int, admin_port: int = 9901
) -> dict[str, Any]:
    """The ConfigMap of manifests/components/envoy/envoy-bootstrap.yaml (a test keeps the two equal)."""
    document = bootstrap(
        node_id=MANIFEST_NODE_ID,
        xds_host=xds_host,
        xds_port=xds_port,
        admin_port=admin_port,
        stats_port=stats_port,
        xds_tls=MANIFEST_XDS_CLIENT_TLS,
    )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "vk-provider-envoy-bootstrap", "namespace": namespace},
        "data": {"bootstrap.json": json.dumps(document, indent=2, sort_keys=True) + "\n"},
    }
