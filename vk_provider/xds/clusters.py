"""Envoy clusters for the two sides of a route, and the home side's endpoints (EDS).

Home: an EDS cluster whose endpoints (pod IPs) come as a ClusterLoadAssignment over the same ADS
stream. Home endpoints change whenever the home Deployment scales, i.e. at every migration; through EDS
such a change replaces only the endpoint list, while the cluster (its connection pools, its least-request
counts, its outlier state) stays. A changed Cluster resource would be rebuilt and warmed again.

Away: a STRICT_DNS cluster with its endpoints inline, because away endpoints are mostly host names (a
RunPod proxy, a SageMaker runtime) that EDS cannot carry, and Envoy resolves them itself. Each endpoint
carries its own Host (its `hostname`, which the route's `auto_host_rewrite` puts in the Host header;
home endpoints have none, so home pods keep the client's Host), its TLS server name (through a
transport socket match per host, so one cluster can hold endpoints behind different names) and its
path (see `upstream_filters`, which also sets the Host early enough to be signed).

Both sides: least-request balancing and HTTP/1.1 connections kept alive between requests, as the
router does; an endpoint refusing connections is ejected for 5 s, doubling up to 60 s (the router's
ejection); and circuit breakers far above any real concurrency: an LLM stream holds its request for
minutes, and Envoy's default of 1024 concurrent requests per cluster would queue and then refuse them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vk_provider.offload.names import envoy_stat_name
from vk_provider.xds.names import LOAD_ASSIGNMENT_TYPE, type_url
from vk_provider.xds.sides import PlacedEndpoint, SidePlan
from vk_provider.xds.upstream_filters import METADATA_NAMESPACE, endpoint_metadata, upstream_http_filters

CONNECT_TIMEOUT = "2s"
"""The router's default `--connect-timeout`."""
IDLE_CONNECTION_TIMEOUT = "15s"
"""How long an idle endpoint connection is kept for the next request: the router's pool timeout."""
UNLIMITED = 1_000_000
"""Circuit breaker thresholds that never trip before the pods' own limits do."""

_TRANSPORT_SOCKET_MATCH = "envoy.transport_socket_match"
_HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


@dataclasses.dataclass(frozen=True)
class UpstreamTrust:
    """Which CAs vouch for TLS endpoints: the system's roots, or the CA bundle in `ca_file`."""

    ca_file: str | None = None

    def validation_context(self) -> dict[str, Any]:
        if self.ca_file is not None:
            return {"trusted_ca": {"filename": self.ca_file}}
        return {"system_root_certs": {}}


def home_cluster(name: str, *, load_balancing_policy: dict[str, Any] | None = None) -> dict[str, Any]:
    """`load_balancing_policy` replaces least-request balancing (an InferencePool's picked pods)."""
    cluster = _common(name, http_filters=[])
    cluster["type"] = "EDS"
    cluster["eds_cluster_config"] = {"eds_config": {"ads": {}, "resource_api_version": "V3"}}
    if load_balancing_policy is not None:
        del cluster["lb_policy"]
        cluster["load_balancing_policy"] = load_balancing_policy
    return cluster


def home_load_assignment(name: str, plan: SidePlan) -> dict[str, Any]:
    return {
        "@type": LOAD_ASSIGNMENT_TYPE,
        "cluster_name": name,
        "endpoints": [{"lb_endpoints": [_lb_endpoint(placed) for placed in plan.endpoints]}],
    }


def away_cluster(name: str, plan: SidePlan, trust: UpstreamTrust) -> dict[str, Any]:
    rewrites = plan.rewrites_paths or plan.auth is not None
    cluster = _common(name, http_filters=upstream_http_filters(rewrites=rewrites, auth=plan.auth))
    cluster["type"] = "STRICT_DNS"
    # Pod networks and many hosts have no IPv6 route; Envoy's default (AUTO) would try it first.
    cluster["dns_lookup_family"] = "V4_PREFERRED"
    cluster["respect_dns_ttl"] = True
    lb_endpoints = []
    for placed in plan.endpoints:
        lb_endpoint = _lb_endpoint(placed)
        lb_endpoint["endpoint"]["hostname"] = placed.address.host_header
        metadata: dict[str, Any] = {}
        if placed.address.tls:
            metadata[_TRANSPORT_SOCKET_MATCH] = {"tls": placed.address.host}
        if rewrites:
            metadata[METADATA_NAMESPACE] = endpoint_metadata(
                fixed_path=placed.address.fixed_path,
                path_prefix=placed.address.path_prefix,
                host=placed.address.host_header,
            )
        if metadata:
            lb_endpoint["metadata"] = {"filter_metadata": metadata}
        lb_endpoints.append(lb_endpoint)
    cluster["load_assignment"] = {"cluster_name": name, "endpoints": [{"lb_endpoints": lb_endpoints}]}
    tls_hosts = {placed.address.host: placed.address.is_ip for placed in plan.endpoints if placed.address.tls}
    if tls_hosts:
        cluster["transport_socket_matches"] = [
            _tls_match(host, is_ip, trust) for host, is_ip in sorted(tls_hosts.items())
        ]
    return cluster


def _common(name: str, *, http_filters: list[dict[str, Any]]) -> dict[str, Any]:
    protocol_options: dict[str, Any] = {
        "@type": type_url(_HTTP_PROTOCOL_OPTIONS),
        "common_http_protocol_options": {"idle_timeout": IDLE_CONNECTION_TIMEOUT},
        "explicit_http_config": {"http_protocol_options": {}},
    }
    if http_filters:
        protocol_options["http_filters"] = http_filters
    return {
        "@type": type_url("envoy.config.cluster.v3.Cluster"),
        "name": name,
        "alt_stat_name": envoy_stat_name(name),
        "connect_timeout": CONNECT_TIMEOUT,
        "lb_policy": "LEAST_REQUEST",
        "circuit_breakers": {
            "thresholds": [
                {
                    "priority": "DEFAULT",
                    "max_connections": UNLIMITED,
                    "max_pending_requests": UNLIMITED,
                    "max_requests": UNLIMITED,
                    "max_retries": UNLIMITED,
                }
            ]
        },
        # Only connection failures eject (what the router ejects for); a 5xx is the model's answer,
        # and judging answers is the migration gates' job.
        "outlier_detection": {
            "split_external_local_origin_errors": True,
            "consecutive_local_origin_failure": 1,
            "enforcing_consecutive_local_origin_failure": 100,
            "enforcing_local_origin_success_rate": 0,
            "enforcing_consecutive_5xx": 0,
            "enforcing_consecutive_gateway_failure": 0,
            "enforcing_success_rate": 0,
            "interval": "1s",
            "base_ejection_time": "5s",
            "max_ejection_time": "60s",
            "max_ejection_percent": 100,
        },
        # Finds a peer that vanished under a long-idle stream (a node gone) in minutes, not hours.
        "upstream_connection_options": {
            "tcp_keepalive": {"keepalive_time": 60, "keepalive_interval": 10, "keepalive_probes": 3}
        },
        "typed_extension_protocol_options": {_HTTP_PROTOCOL_OPTIONS: protocol_options},
    }


def _lb_endpoint(placed: PlacedEndpoint) -> dict[str, Any]:
    return {
        "endpoint": {
            "address": {"socket_address": {"address": placed.address.host, "port_value": placed.address.port}}
        },
        # Draining: no new requests, streams in flight finish (the table's terminating endpoints).
        "health_status": "DRAINING" if placed.draining else "HEALTHY",
    }


def _tls_match(host: str, is_ip: bool, trust: UpstreamTrust) -> dict[str, Any]:
    """TLS for the endpoints at `host`: its name as SNI, and a certificate that must name it.

    Envoy checks the chain but not the name unless told, so the name is matched explicitly. An IP
    address is never sent as SNI (TLS forbids it) and is matched as an IP subject alternative name.
    """
    validation = trust.validation_context()
    validation["match_typed_subject_alt_names"] = [
        {"san_type": "IP_ADDRESS" if is_ip else "DNS", "matcher": {"exact": host}}
    ]
    context: dict[str, Any] = {
        "@type": type_url("envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"),
        "common_tls_context": {"validation_context": validation},
    }
    if not is_ip:
        context["sni"] = host
    return {
        "name": f"tls {host}",
        "match": {"tls": host},
        "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": context},
    }
