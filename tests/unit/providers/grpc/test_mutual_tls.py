"""A plugin on TCP with mutual TLS: the node that holds a certificate of the plugin's client CA gets
through; one without a certificate, or with one from another CA, does not, and its provider is
unavailable with the reason. Certificates from the development tools' own CA code."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

import pytest

from tests.unit.providers.mock.test_contract import MockHarness
from vk_devtools.devcluster.pki import CertificateAuthority, ClientIdentity
from vk_devtools.devcluster.ports import PortPicker
from vk_provider.errors import ProviderUnavailableError
from vk_provider.plugin import ServerTls, serving
from vk_provider.provider import ProviderContext
from vk_provider.testing.contract import new_uid, wait_running
from vk_providers.grpc import create_provider
from vk_providers.grpc.provider import parse_settings


def settings_for(address: str, ca: Path, client: tuple[Path, Path] | None) -> dict[str, object]:
    settings: dict[str, object] = {"address": address, "tls_ca_file": str(ca), "connect_timeout_seconds": 2}
    if client is not None:
        settings.update(tls_cert_file=str(client[0]), tls_key_file=str(client[1]))
    return settings


async def test_only_a_node_with_a_client_certificate_of_the_plugins_ca_gets_through(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca", common_name="plugin-ca")
    stranger = CertificateAuthority.create(tmp_path / "other", common_name="another-ca")
    serving_pair = ca.issue_serving(
        tmp_path, "plugin", common_name="plugin", ip_addresses=(ipaddress.ip_address("127.0.0.1"),)
    )
    node = ca.issue_client(tmp_path, ClientIdentity("node", "vk-node"))
    impostor = stranger.issue_client(tmp_path / "other", ClientIdentity("node", "vk-node"))
    address = f"127.0.0.1:{PortPicker().pick()}"
    harness = MockHarness(tmp_path)
    tls = ServerTls(serving_pair.cert, serving_pair.key, ca.paths.cert)
    async with serving(harness.provider, address, name="tls-plugin", tls=tls):

        def connect(settings: dict[str, object]) -> object:
            return create_provider(ProviderContext("n", settings, "127.0.0.1", tmp_path))

        client = await asyncio.to_thread(connect, settings_for(address, ca.paths.cert, (node.cert, node.key)))
        request = harness.pod("over-tls", uid=new_uid())
        await client.create_pod(request)
        await wait_running(client, request.ref)
        await client.aclose()

        for refused in (None, (impostor.cert, impostor.key)):
            client = await asyncio.to_thread(connect, settings_for(address, ca.paths.cert, refused))
            with pytest.raises(ProviderUnavailableError):
                await client.check_health()
            await client.aclose()
    await harness.provider.aclose()


def test_tls_settings_that_cannot_work_are_refused_by_name(tmp_path: Path) -> None:
    ca = str(tmp_path / "ca.crt")
    with pytest.raises(ValueError, match="tls_cert_file and tls_key_file go together"):
        parse_settings({"address": "10.0.0.1:50051", "tls_ca_file": ca, "tls_cert_file": ca})
    with pytest.raises(ValueError, match="needs tls_ca_file"):
        parse_settings({"address": "10.0.0.1:50051", "tls_cert_file": ca, "tls_key_file": ca})
    with pytest.raises(ValueError, match="a unix socket is guarded by its file mode"):
        parse_settings({"address": "unix:///run/p.sock", "tls_ca_file": ca})
