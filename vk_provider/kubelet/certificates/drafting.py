"""What the node's serving certificate must hold, the request that asks for one, and the checks it must pass.

The subject and the SANs the kubelet-serving signer requires, a new key, the CSR and the
CertificateSigningRequest object that carries it, whether a certificate belongs to a key and fits this
node, and when it is due for renewal.

Why a module of its own: these are the rules of the signer and of the kubelet, as pure functions with
no files, no API server and no clock (the caller passes `now`; the renewal jitter's random draw can be
passed in). They are tested directly, and `serving` (an operator's pair) and `requesting` (the CSR
flow) both use them without this module knowing about either.
"""

from __future__ import annotations

import base64
import ipaddress
import random
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import NameOID

from vk_provider.kit.kube import RawObject

SIGNER_NAME = "kubernetes.io/kubelet-serving"
NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
MIN_EXPIRATION_SECONDS = 600
"""The smallest `expirationSeconds` the apiserver accepts."""

RENEW_FRACTION = 0.7
RENEW_JITTER = 0.1

GeneralNames = frozenset[x509.GeneralName]

_RANDOM = random.SystemRandom()
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def is_dns_name(name: str) -> bool:
    """An RFC 1123 subdomain, the only kind of DNS name Kubernetes objects and signers deal in."""
    return 0 < len(name) <= 253 and all(_DNS_LABEL.fullmatch(label) for label in name.split("."))


def serving_names(node_name: str, addresses: Iterable[str]) -> GeneralNames:
    """The SANs the node's serving certificate must carry: its addresses, and its name if a DNS name.

    The apiserver dials a node by one of its addresses (`--kubelet-preferred-address-types`) and checks
    that address against the certificate, so every address must be in it. Addresses that are not IPs
    are taken as host names; the kubelet-serving signer accepts DNS and IP SANs only.
    """
    names: set[x509.GeneralName] = set()
    if is_dns_name(node_name):
        names.add(x509.DNSName(node_name))
    for address in addresses:
        try:
            names.add(x509.IPAddress(ipaddress.ip_address(address)))
        except ValueError:
            if not is_dns_name(address):
                raise ValueError(
                    f"node address {address!r} is neither an IP address nor a DNS name"
                ) from None
            names.add(x509.DNSName(address))
    if not names:
        raise ValueError(f"node {node_name!r} has no address to put in a serving certificate")
    return frozenset(names)


def names_of(certificate: x509.Certificate | x509.CertificateSigningRequest) -> GeneralNames:
    try:
        extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return frozenset()
    return frozenset(extension.value)


def sorted_names(names: GeneralNames) -> list[x509.GeneralName]:
    # A stable order makes the CSR reproducible and readable: DNS names, then IPv4, then IPv6.
    def key(name: x509.GeneralName) -> tuple[int, int, str]:
        value = name.value
        if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
            return (value.version, int(value), "")
        return (0, 0, str(value))

    return sorted(names, key=key)


def node_subject(node_name: str) -> x509.Name:
    """The identity the kubelet-serving signer requires: CN system:node:<node>, O system:nodes."""
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, NODES_GROUP),
            x509.NameAttribute(NameOID.COMMON_NAME, NODE_USER_PREFIX + node_name),
        ]
    )


def new_private_key() -> ec.EllipticCurvePrivateKey:
    # P-256: fast to generate, accepted by every Kubernetes component and TLS client.
    return ec.generate_private_key(ec.SECP256R1())


def build_csr(
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, *, node_name: str, names: GeneralNames
) -> x509.CertificateSigningRequest:
    return (
        x509.CertificateSigningRequestBuilder()
        .subject_name(node_subject(node_name))
        .add_extension(x509.SubjectAlternativeName(sorted_names(names)), critical=False)
        .sign(key, hashes.SHA256())
    )


def key_usages(key: PrivateKeyTypes) -> list[str]:
    """The usages the signer must grant; key encipherment only means something for RSA key exchange."""
    if isinstance(key, rsa.RSAPrivateKey):
        return ["digital signature", "key encipherment", "server auth"]
    return ["digital signature", "server auth"]


def csr_object(
    csr: x509.CertificateSigningRequest,
    *,
    node_name: str,
    usages: Sequence[str],
    expiration_seconds: int | None,
) -> RawObject:
    """The CertificateSigningRequest object; the apiserver completes `<node>-serving-` to a unique name."""
    spec: dict[str, Any] = {
        "request": base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode(),
        "signerName": SIGNER_NAME,
        "usages": list(usages),
    }
    if expiration_seconds is not None:
        spec["expirationSeconds"] = expiration_seconds
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"generateName": f"{node_name}-serving-"},
        "spec": spec,
    }


def renewal_deadline(
    certificate: x509.Certificate,
    *,
    fraction: float = RENEW_FRACTION,
    jitter: float = RENEW_JITTER,
    rng: Callable[[], float] = _RANDOM.random,
) -> datetime:
    """When to replace the certificate: after `fraction` plus up to `jitter` of its validity."""
    start = certificate.not_valid_before_utc
    lifetime = certificate.not_valid_after_utc - start
    return start + lifetime * min(1.0, fraction + jitter * rng())


def _public_der(key: Any) -> bytes:
    data: bytes = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return data


def key_matches(certificate: x509.Certificate, key: PrivateKeyTypes) -> bool:
    return _public_der(certificate.public_key()) == _public_der(key.public_key())


def stored_certificate_problem(
    certificate: x509.Certificate,
    key: PrivateKeyTypes,
    *,
    node_name: str,
    names: GeneralNames,
    now: datetime,
    renew_at: datetime,
) -> str | None:
    """Why a persisted certificate must not be served again, or None when it may."""
    if not key_matches(certificate, key):
        return "its key does not match the certificate"
    common_names = [a.value for a in certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    groups = [a.value for a in certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    if common_names != [NODE_USER_PREFIX + node_name] or groups != [NODES_GROUP]:
        return f"it is for {certificate.subject.rfc4514_string()}, not for node {node_name}"
    held = names_of(certificate)
    if held != names:
        return (
            f"its names ({describe_names(held)}) differ from the node's addresses and name "
            f"({describe_names(names)})"
        )
    if now < certificate.not_valid_before_utc:
        return f"it is not valid before {certificate.not_valid_before_utc.isoformat()}"
    if now >= renew_at:
        return (
            f"it is past its renewal point {renew_at.isoformat()} "
            f"(valid until {certificate.not_valid_after_utc.isoformat()})"
        )
    return None


def describe_names(names: GeneralNames) -> str:
    """The names for a log line or a message, in the order they are put in a CSR."""
    return ", ".join(str(name.value) for name in sorted_names(names)) or "none"


def describe_certificate(certificate: x509.Certificate) -> str:
    """The certificate for a log line: its serial number and validity."""
    return (
        f"serial {certificate.serial_number:x}, valid "
        f"{certificate.not_valid_before_utc.isoformat()} to {certificate.not_valid_after_utc.isoformat()}"
    )
