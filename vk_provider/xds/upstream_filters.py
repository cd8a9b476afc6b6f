"""The HTTP filters an away cluster runs on each request after choosing its endpoint.

Envoy rewrites paths per route, but an away side's endpoints may each want their own: a SageMaker
endpoint per away pod, each with its invocation path, or a provider front with a base path per pod.
So each endpoint carries its path (and its Host) in its metadata, and two upstream filters, which run
once the endpoint is chosen, apply them: `header_mutation` copies the endpoint's metadata into request
headers (it may not write `:path` or `:authority` itself), and a short Lua script moves them there.

The signing filter runs after them, so the signature covers the path and the Host the endpoint
receives. The Host must be set here: the route's `auto_host_rewrite` (which sets the same value) only
happens after the upstream filters, too late for the signature (checked against a real Envoy).

An endpoint with a fixed path (a signed one) has the request's path replaced; one with a path prefix
has it prepended. A cluster whose endpoints neither rewrite paths nor sign runs neither filter.
"""

from __future__ import annotations

from typing import Any

from vk_provider.kit.traffic_auth import TrafficAuth
from vk_provider.xds.names import type_url

METADATA_NAMESPACE = "vk_provider"
"""Where an endpoint's path and Host live in its `metadata.filter_metadata`."""
FIXED_PATH_KEY = "fixed_path"
PATH_PREFIX_KEY = "path_prefix"
HOST_KEY = "host"

_FIXED_PATH_HEADER = "x-vk-provider-fixed-path"
_PATH_PREFIX_HEADER = "x-vk-provider-path-prefix"
_HOST_HEADER = "x-vk-provider-host"
_HEADERS_BY_KEY = {
    FIXED_PATH_KEY: _FIXED_PATH_HEADER,
    PATH_PREFIX_KEY: _PATH_PREFIX_HEADER,
    HOST_KEY: _HOST_HEADER,
}

# Reads the headers, always removes them (they are ours, never the endpoint's), and applies them.
# Envoy writes an empty value, or "-", for an endpoint without the metadata key: a path not starting
# with "/", or a host of "" or "-", means "none".
_REWRITE_SCRIPT = f"""
function envoy_on_request(request)
  local headers = request:headers()
  local fixed = headers:get("{_FIXED_PATH_HEADER}")
  local prefix = headers:get("{_PATH_PREFIX_HEADER}")
  local host = headers:get("{_HOST_HEADER}")
  headers:remove("{_FIXED_PATH_HEADER}")
  headers:remove("{_PATH_PREFIX_HEADER}")
  headers:remove("{_HOST_HEADER}")
  if fixed ~= nil and string.sub(fixed, 1, 1) == "/" then
    headers:replace(":path", fixed)
  elseif prefix ~= nil and string.sub(prefix, 1, 1) == "/" then
    headers:replace(":path", prefix .. headers:get(":path"))
  end
  if host ~= nil and host ~= "" and host ~= "-" then
    headers:replace(":authority", host)
  end
end
"""


def endpoint_metadata(*, fixed_path: str, path_prefix: str, host: str) -> dict[str, str]:
    """What an endpoint of a rewriting cluster carries in `filter_metadata[METADATA_NAMESPACE]`."""
    return {FIXED_PATH_KEY: fixed_path, PATH_PREFIX_KEY: path_prefix, HOST_KEY: host}


def upstream_http_filters(*, rewrites: bool, auth: TrafficAuth | None) -> list[dict[str, Any]]:
    """The cluster's upstream filter chain; empty when it needs none of ours (Envoy's default).

    `rewrites`: its endpoints carry `endpoint_metadata` to apply (signed endpoints always must).
    """
    filters: list[dict[str, Any]] = []
    if rewrites or auth is not None:
        filters += [_metadata_to_headers(), _apply_headers()]
    if auth is not None:
        filters.append(_signing(auth))
    if filters:
        filters.append(
            {
                "name": "envoy.filters.http.upstream_codec",
                "typed_config": {
                    "@type": type_url("envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec")
                },
            }
        )
    return filters


def _metadata_to_headers() -> dict[str, Any]:
    mutations: list[dict[str, Any]] = []
    for key, header in _HEADERS_BY_KEY.items():
        # Removed first: a client's own header of that name must never reach the Lua script.
        mutations.append({"remove": header})
        mutations.append(
            {
                "append": {
                    "header": {"key": header, "value": f"%UPSTREAM_METADATA({METADATA_NAMESPACE}:{key})%"},
                    "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
                }
            }
        )
    return {
        "name": "envoy.filters.http.header_mutation",
        "typed_config": {
            "@type": type_url("envoy.extensions.filters.http.header_mutation.v3.HeaderMutation"),
            "mutations": {"request_mutations": mutations},
        },
    }


def _apply_headers() -> dict[str, Any]:
    return {
        "name": "envoy.filters.http.lua",
        "typed_config": {
            "@type": type_url("envoy.extensions.filters.http.lua.v3.Lua"),
            "default_source_code": {"inline_string": _REWRITE_SCRIPT},
        },
    }


def _signing(auth: TrafficAuth) -> dict[str, Any]:
    """SigV4 for the credential scope the endpoints' marker names.

    The credentials come from Envoy's default AWS chain (environment, credentials file, IRSA's web
    identity, container and instance metadata), the same sources the router's botocore chain reads.
    The payload is signed, not declared unsigned: SageMaker wants its hash, and its bodies are small.
    """
    return {
        "name": "envoy.filters.http.aws_request_signing",
        "typed_config": {
            "@type": type_url("envoy.extensions.filters.http.aws_request_signing.v3.AwsRequestSigning"),
            "service_name": auth.service,
            "region": auth.region,
            "use_unsigned_payload": False,
        },
    }
