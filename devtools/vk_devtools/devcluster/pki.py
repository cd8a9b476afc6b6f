"""Generate the development cluster's certificates and keys with `cryptography`.

One CA signs everything: the apiserver's serving certificate, a client certificate per component
identity (admin, controller-manager, scheduler, the apiserver's kubelet client), and is also the
controller-manager's CSR signer, so a virtual node can later obtain a serving certificate the
apiserver trusts (`--kubelet-certificate-authority`). Keys are ECDSA P-256: fast to generate, and
accepted by every component. The CA carries critical basicConstraints and keyUsage plus SKI/AKI,
which strict verifiers (Python >= 3.13's VERIFY_X509_STRICT) demand.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeAlias

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALIDITY = timedelta(days=3650)
LEAF_VALIDITY = timedelta(days=365)
# Clocks of freshly started processes may disagree a little; never issue a certificate from the future.
BACKDATE = timedelta(minutes=5)

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclasses.dataclass(frozen=True, slots=True)
class KeyPair:
    """PEM paths of a certificate and its private key."""

    cert: Path
    key: Path


@dataclasses.dataclass(frozen=True, slots=True)
class ClientIdentity:
    """A user as Kubernetes sees it in a client certificate: CN is the user, O entries are groups."""

    file_stem: str
    user: str
    groups: tuple[str, ...] = ()


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    """Digital signature always (ECDSA); certificate and CRL signing for a CA only."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


class CertificateAuthority:
    """A CA that can issue serving and client certificates into a folder."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey, paths: KeyPair) -> None:
        self.cert = cert
        self.key = key
        self.paths = paths

    @classmethod
    def create(cls, folder: Path, *, common_name: str = "vk-provider-dev-ca") -> CertificateAuthority:
        folder.mkdir(parents=True, exist_ok=True)
        key = _new_key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = datetime.now(UTC)
        public_key = key.public_key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_key_usage(signs_certificates=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public_key), critical=False)
            .sign(key, hashes.SHA256())
        )
        paths = KeyPair(cert=folder / "ca.crt", key=folder / "ca.key")
        _write_cert(cert, paths.cert)
        _write_key(key, paths.key)
        return cls(cert, key, paths)

    def _issue(
        self,
        folder: Path,
        file_stem: str,
        subject: x509.Name,
        *,
        usage: x509.ObjectIdentifier,
        dns_names: tuple[str, ...] = (),
        ip_addresses: tuple[IPAddress, ...] = (),
    ) -> KeyPair:
        key = _new_key()
        now = datetime.now(UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + LEAF_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(signs_certificates=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if dns_names or ip_addresses:
            names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
            names += [x509.IPAddress(address) for address in ip_addresses]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        paths = KeyPair(cert=folder / f"{file_stem}.crt", key=folder / f"{file_stem}.key")
        _write_cert(cert, paths.cert)
        _write_key(key, paths.key)
        return paths

    def issue_serving(
        self,
        folder: Path,
        file_stem: str,
        *,
        common_name: str,
        dns_names: tuple[str, ...] = (),
        ip_addresses: tuple[IPAddress, ...] = (),
    ) -> KeyPair:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        return self._issue(
            folder,
            file_stem,
            subject,
            usage=ExtendedKeyUsageOID.SERVER_AUTH,
            dns_names=dns_names,
            ip_addresses=ip_addresses,
        )

    def issue_client(self, folder: Path, identity: ClientIdentity) -> KeyPair:
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in identity.groups]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, identity.user))
        return self._issue(
            folder, identity.file_stem, x509.Name(attributes), usage=ExtendedKeyUsageOID.CLIENT_AUTH
        )


def write_service_account_keys(folder: Path) -> KeyPair:
    """The pair the apiserver verifies and the controller-manager signs service-account tokens with."""
    key = _new_key()
    paths = KeyPair(cert=folder / "sa.pub", key=folder / "sa.key")
    paths.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    _write_key(key, paths.key)
    return paths
