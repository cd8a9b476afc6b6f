"""Certificates for mutual TLS between `vk-provider xds` and local Envoys (the development cluster's
`envoy` data plane and the integration tests): one CA of their own, a serving certificate for the
loopback address the Envoys dial, and one client certificate every local Envoy presents."""

from __future__ import annotations

import dataclasses
import ipaddress
from pathlib import Path

from vk_devtools.devcluster.pki import CertificateAuthority, ClientIdentity, KeyPair
from vk_provider.xds.bootstrap import XdsClientTls

ENVOY_IDENTITY = ClientIdentity("envoy", "vk-provider-envoy")


@dataclasses.dataclass(frozen=True)
class XdsCertificates:
    authority: CertificateAuthority
    """Issues the Envoys' client certificates (a test issues a stray client's from it too)."""
    server: KeyPair
    envoy: KeyPair

    def server_arguments(self) -> list[str]:
        """`vk-provider xds`'s flags for mutual TLS."""
        return [
            "--tls-cert-file",
            str(self.server.cert),
            "--tls-key-file",
            str(self.server.key),
            "--client-ca-file",
            str(self.authority.paths.cert),
        ]

    def envoy_tls(self) -> XdsClientTls:
        return XdsClientTls(str(self.envoy.cert), str(self.envoy.key), str(self.authority.paths.cert))


def issue_xds_certificates(folder: Path, *, host: str = "127.0.0.1") -> XdsCertificates:
    """A fresh CA in `folder`, the xDS server's certificate for `host` (an IP address) and the Envoys'."""
    authority = CertificateAuthority.create(folder, common_name="vk-provider-xds-dev-ca")
    server = authority.issue_serving(
        folder, "xds", common_name="vk-provider-xds", ip_addresses=(ipaddress.ip_address(host),)
    )
    return XdsCertificates(authority, server, authority.issue_client(folder, ENVOY_IDENTITY))
