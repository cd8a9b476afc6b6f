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


def add_port(server: grpc.aio.Server, address: str, tls: ServerTls | None) -> int:
    """Listen on `address` (with mutual TLS when `tls` is given); the port bound. OSError naming the
    address when it cannot be bound: gRPC says so by returning 0, or, in the aio server of recent
    releases, by a RuntimeError, which would otherwise end a daemon in a traceback."""
    try:
        bound = (
            server.add_insecure_port(address)
            if tls is None
            else server.add_secure_port(address, tls.credentials())
        )
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise OSError(f"cannot listen on {address} (in use, or not an address this host has)")
    return bound
