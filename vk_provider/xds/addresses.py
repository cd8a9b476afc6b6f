"""Where an endpoint's requests go, in the terms Envoy needs: socket address, TLS, Host, path.

An `Endpoint` is a URL (see `vk_provider.routetable.table`). Envoy wants its parts apart: the socket
address a cluster connects to, whether to speak TLS (and the server name to ask for), the Host
header a provider's front routes by, and what happens to the request's path, which is appended to a
plain endpoint's base path, and replaced by a signed endpoint's whole path (SageMaker's invocation URL
is one operation at one URL; the client's path and query are dropped, as the router does).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from urllib.parse import urlsplit

from vk_provider.routetable.table import Endpoint

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclasses.dataclass(frozen=True)
class UpstreamAddress:
    host: str
    """Host name or IP address, without an IPv6 literal's brackets."""
    port: int
    tls: bool
    host_header: str
    """What the request's Host becomes at an away endpoint: the URL's host and explicit port."""
    path_prefix: str = ""
    """A plain endpoint's base path, prepended to the request's path ("" for none)."""
    fixed_path: str = ""
    """A signed endpoint's path and query, which replace the request's ("" for a plain endpoint)."""

    @property
    def is_ip(self) -> bool:
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            return False
        return True

    @property
    def rewrites_path(self) -> bool:
        return bool(self.path_prefix or self.fixed_path)


def upstream_address(endpoint: Endpoint) -> UpstreamAddress:
    """The parts of `endpoint`'s URL; ValueError when it names no host or a bad port."""
    parts = urlsplit(endpoint.url)
    if not parts.hostname:
        raise ValueError(f"endpoint URL {endpoint.url!r} has no host")
    port = parts.port or _DEFAULT_PORTS[parts.scheme]  # .port raises ValueError on a bad one
    host_header = parts.netloc.rpartition("@")[2]
    if endpoint.auth is not None:
        fixed = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return UpstreamAddress(parts.hostname, port, parts.scheme == "https", host_header, fixed_path=fixed)
    return UpstreamAddress(
        parts.hostname, port, parts.scheme == "https", host_header, path_prefix=parts.path.rstrip("/")
    )
