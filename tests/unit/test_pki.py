"""The development PKI: certificates that verify against its CA, with the identities Kubernetes reads."""

from __future__ import annotations

import ipaddress
import ssl
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store

from vk_devtools.devcluster.pki import CertificateAuthority, ClientIdentity, write_service_account_keys


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_the_ca_has_the_extensions_strict_verifiers_require(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    cert = load(ca.paths.cert)
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert constraints.critical
    assert constraints.value.ca
    assert usage.critical
    assert usage.value.key_cert_sign
    assert usage.value.crl_sign
    cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier)
    assert oct(ca.paths.key.stat().st_mode & 0o777) == "0o600"


def test_a_serving_certificate_verifies_for_its_names_and_addresses(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    pair = ca.issue_serving(
        tmp_path,
        "server",
        common_name="kube-apiserver",
        dns_names=("localhost",),
        ip_addresses=(ipaddress.ip_address("127.0.0.1"),),
    )
    leaf = load(pair.cert)
    store = Store([load(ca.paths.cert)])
    for name in (x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))):
        verifier = PolicyBuilder().store(store).time(datetime.now(UTC)).build_server_verifier(name)
        verifier.verify(leaf, [])
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    # The pair loads as a TLS server identity, as the apiserver will load it.
    ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(pair.cert, pair.key)


def test_a_client_certificate_names_the_user_and_groups(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    pair = ca.issue_client(tmp_path, ClientIdentity("node", "system:node:gpu-1", ("system:nodes",)))
    leaf = load(pair.cert)
    assert [a.value for a in leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [
        "system:node:gpu-1"
    ]
    assert [a.value for a in leaf.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:nodes"
    ]
    # Kubernetes (Go's x509) checks the chain, not a web-PKI profile: the signature and the usages.
    leaf.verify_directly_issued_by(load(ca.paths.cert))
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_a_certificate_from_another_ca_does_not_verify(tmp_path: Path) -> None:
    ours = CertificateAuthority.create(tmp_path / "ours")
    theirs = CertificateAuthority.create(tmp_path / "theirs")
    pair = theirs.issue_client(tmp_path, ClientIdentity("intruder", "intruder"))
    with pytest.raises(InvalidSignature):
        load(pair.cert).verify_directly_issued_by(load(ours.paths.cert))


def test_service_account_keys_are_a_matching_pair(tmp_path: Path) -> None:
    pair = write_service_account_keys(tmp_path)
    private = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    public = serialization.load_pem_public_key(pair.cert.read_bytes())
    assert private.public_key().public_numbers() == public.public_numbers()  # type: ignore[union-attr]
