"""`auto`, `self-signed` and `file`: what each serves, when `auto` falls back and switches over, what
each reports, and a client refusing a self-signed certificate."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.unit.kubelet_certificates import SigningCa, cert_pem, key_pem
from tests.unit.kubelet_certificates.test_tls import peer_serial, tls_server
from vk_provider.kubelet.certificates import (
    AutoCertificate,
    CertificateState,
    SelfSignedCertificate,
    ServingCertificate,
    from_files,
    names_of,
    new_private_key,
    serving_names,
)
from vk_provider.kubelet.certificates.state import DENIED, ISSUED, PENDING

NAMES = serving_names("n1", ["127.0.0.1"])


class FakeCsr(ServingCertificate):
    """The CSR flow's contract as `auto` relies on it: reports Pending/Denied, installs and reports Issued."""

    def __init__(self, ssl_context: ssl.SSLContext, client_ca_file: Path) -> None:
        super().__init__(client_ca_file=client_ca_file, ssl_context=ssl_context)
        self.runs = 0

    async def run(self) -> None:
        self.runs += 1
        await asyncio.Event().wait()

    def pending(self, name: str) -> None:
        self._report(CertificateState(PENDING, f"CSR {name} for the serving certificate: waiting"))

    def deny(self, name: str) -> None:
        self._report(CertificateState(DENIED, f"CSR {name} denied: NoWay: not here"))

    def issue(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self._install([cert], key)
        self._report(
            CertificateState(ISSUED, f"serving the certificate issued through CSR x ({cert.serial_number})")
        )


def auto(ca_file: Path, wait_seconds: float) -> tuple[AutoCertificate, list[FakeCsr]]:
    made: list[FakeCsr] = []

    def csr(context: ssl.SSLContext) -> FakeCsr:
        made.append(FakeCsr(context, ca_file))
        return made[-1]

    certificate = AutoCertificate(
        csr, node_name="n1", addresses=["127.0.0.1"], client_ca_file=ca_file, wait_seconds=wait_seconds
    )
    return certificate, made


@contextlib.asynccontextmanager
async def running(serving: ServingCertificate) -> AsyncIterator[None]:
    task = asyncio.create_task(serving.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def eventually(condition: Callable[[], bool], what: str, timeout_seconds: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)  # the polling period of a condition wait (noqa: sleep-ok)


def insecure_client() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def served_certificate(port: int) -> x509.Certificate:
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=insecure_client())
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()
        await writer.wait_closed()


def refuse(port: int) -> None:
    """A verifying client without the node's CA, as an apiserver with --kubelet-certificate-authority.

    Blocking on purpose: asyncio's TLS client drops the alert it owes the server when verification
    fails, while a blocking socket (like Go's crypto/tls) sends it."""
    with socket.create_connection(("127.0.0.1", port)) as raw, contextlib.suppress(ssl.SSLError):
        ssl.create_default_context().wrap_socket(raw, server_hostname="127.0.0.1")


def test_a_self_signed_certificate_names_the_node_and_its_addresses(ca_file: Path) -> None:
    serving = SelfSignedCertificate(
        node_name="n1", addresses=["127.0.0.1", "10.0.0.5"], client_ca_file=ca_file, because="configured"
    )

    cert = serving.certificate
    assert cert is not None
    assert serving.ready.is_set()
    assert cert.issuer == cert.subject
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:n1"
    assert names_of(cert) == serving_names("n1", ["127.0.0.1", "10.0.0.5"])
    assert cert.not_valid_before_utc <= datetime.now(UTC) < cert.not_valid_after_utc
    assert serving.state.reason == "SelfSigned"
    assert serving.state.working
    assert "configured" in serving.state.message


async def test_a_self_signed_certificate_is_made_again_at_its_renewal_point(ca_file: Path) -> None:
    now = [datetime.now(UTC)]
    serving = SelfSignedCertificate(
        node_name="n1", addresses=["127.0.0.1"], client_ca_file=ca_file, because="x", clock=lambda: now[0]
    )
    first = serving.certificate
    assert first is not None
    assert serving.renew_at is not None
    now[0] = serving.renew_at + timedelta(seconds=1)
    async with running(serving):
        await eventually(lambda: serving.certificate != first, "a new certificate")


async def test_auto_serves_its_own_certificate_when_the_csr_is_not_issued_in_time(ca_file: Path) -> None:
    serving, made = auto(ca_file, wait_seconds=0.3)
    async with running(serving), tls_server(serving) as port:
        started = time.monotonic()
        await asyncio.sleep(0)
        made[0].pending("n1-serving-abc")
        assert serving.state.reason == "Pending"
        assert not serving.ready.is_set()
        await asyncio.wait_for(serving.ready.wait(), 5)
        fell_back_after = time.monotonic() - started

        assert 0.25 <= fell_back_after < 1.5
        assert serving.fell_back
        assert serving.state.reason == "SelfSigned"
        assert serving.state.working
        assert "n1-serving-abc" in serving.state.message
        assert "within 0.3s" in serving.state.message
        cert = await served_certificate(port)
        assert cert.issuer == cert.subject
        assert names_of(cert) == NAMES


def test_auto_waits_for_a_certificate_as_long_as_its_csr_flow_does(ca_file: Path) -> None:
    """What the not-issued alert reads: the CSR flow's clock, self-signed fallback or not."""
    serving, made = auto(ca_file, wait_seconds=60)
    assert serving.requesting_since() is None
    asking = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    made[0].requesting_since = lambda: asking  # type: ignore[method-assign]
    assert serving.requesting_since() == asking


async def test_auto_falls_back_at_once_when_the_csr_is_denied(ca_file: Path) -> None:
    serving, made = auto(ca_file, wait_seconds=60)
    async with running(serving):
        await asyncio.sleep(0)
        started = time.monotonic()
        made[0].deny("n1-serving-abc")
        await asyncio.wait_for(serving.ready.wait(), 5)
        assert time.monotonic() - started < 1.0
    assert serving.state.reason == "SelfSigned"
    assert "n1-serving-abc denied" in serving.state.message


async def test_auto_switches_to_the_issued_certificate_without_a_restart(
    ca_file: Path, ca: SigningCa
) -> None:
    serving, made = auto(ca_file, wait_seconds=0.05)
    states: list[str] = []
    serving.subscribe(lambda state: states.append(state.reason))
    async with running(serving), tls_server(serving) as port:
        await asyncio.wait_for(serving.ready.wait(), 5)
        self_signed = await served_certificate(port)
        assert self_signed.issuer == self_signed.subject

        made[0].pending("n1-serving-def")  # a later CSR of the background retries
        assert "n1-serving-def" in serving.state.message
        assert serving.state.reason == "SelfSigned"

        issued, key = ca.issue(node_name="n1", names=NAMES)
        made[0].issue(issued, key)
        client = ssl.create_default_context(cafile=str(ca_file))
        client.check_hostname = False
        assert await peer_serial(port, client) == issued.serial_number
    assert serving.state.reason == "Issued"
    assert serving.certificate == issued
    assert states[-1] == "Issued"
    assert "SelfSigned" in states
    assert made[0].runs == 1  # the CSR flow kept running in the background throughout


async def test_auto_never_serves_its_own_when_the_csr_is_issued_in_time(ca_file: Path, ca: SigningCa) -> None:
    serving, made = auto(ca_file, wait_seconds=0.2)
    async with running(serving):
        await asyncio.sleep(0)
        issued, key = ca.issue(node_name="n1", names=NAMES)
        made[0].issue(issued, key)
        # Past the 0.2 s wait: an absence (no fallback) needs a window.
        await asyncio.sleep(0.4)  # (noqa: sleep-ok)
    assert not serving.fell_back
    assert serving.certificate == issued
    assert serving.state.reason == "Issued"


async def test_clients_refusing_the_self_signed_certificate_are_reported_until_one_is_issued(
    ca_file: Path, ca: SigningCa
) -> None:
    serving, made = auto(ca_file, wait_seconds=0.0)
    async with running(serving), tls_server(serving) as port:
        await asyncio.wait_for(serving.ready.wait(), 5)
        await asyncio.to_thread(refuse, port)
        await eventually(lambda: serving.state.reason == "RejectedByClients", "the refusal")
        assert not serving.state.working
        assert "--kubelet-certificate-authority" in serving.state.message
        assert "csr" in serving.state.message
        assert "file" in serving.state.message
        assert serving.refused_handshakes == 1

        made[0].pending("n1-serving-ghi")  # a new CSR does not make the refusal go away
        assert serving.state.reason == "RejectedByClients"

        issued, key = ca.issue(node_name="n1", names=NAMES)
        made[0].issue(issued, key)
        assert serving.state.reason == "Issued"
        await asyncio.to_thread(refuse, port)  # a client without the CA: says nothing of the apiserver
        await eventually(lambda: serving.refused_handshakes == 2, "the second refusal")
        assert serving.state.reason == "Issued"


def write_pair(folder: Path, cert: x509.Certificate, key: object, stamp_ns: int) -> tuple[Path, Path]:
    cert_file, key_file = folder / "tls.crt", folder / "tls.key"
    cert_file.write_bytes(cert_pem(cert))
    key_file.write_bytes(key_pem(key))  # type: ignore[arg-type]
    for path in (cert_file, key_file):
        os.utime(path, ns=(stamp_ns, stamp_ns))
    return cert_file, key_file


def test_files_report_missing_mismatched_expired_and_loaded(
    tmp_path: Path, ca_file: Path, ca: SigningCa
) -> None:
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    serving = from_files(cert_file, key_file, client_ca_file=ca_file)
    assert serving.state.reason == "FileInvalid"
    assert not serving.state.working
    assert "cannot read" in serving.state.message
    assert "not served" in serving.state.message

    cert, key = ca.issue(node_name="n1", names=NAMES)
    write_pair(tmp_path, cert, new_private_key(), 1_000_000_000)
    assert not serving.reload_if_changed()
    assert "does not belong" in serving.state.message

    write_pair(tmp_path, cert, key, 2_000_000_000)
    assert serving.reload_if_changed()
    assert serving.state.reason == "FileLoaded"
    assert serving.state.working
    assert str(cert_file) in serving.state.message

    old, old_key = ca.issue(
        node_name="n1",
        names=NAMES,
        not_before=datetime.now(UTC) - timedelta(days=3),
        lifetime=timedelta(days=1),
    )
    write_pair(tmp_path, old, old_key, 3_000_000_000)
    assert serving.reload_if_changed()
    assert serving.state.reason == "FileInvalid"
    assert "expired" in serving.state.message

    key_file.unlink()
    assert not serving.reload_if_changed()
    assert "stays in use" in serving.state.message
