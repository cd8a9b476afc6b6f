"""The server context and certificates from files, served over a real local TLS handshake."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509

from tests.integration.waiting import wait_for
from tests.unit.kubelet_certificates import SigningCa, cert_pem, key_pem
from vk_provider.kubelet.certificates import ServingCertificate, from_files, server_ssl_context, serving_names

NAMES = serving_names("n1", ["127.0.0.1"])


def test_the_server_context_wants_tls_12_and_asks_for_optional_client_certificates(
    tmp_path: Path, ca: SigningCa
) -> None:
    context = server_ssl_context(ca.write(tmp_path / "ca.crt"))

    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert not context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 1


async def peer_serial(port: int, client: ssl.SSLContext) -> int:
    """Handshake with the local server and return the serial number of the certificate it presented."""
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        writer.close()
        await writer.wait_closed()


@contextlib.asynccontextmanager
async def tls_server(serving: ServingCertificate) -> AsyncIterator[int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await reader.read()
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=serving.ssl_context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def write_pair(folder: Path, cert: x509.Certificate, key: object, *, stamp_ns: int) -> tuple[Path, Path]:
    cert_file, key_file = folder / "tls.crt", folder / "tls.key"
    cert_file.write_bytes(cert_pem(cert))
    key_file.write_bytes(key_pem(key))  # type: ignore[arg-type]
    # Distinct modification times, whatever the file system's timestamp resolution.
    for path in (cert_file, key_file):
        os.utime(path, ns=(stamp_ns, stamp_ns))
    return cert_file, key_file


async def test_certificates_from_files_are_served_and_reloaded_when_the_files_change(
    tmp_path: Path, ca: SigningCa
) -> None:
    first, first_key = ca.issue(node_name="n1", names=NAMES)
    cert_file, key_file = write_pair(tmp_path, first, first_key, stamp_ns=1_000_000_000)
    serving = from_files(cert_file, key_file, client_ca_file=ca.write(tmp_path / "ca.crt"), poll_seconds=0.05)
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))

    assert serving.ready.is_set()
    runner = asyncio.create_task(serving.run())
    try:
        async with tls_server(serving) as port:
            assert await peer_serial(port, client) == first.serial_number

            second, second_key = ca.issue(node_name="n1", names=NAMES)
            write_pair(tmp_path, second, second_key, stamp_ns=2_000_000_000)

            async def second_served() -> bool:
                return await peer_serial(port, client) == second.serial_number

            await wait_for(second_served, timeout_seconds=10, what="the rewritten certificate to be served")
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


def test_a_half_written_pair_keeps_the_previous_certificate(tmp_path: Path, ca: SigningCa) -> None:
    first, first_key = ca.issue(node_name="n1", names=NAMES)
    cert_file, key_file = write_pair(tmp_path, first, first_key, stamp_ns=1_000_000_000)
    serving = from_files(cert_file, key_file, client_ca_file=ca.write(tmp_path / "ca.crt"))
    second, second_key = ca.issue(node_name="n1", names=NAMES)

    # The writer has replaced the certificate but not yet the key.
    cert_file.write_bytes(cert_pem(second))
    os.utime(cert_file, ns=(2_000_000_000, 2_000_000_000))
    assert not serving.reload_if_changed()
    assert serving.certificate == first

    key_file.write_bytes(key_pem(second_key))
    os.utime(key_file, ns=(3_000_000_000, 3_000_000_000))
    assert serving.reload_if_changed()
    assert serving.certificate == second
    assert not serving.reload_if_changed()  # nothing changed since


def test_missing_files_leave_the_certificate_unready_until_they_appear(
    tmp_path: Path, ca: SigningCa, caplog: pytest.LogCaptureFixture
) -> None:
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    serving = from_files(cert_file, key_file, client_ca_file=ca.write(tmp_path / "ca.crt"))
    assert not serving.ready.is_set()
    assert not serving.reload_if_changed()
    assert caplog.text.count("not readable") == 1  # logged once, not on every poll

    cert, key = ca.issue(node_name="n1", names=NAMES)
    write_pair(tmp_path, cert, key, stamp_ns=1_000_000_000)
    with caplog.at_level(logging.INFO, logger="vk_provider.kubelet.certificates"):
        assert serving.reload_if_changed()
    assert serving.ready.is_set()
    assert "serving certificate loaded" in caplog.text
