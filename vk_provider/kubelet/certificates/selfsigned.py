"""A serving certificate the node signs itself, for clusters whose signer will not issue one.

Why: EKS's kubelet-serving signer issues only for addresses of EC2 instances, so a virtual node's
CSR stays pending forever; without a certificate the kubelet API is not served and `kubectl logs`,
`exec`, `port-forward` and `top` never work. Most managed apiservers do not verify kubelet serving
certificates (no `--kubelet-certificate-authority`), so one of the node's own does the job there.
Where the apiserver does verify them, clients refuse it, which `ServingCertificate` notices
(`handshakes`) and reports.

The certificate names the node as a signer-issued one would (CN system:node:<node>, O system:nodes,
the node's addresses and name as SANs), so the two are interchangeable for every client but the
verifying ones. A fresh key is made at every start: nothing is persisted, there is nothing to trust.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from vk_provider.kubelet.certificates.drafting import (
    GeneralNames,
    describe_certificate,
    describe_names,
    new_private_key,
    node_subject,
    renewal_deadline,
    serving_names,
    sorted_names,
)
from vk_provider.kubelet.certificates.serving import Clock, ServingCertificate, utc_now
from vk_provider.kubelet.certificates.state import SELF_SIGNED, CertificateState

logger = logging.getLogger(__package__)

VALIDITY = timedelta(days=365)
BACKDATE = timedelta(minutes=5)
"""Valid from a little before now: a client whose clock is slightly behind must not see it as future."""
RECHECK_SECONDS = 3600.0
"""The longest nap between looks at the wall clock (see `requesting.RECHECK_SECONDS`)."""


def self_signed_certificate(
    key: ec.EllipticCurvePrivateKey,
    *,
    node_name: str,
    names: GeneralNames,
    now: datetime,
    validity: timedelta,
) -> x509.Certificate:
    """A serving certificate for the node, signed by its own key. Pure but for the serial's randomness."""
    subject = node_subject(node_name)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.SubjectAlternativeName(sorted_names(names)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )


class SelfSignedCertificate(ServingCertificate):
    """The node's own certificate, made at once and made again before it expires.

    `because` is the message's explanation of why this node serves one (the setting, or `auto`'s
    CSR that was not issued); `auto` changes it with `explain`.
    """

    def __init__(
        self,
        *,
        node_name: str,
        addresses: Sequence[str],
        client_ca_file: Path,
        because: str,
        validity: timedelta = VALIDITY,
        clock: Clock = utc_now,
        ssl_context: ssl.SSLContext | None = None,
        mint_now: bool = True,
    ) -> None:
        super().__init__(client_ca_file=client_ca_file, clock=clock, ssl_context=ssl_context)
        self._node_name = node_name
        self._names = serving_names(node_name, addresses)
        self._validity = validity
        self._because = because
        if mint_now:
            self.mint()

    def mint(self) -> None:
        """Make a new key and certificate and serve them to new connections from now on."""
        key = new_private_key()
        certificate = self_signed_certificate(
            key, node_name=self._node_name, names=self._names, now=self._clock(), validity=self._validity
        )
        self._install([certificate], key)
        self.renew_at = renewal_deadline(certificate)
        logger.info(
            "serving a self-signed certificate for node %s (%s): %s",
            self._node_name,
            describe_names(self._names),
            describe_certificate(certificate),
        )
        self._report(self._state())

    def explain(self, because: str) -> None:
        """Say why the node serves its own certificate (the message of its state), from now on."""
        self._because = because
        if self.ready.is_set() and self.state.reason == SELF_SIGNED:
            self._report(self._state())

    def _state(self) -> CertificateState:
        return CertificateState(
            SELF_SIGNED,
            f"serving a self-signed certificate ({self._because}); apiservers that verify kubelet "
            "certificates (--kubelet-certificate-authority) refuse it",
        )

    async def run(self) -> None:
        while True:
            assert self.renew_at is not None  # noqa: S101 - minted at construction or by auto
            remaining = (self.renew_at - self._clock()).total_seconds()
            if remaining <= 0:
                self.mint()
                continue
            await asyncio.sleep(min(remaining, RECHECK_SECONDS))
