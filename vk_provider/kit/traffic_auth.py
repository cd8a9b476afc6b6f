"""How the router must authenticate the requests it sends to a pod's traffic address.

Most traffic addresses take plain requests. Some take only signed ones: a SageMaker endpoint's
invocation URL wants every request signed with AWS SigV4. The provider says so in
`PodState.traffic_auth`, the node writes it next to the traffic address as the pod status condition
`vk-provider.dev/TrafficAuth`, and the router signs what it sends there. The marker reads like an
HTTP header's parameters:

    aws-sigv4; service=sagemaker; region=eu-west-1

`service` and `region` are the SigV4 credential scope. Either may be left out when the address's host
says it (`runtime.sagemaker.<region>.amazonaws.com`, `.amazonaws.com.cn` in China, or FIPS's
`runtime-fips.sagemaker.<region>.amazonaws.com`); a provider names both, since a VPC endpoint or a
stand-in's address says neither. The router uses its own AWS credentials (see
`vk_provider.router.signing`) and signs with `vk_provider.kit.signing`. Parsing says what a marker asks
for; whether the router does it (for SageMaker's runtime only) is the router's decision
(`vk_provider.routetable.signingscope`).

The marker and the signing are two modules because they have different readers: the router's route
table parses markers for every endpoint and needs no AWS SDK; only the requests that are signed do.

Parsing is strict: a marker the router does not understand must keep the pod out of the route table,
because sending it unsigned traffic would only collect 403s.
"""

from __future__ import annotations

import dataclasses
import re
from urllib.parse import urlsplit

AWS_SIGV4 = "aws-sigv4"
SAGEMAKER_SERVICE = "sagemaker"

_SAGEMAKER_RUNTIME_HOST = re.compile(r"runtime(?:-fips)?\.sagemaker\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?")
"""SageMaker runtime's own hosts (AWS's endpoint prefix `runtime.sagemaker`, FIPS `runtime-fips`)."""
_TOKEN = re.compile(r"[a-z0-9-]+")


@dataclasses.dataclass(frozen=True)
class AwsSigV4:
    """Sign with AWS Signature Version 4 for this credential scope."""

    region: str
    service: str = SAGEMAKER_SERVICE

    def __post_init__(self) -> None:
        for field, value in (("region", self.region), ("service", self.service)):
            if not _TOKEN.fullmatch(value):
                raise ValueError(f"the SigV4 {field} {value!r} is not lower-case letters, digits and '-'")

    def marker(self) -> str:
        """The annotation's value."""
        return f"{AWS_SIGV4}; service={self.service}; region={self.region}"


TrafficAuth = AwsSigV4
"""Every authentication the router can do (one scheme so far)."""


def parse_traffic_auth(marker: str, address: str) -> TrafficAuth:
    """The authentication a marker asks for at `address`; ValueError when the router cannot do it."""
    scheme, *parameters = (part.strip() for part in marker.split(";"))
    if scheme.lower() != AWS_SIGV4:
        raise ValueError(f"unknown traffic authentication {scheme!r} (known: {AWS_SIGV4})")
    values: dict[str, str] = {}
    for parameter in parameters:
        name, separator, value = parameter.partition("=")
        if not separator or name.strip().lower() not in ("region", "service"):
            raise ValueError(f"unknown {AWS_SIGV4} parameter {parameter!r} (known: region, service)")
        values[name.strip().lower()] = value.strip()
    host_region = _region_from_host(address)
    region = values.get("region") or host_region
    service = values.get("service") or (SAGEMAKER_SERVICE if host_region else None)
    if not region or not service:
        raise ValueError(
            f"{AWS_SIGV4} needs a region and a service: name them in the marker, since {address!r} "
            "is not a SageMaker runtime address"
        )
    return AwsSigV4(region=region, service=service)


def is_sagemaker_runtime_host(host: str) -> bool:
    """Whether `host` (a bare host name, lower case) is one of SageMaker runtime's own."""
    return _SAGEMAKER_RUNTIME_HOST.fullmatch(host) is not None


def _region_from_host(address: str) -> str | None:
    found = _SAGEMAKER_RUNTIME_HOST.fullmatch(urlsplit(address).hostname or "")
    return found.group(1) if found else None
