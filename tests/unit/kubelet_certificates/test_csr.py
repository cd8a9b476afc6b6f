"""What the node asks the kubelet-serving signer for: subject, names, usages, signer."""

from __future__ import annotations

import base64
import ipaddress
from pathlib import Path
from typing import cast

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from vk_provider.kit.kube import KubeApi
from vk_provider.kubelet.certificates import (
    SIGNER_NAME,
    build_csr,
    csr_object,
    is_dns_name,
    key_usages,
    names_of,
    new_private_key,
    serving_names,
    via_csr,
)


def ip(text: str) -> x509.IPAddress:
    return x509.IPAddress(ipaddress.ip_address(text))


def test_the_csr_names_the_node_as_a_node_and_carries_its_addresses() -> None:
    key = new_private_key()
    names = serving_names("gpu-node-1", ["10.0.0.5", "fd00::5"])
    csr = build_csr(key, node_name="gpu-node-1", names=names)

    assert csr.is_signature_valid
    assert [a.value for a in csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [
        "system:node:gpu-node-1"
    ]
    assert [a.value for a in csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:nodes"
    ]
    assert names_of(csr) == {x509.DNSName("gpu-node-1"), ip("10.0.0.5"), ip("fd00::5")}
    public = csr.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey)
    assert isinstance(public.curve, ec.SECP256R1)


def test_a_node_name_that_is_no_dns_name_is_left_out_of_the_names() -> None:
    assert serving_names("Node_1", ["192.0.2.1"]) == {ip("192.0.2.1")}
    assert not is_dns_name("Node_1")
    assert not is_dns_name("a" * 64)
    assert not is_dns_name("")
    assert is_dns_name("node-1.example.com")


def test_host_name_addresses_become_dns_names_and_others_are_refused() -> None:
    assert serving_names("n1", ["node.example.com"]) == {x509.DNSName("n1"), x509.DNSName("node.example.com")}
    with pytest.raises(ValueError, match="neither an IP address nor a DNS name"):
        serving_names("n1", ["not an address"])
    with pytest.raises(ValueError, match="no address"):
        serving_names("Not_Dns", [])


def test_the_csr_object_asks_the_kubelet_serving_signer() -> None:
    key = new_private_key()
    csr = build_csr(key, node_name="n1", names=serving_names("n1", ["127.0.0.1"]))

    body = csr_object(csr, node_name="n1", usages=key_usages(key), expiration_seconds=3600)

    assert body["apiVersion"] == "certificates.k8s.io/v1"
    assert body["kind"] == "CertificateSigningRequest"
    assert body["metadata"] == {"generateName": "n1-serving-"}
    spec = body["spec"]
    assert spec["signerName"] == SIGNER_NAME == "kubernetes.io/kubelet-serving"
    assert spec["usages"] == ["digital signature", "server auth"]
    assert spec["expirationSeconds"] == 3600
    sent = x509.load_pem_x509_csr(base64.b64decode(spec["request"]))
    assert sent.public_bytes(serialization.Encoding.DER) == csr.public_bytes(serialization.Encoding.DER)

    without = csr_object(csr, node_name="n1", usages=key_usages(key), expiration_seconds=None)
    assert "expirationSeconds" not in without["spec"]


def test_key_encipherment_is_asked_for_rsa_keys_only() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert key_usages(rsa_key) == ["digital signature", "key encipherment", "server auth"]
    assert key_usages(new_private_key()) == ["digital signature", "server auth"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"expiration_seconds": 599}, "at least 600"),
        ({"renew_fraction": 0.95, "renew_jitter": 0.1}, "fractions"),
        ({"renew_fraction": -0.1}, "fractions"),
        ({"addresses": ["not an address"]}, "neither"),
    ],
)
def test_via_csr_refuses_settings_that_cannot_work(
    tmp_path: Path, settings: dict[str, object], message: str
) -> None:
    arguments: dict[str, object] = {
        "node_name": "n1",
        "addresses": ["127.0.0.1"],
        "client_ca_file": tmp_path / "unused.crt",
        "state_dir": tmp_path,
        "self_approve": True,
        **settings,
    }
    with pytest.raises(ValueError, match=message):
        via_csr(cast(KubeApi, object()), **arguments)  # type: ignore[arg-type]
