"""Envoy's API messages that our resources use, from the `xds-protos` distribution.

A resource written as JSON names its own type (`"@type": "type.googleapis.com/..."`) and those of the
extensions inside it; protobuf can parse it only once the message is in its descriptor pool, which
importing the generated module does. `register()` imports every one our resources name.
"""

from __future__ import annotations

import importlib

from google.protobuf import descriptor_pool, message, message_factory

_MODULES = (
    "envoy.config.listener.v3.listener_pb2",
    "envoy.config.route.v3.route_pb2",
    "envoy.config.cluster.v3.cluster_pb2",
    "envoy.config.endpoint.v3.endpoint_pb2",
    "envoy.extensions.filters.network.http_connection_manager.v3.http_connection_manager_pb2",
    "envoy.extensions.filters.http.router.v3.router_pb2",
    "envoy.extensions.upstreams.http.v3.http_protocol_options_pb2",
    "envoy.extensions.filters.http.upstream_codec.v3.upstream_codec_pb2",
    "envoy.extensions.filters.http.header_mutation.v3.header_mutation_pb2",
    "envoy.extensions.filters.http.lua.v3.lua_pb2",
    "envoy.extensions.filters.http.aws_request_signing.v3.aws_request_signing_pb2",
    "envoy.extensions.transport_sockets.tls.v3.tls_pb2",
    "envoy.extensions.retry.host.previous_hosts.v3.previous_hosts_pb2",
    "envoy.extensions.filters.http.ext_proc.v3.ext_proc_pb2",
    "envoy.extensions.load_balancing_policies.override_host.v3.override_host_pb2",
    "envoy.extensions.load_balancing_policies.least_request.v3.least_request_pb2",
)


def register() -> None:
    for module in _MODULES:
        importlib.import_module(module)


def message_class(full_name: str) -> type[message.Message]:
    """The class of a registered message, e.g. `envoy.config.route.v3.RouteConfiguration`."""
    register()
    return message_factory.GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(full_name))
