"""Who may open an xDS stream: only clients with a certificate of the Envoys' CA (mutual TLS).

The xDS port hands out the whole route table, and every connected node id used to count as an Envoy
whose ACK a migration step waits for; a client without a certificate therefore never gets past the
TLS handshake. Plaintext is served only when asked for by name (`--allow-plaintext`, development on
loopback), and says so loudly at start-up, so it is not left on by accident.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from vk_provider.kit.grpctls import ServerTls

logger = logging.getLogger(__name__)

TLS_FLAGS = ("--tls-cert-file", "--tls-key-file", "--client-ca-file")


class AuthenticationArgumentError(ValueError):
    """The TLS flags do not make a usable configuration (the command exits 2 with this message)."""


def add_authentication_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "client authentication",
        "mutual TLS on the xDS port: give all three files, or --allow-plaintext for development",
    )
    group.add_argument(
        "--tls-cert-file", type=Path, metavar="FILE", help="the xDS server's certificate (default: none)"
    )
    group.add_argument("--tls-key-file", type=Path, metavar="FILE", help="its private key (default: none)")
    group.add_argument(
        "--client-ca-file",
        type=Path,
        metavar="FILE",
        help="the CA every Envoy's client certificate must come from; other clients are refused "
        "(default: none)",
    )
    group.add_argument(
        "--allow-plaintext",
        action="store_true",
        help="serve xDS without TLS to any client that can reach the port (development only)",
    )


def server_tls(arguments: argparse.Namespace) -> ServerTls | None:
    """The server's mutual TLS, or None for plaintext (only with --allow-plaintext, logged as a warning)."""
    files = (arguments.tls_cert_file, arguments.tls_key_file, arguments.client_ca_file)
    given = [flag for flag, value in zip(TLS_FLAGS, files, strict=True) if value is not None]
    if given and len(given) < len(TLS_FLAGS):
        missing = ", ".join(flag for flag in TLS_FLAGS if flag not in given)
        raise AuthenticationArgumentError(
            f"{', '.join(given)} needs {missing} too (mutual TLS takes all three)"
        )
    if given and arguments.allow_plaintext:
        raise AuthenticationArgumentError(
            "--allow-plaintext contradicts the TLS files: give one or the other"
        )
    if given:
        cert, key, client_ca = files
        unreadable = [str(path) for path in files if not path.is_file()]
        if unreadable:
            raise AuthenticationArgumentError(f"cannot read {', '.join(unreadable)}")
        return ServerTls(cert, key, client_ca)
    if not arguments.allow_plaintext:
        raise AuthenticationArgumentError(
            f"xDS needs mutual TLS ({' '.join(flag + ' FILE' for flag in TLS_FLAGS)}), "
            "or --allow-plaintext for development"
        )
    logger.warning(
        "PLAINTEXT xDS (--allow-plaintext): ANY client that reaches the xDS port can read every route "
        "and connect as an Envoy; use mutual TLS outside development"
    )
    return None
