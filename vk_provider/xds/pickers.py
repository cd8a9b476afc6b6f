"""An InferencePool's endpoint picker in Envoy's terms (the `inferencepool` data plane).

The Gateway API Inference Extension's endpoint picker protocol: Envoy streams each request's headers
and body to the picker over external processing (`ext_proc`, body `FULL_DUPLEX_STREAMED`: the picker
answers the headers only once it has read the body, whose prompt it scores), and the picker answers
with the `ip:port` of the pod it chose, as a header and as `envoy.lb` dynamic metadata. Our pieces:

- one `ext_proc` filter in the listener, disabled: it runs only for the home share of a route whose
  home side is a pool (the home cluster's weight enables it, toward that pool's picker), so the away
  share never waits on a picker that does not place it;
- the home cluster balances with Envoy's `override_host` policy: the pod the picker chose, read from
  the dynamic metadata only (a client can send any header, never dynamic metadata), and Envoy's own
  least-request pick when there is none (a FailOpen pool whose picker did not answer);
- a cluster per picker, HTTP/2 over TLS, its ready endpoints by EDS: a picker replica that goes away
  (or stops answering, and leaves its Service's ready endpoints) is dropped from the balancing, but the
  streams it holds are not cut by a rebuilt cluster, and finish if it answers again. The picker serves
  a certificate it signs itself at start (GIE's default), so the TLS is not verified, as the upstream
  gateways do; the connection stays encrypted.

The picker's failure mode is the pool's (`failureMode`): FailClose fails a home request whose picker
does not answer, FailOpen would send it on to a home pod of Envoy's choosing; but a request whose body
Envoy already streams to the picker cannot be sent on without it, so a picker that stops mid-request
fails what it holds either way (measured: `tests/integration/test_inferencepool.py`). Once the
picker leaves its Service's ready endpoints, a FailOpen pool's home share stops asking it (`asked`)
and goes to the home pod with the fewest requests; a FailClose pool's fails, as its owner asked.
"""

from __future__ import annotations

from typing import Any

from vk_provider.offload.inferencepools import DESTINATION_HEADER, DESTINATION_METADATA_NAMESPACE
from vk_provider.offload.names import envoy_stat_name
from vk_provider.routetable.table import EndpointPicker
from vk_provider.xds.clusters import CONNECT_TIMEOUT
from vk_provider.xds.names import LOAD_ASSIGNMENT_TYPE, type_url

EXT_PROC_FILTER = "envoy.filters.http.ext_proc"
EXT_PROC_STAT_PREFIX = "endpoint_picker"
"""The filter's statistics: `http.vk_provider.ext_proc.endpoint_picker.*`."""
PICKER_MESSAGE_TIMEOUT = "5s"
"""How long Envoy waits for the picker's answer to one message before the pool's failure mode applies
(upstream gateways use the same)."""
_HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


def asked(picker: EndpointPicker | None) -> bool:
    """Whether a route's home share asks this picker. Not when the pool gives none (missing, or naming
    no picker: the home side serves as any route's does), nor when a FailOpen pool's picker has no
    ready endpoint: Envoy cannot fail open a request whose body it already streams to the picker, so
    it sends none there. A FailClose pool's picker is asked even then: its requests fail, as asked."""
    if picker is None or picker.problem:
        return False
    return bool(picker.addresses) or not picker.fail_open


def picker_cluster_name(picker: EndpointPicker) -> str:
    """`<namespace>/<pool>/endpoint-picker`: beside the Offloads' `<namespace>/<name>/<side>` clusters,
    never one of them (a side is home or away)."""
    return f"{picker.pool}/endpoint-picker"


def ext_proc_filter() -> dict[str, Any]:
    """The listener's picker filter, disabled until a home cluster's weight enables it (`enabling`)."""
    return {
        "name": EXT_PROC_FILTER,
        "disabled": True,
        "typed_config": {
            "@type": type_url("envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"),
            # Replaced per route by the pool's own picker; a disabled filter still needs one.
            "grpc_service": {"envoy_grpc": {"cluster_name": "endpoint-picker"}},
            "stat_prefix": EXT_PROC_STAT_PREFIX,
            "processing_mode": {
                "request_header_mode": "SEND",
                "request_body_mode": "FULL_DUPLEX_STREAMED",
                "request_trailer_mode": "SEND",
                # The answer streams straight to the client: a picker that stops mid-stream cuts none.
                "response_header_mode": "SKIP",
                "response_body_mode": "NONE",
                "response_trailer_mode": "SKIP",
            },
            "message_timeout": PICKER_MESSAGE_TIMEOUT,
            "failure_mode_allow": False,
            # The picker's choice, as dynamic metadata the home cluster's balancer reads.
            "metadata_options": {"receiving_namespaces": {"untyped": [DESTINATION_METADATA_NAMESPACE]}},
            # The picker asks Envoy to pick the route again; the weighted pick already made stands.
            "route_cache_action": "RETAIN",
        },
    }


def enabling(picker: EndpointPicker) -> dict[str, Any]:
    """The home cluster weight's `typed_per_filter_config`: the picker filter on, toward this pool's
    picker, failing as the pool says."""
    return {
        EXT_PROC_FILTER: {
            "@type": type_url("envoy.config.route.v3.FilterConfig"),
            "config": {
                "@type": type_url("envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute"),
                "overrides": {
                    "grpc_service": {"envoy_grpc": {"cluster_name": picker_cluster_name(picker)}},
                    "failure_mode_allow": picker.fail_open,
                },
            },
        }
    }


def picked_host_policy() -> dict[str, Any]:
    """The home cluster's `load_balancing_policy`: the picked pod, else least request."""
    return {
        "policies": [
            {
                "typed_extension_config": {
                    "name": "envoy.load_balancing_policies.override_host",
                    "typed_config": {
                        "@type": type_url(
                            "envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost"
                        ),
                        "override_host_sources": [
                            {
                                "metadata": {
                                    "key": DESTINATION_METADATA_NAMESPACE,
                                    "path": [{"key": DESTINATION_HEADER}],
                                }
                            }
                        ],
                        "fallback_policy": {
                            "policies": [
                                {
                                    "typed_extension_config": {
                                        "name": "envoy.load_balancing_policies.least_request",
                                        "typed_config": {
                                            "@type": type_url(
                                                "envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest"
                                            )
                                        },
                                    }
                                }
                            ]
                        },
                    },
                }
            }
        ]
    }


def picker_cluster(picker: EndpointPicker) -> dict[str, Any]:
    name = picker_cluster_name(picker)
    return {
        "@type": type_url("envoy.config.cluster.v3.Cluster"),
        "name": name,
        "alt_stat_name": envoy_stat_name(name),
        "type": "EDS",
        "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}},
        "connect_timeout": CONNECT_TIMEOUT,
        "lb_policy": "ROUND_ROBIN",
        "typed_extension_protocol_options": {
            _HTTP_PROTOCOL_OPTIONS: {
                "@type": type_url(_HTTP_PROTOCOL_OPTIONS),
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        },
        "transport_socket": {
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": type_url("envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"),
                "common_tls_context": {},
            },
        },
    }


def picker_load_assignment(picker: EndpointPicker) -> dict[str, Any]:
    endpoints = []
    for address in picker.addresses:
        host, _, port = address.rpartition(":")
        endpoints.append(
            {
                "endpoint": {
                    "address": {"socket_address": {"address": host.strip("[]"), "port_value": int(port)}}
                }
            }
        )
    return {
        "@type": LOAD_ASSIGNMENT_TYPE,
        "cluster_name": picker_cluster_name(picker),
        "endpoints": [{"lb_endpoints": endpoints}],
    }
