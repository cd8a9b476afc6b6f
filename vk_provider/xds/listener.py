"""The one listener every Envoy replica serves traffic on, with its routes from RDS over ADS."""

from __future__ import annotations

from typing import Any

from vk_provider.xds.names import LISTENER_NAME, LISTENER_TYPE, ROUTE_CONFIGURATION_NAME, type_url
from vk_provider.xds.pickers import ext_proc_filter
from vk_provider.xds.routes import STREAM_IDLE_TIMEOUT

CONNECTION_MANAGER_TYPE = type_url(
    "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
)
ROUTER_FILTER_TYPE = type_url("envoy.extensions.filters.http.router.v3.Router")


def listener(address: str, port: int) -> dict[str, Any]:
    connection_manager = {
        "@type": CONNECTION_MANAGER_TYPE,
        "stat_prefix": "vk_provider",
        "codec_type": "AUTO",
        "rds": {
            "config_source": {"ads": {}, "resource_api_version": "V3"},
            "route_config_name": ROUTE_CONFIGURATION_NAME,
        },
        # A stream may last as long as the model writes: no limit on the whole request, only on
        # silence (the routes say the same per route).
        "request_timeout": "0s",
        "stream_idle_timeout": STREAM_IDLE_TIMEOUT,
        # Virtual hosts list bare host names; `Host: chat.example.com:8080` must find them.
        "strip_any_host_port": True,
        # Envoy is the edge here: it appends the client's address to X-Forwarded-For, as the router does.
        "use_remote_address": True,
        "http_filters": [
            # Off but for the home share of an InferencePool's route (`pickers`); always there, so the
            # first such route changes the routes only, never the listener (whose change drains).
            ext_proc_filter(),
            {
                "name": "envoy.filters.http.router",
                "typed_config": {
                    "@type": ROUTER_FILTER_TYPE,
                    # Envoy's own x-envoy-* request headers tell endpoints nothing they need.
                    "suppress_envoy_headers": True,
                },
            },
        ],
    }
    return {"@type": LISTENER_TYPE, **http_listener(LISTENER_NAME, address, port, connection_manager)}


def http_listener(name: str, address: str, port: int, connection_manager: dict[str, Any]) -> dict[str, Any]:
    """A listener whose one filter is `connection_manager` (an HttpConnectionManager's typed config)."""
    return {
        "name": name,
        "address": {"socket_address": {"address": address, "port_value": port}},
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": connection_manager,
                    }
                ]
            }
        ],
    }
