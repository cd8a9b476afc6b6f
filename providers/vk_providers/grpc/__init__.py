"""The `grpc` provider: the node runs against a plugin, a provider in any language served over gRPC.

Settings (the provider's section of the node configuration):
- `address`: the plugin's `unix:///path/to/socket` (a sidecar in the node's pod) or `host:port`;
- `tls_ca_file`, and for mutual TLS `tls_cert_file` and `tls_key_file` (a TCP plugin's connection;
  `tls_server_name` when the plugin's certificate names another host than the address's);
- `call_timeout_seconds` (default 30): the deadline of each call;
- `connect_timeout_seconds` (default 10): how long the node waits at start for the plugin to answer;
  a plugin that has not answered by then is asked again when first needed (the node starts anyway,
  the provider unavailable until the plugin answers).

The plugin API is `vk_provider/plugin/v1/provider.proto`; `vk_provider.plugin.serve` serves any
Python provider as a plugin.
"""

from __future__ import annotations

import logging

from vk_provider.provider import PodLifecycle, ProviderContext
from vk_providers.grpc.provider import (
    GrpcProvider,
    GrpcSettings,
    PluginUnreachableError,
    parse_settings,
    plugin_info,
    provider_for,
)

logger = logging.getLogger(__name__)


def create_provider(context: ProviderContext) -> PodLifecycle:
    settings = parse_settings(context.config)
    try:
        info = plugin_info(settings, context.node_name)
    except PluginUnreachableError as error:
        logger.warning("%s; the node starts without it and goes on once it answers", error)
        info = None
    return provider_for(settings, info)


__all__ = ["GrpcProvider", "GrpcSettings", "create_provider"]
