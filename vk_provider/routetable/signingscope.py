"""For whom the router signs: SageMaker's runtime, and the hosts the operator names; nothing else.

A traffic-auth marker (`vk_provider.kit.traffic_auth`) is a provider's word, carried by its node,
and the router signs with its own AWS credentials, which may do more than `sagemaker:InvokeEndpoint`
(an instance role, a broad IRSA role). Signing whatever a marker names would let a provider (a
third party's gRPC plugin, or one misconfigured) have the router sign, say, `service=s3` requests to a
host of its choosing: requests only the router's credentials could make. So a signed endpoint is kept
only when the marker names the `sagemaker` service and its address is at one of SageMaker runtime's
own hosts (`runtime.sagemaker.<region>.amazonaws.com`, `.amazonaws.com.cn`, FIPS's `runtime-fips.`) or
at a host the operator listed (`vk-provider router --sign-for-host HOST`: a VPC endpoint's host name, a
stand-in's address). Anything else stays out of the route table, reported with a Warning Event on the
pod (`vk_provider.routetable.feed`), as unsigned requests there would only be refused.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from vk_provider.kit.traffic_auth import SAGEMAKER_SERVICE, TrafficAuth, is_sagemaker_runtime_host

_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*")
"""A DNS name: dot-separated labels of letters, digits and inner hyphens."""


def sign_for_host(text: str) -> str:
    """`--sign-for-host`: a bare host name or IP address, as a URL's host compares (lower case, no
    trailing dot, an IPv6 address without brackets); ValueError for anything else, a URL or a port
    included, so a typo cannot widen the scope."""
    host = text.strip().lower().rstrip(".")
    unbracketed = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return str(ipaddress.ip_address(unbracketed))
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(host):
        raise ValueError(f"expected a host name or IP address (no scheme, port or path), got {text!r}")
    return host


@dataclasses.dataclass(frozen=True)
class SigningScope:
    """The endpoints the router signs for: SageMaker's runtime hosts, and `extra_hosts` (as
    `sign_for_host` writes them)."""

    extra_hosts: frozenset[str] = frozenset()

    @classmethod
    def with_hosts(cls, hosts: Iterable[str]) -> SigningScope:
        return cls(frozenset(sign_for_host(host) for host in hosts))

    def refusal(self, auth: TrafficAuth, url: str) -> str | None:
        """Why the router will not sign for `auth` at `url`, or None when it will."""
        if auth.service != SAGEMAKER_SERVICE:
            return (
                f"the router signs only for the {SAGEMAKER_SERVICE} service (SageMaker's runtime), "
                f"not {auth.service!r}"
            )
        host = urlsplit(url).hostname or ""
        if is_sagemaker_runtime_host(host) or host in self.extra_hosts:
            return None
        return (
            f"{host or url!r} is not a SageMaker runtime host (runtime.sagemaker.<region>.amazonaws.com); "
            "the router signs for another host only when its --sign-for-host names it"
        )
