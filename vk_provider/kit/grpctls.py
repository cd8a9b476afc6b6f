"""Mutual TLS for a gRPC server: its certificate and key, and the CA every client's certificate must
come from. One definition for every gRPC server vk-provider runs (a plugin on TCP, the xDS server),
so that "authenticated" means the same thing on each control channel."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import grpc


@dataclasses.dataclass(frozen=True)
class ServerTls:
    """The files of a mutual-TLS server; every client must present a certificate of `client_ca_file`."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path

    def credentials(self) -> grpc.ServerCredentials:
        # Read when the server starts: a rotated Secret takes effect at the next restart.
        return grpc.ssl_server_credentials(
            [(self.key_file.read_bytes(), self.cert_file.read_bytes())],
            root_certificates=self.client_ca_file.read_bytes(),
            require_client_auth=True,
        )
