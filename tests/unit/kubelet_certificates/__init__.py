"""Unit tests of the kubelet serving certificate, and a small CA that plays the kubelet-serving signer."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vk_provider.kubelet.certificates import new_private_key, node_subject


@dataclasses.dataclass(frozen=True)
class SigningCa:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls) -> SigningCa:
        key = new_private_key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
        now = datetime.now(UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(hours=1))
            .not_valid_after(now + timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    def write(self, path: Path) -> Path:
        path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return path

    def issue(
        self,
        *,
        node_name: str,
        names: Iterable[x509.GeneralName],
        not_before: datetime | None = None,
        lifetime: timedelta = timedelta(days=1),
        key: ec.EllipticCurvePrivateKey | None = None,
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        """A node serving certificate as the kubelet-serving signer would issue it."""
        key = key or new_private_key()
        start = not_before or datetime.now(UTC) - timedelta(minutes=5)
        cert = (
            x509.CertificateBuilder()
            .subject_name(node_subject(node_name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + lifetime)
            .add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        return cert, key


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
