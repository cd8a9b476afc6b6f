"""The virtual node's kubelet serving certificate: the TLS identity its kubelet API presents.

Why: the apiserver reaches a node's kubelet API (logs, exec, metrics) over HTTPS and, in a hardened
cluster (`--kubelet-certificate-authority`), verifies the node's certificate against the cluster CA for
the address it dials. A self-signed certificate will not do. A real kubelet asks the cluster for one
with a CertificateSigningRequest for the `kubernetes.io/kubelet-serving` signer, which the
kube-controller-manager signs with the cluster CA once the request is approved; we do the same.

The flow of `via_csr`:

1. At start, a certificate an earlier run persisted in `state_dir` is reused when it still names this
   node and its addresses and is not past its renewal point, so a restart does not mint a CSR. One
   that is past that point but still valid is served until its replacement is issued.
2. Otherwise: a fresh ECDSA P-256 key and a CSR (CN `system:node:<node>`, O `system:nodes`, the node's
   addresses as IP SANs, the node name as DNS SAN when it is a DNS name), created as a
   `certificates.k8s.io/v1` object. With `self_approve` we approve it through the `/approval`
   subresource (which needs the RBAC below); otherwise we log the `kubectl certificate approve` command
   an operator has to run, again every few minutes while it stays pending.
3. We watch the CSR until the signer has put the certificate in `status.certificate`. Denied, Failed,
   deleted, a timeout or any API error: log it, back off (capped and jittered) and start over with a
   new key and CSR.
4. Certificate and key are persisted (one 0600 PEM file, replaced atomically) and loaded into the
   server's SSLContext.
5. When 70-80 % of the validity has passed (the kubelet's rule; the jitter keeps a fleet of nodes from
   renewing at the same instant) steps 2-4 run again. `load_cert_chain` on the same SSLContext changes
   the identity for new handshakes only: established connections keep what they negotiated, and the
   old certificate stays in service until the new one is there.

`from_files` serves an operator's own pair instead and reloads it when either file changes.

Until a certificate is loaded `ready` stays unset; the caller (the kubelet API server) waits for it.

The RBAC `via_csr` needs: create, get, list and watch on `certificatesigningrequests`; for
self-approval also update on `certificatesigningrequests/approval` and approve on `signers` named
`kubernetes.io/kubelet-serving` (all in the `certificates.k8s.io` group).
"""

from __future__ import annotations

import abc
import asyncio
import base64
import contextlib
import ipaddress
import logging
import math
import os
import random
import re
import ssl
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import NameOID

from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject

logger = logging.getLogger(__name__)

SIGNER_NAME = "kubernetes.io/kubelet-serving"
CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
APPROVAL_REASON = "VkProviderSelfApproved"
STORE_FILE_NAME = "kubelet-server-current.pem"
MIN_EXPIRATION_SECONDS = 600
"""The smallest `expirationSeconds` the apiserver accepts."""

RENEW_FRACTION = 0.7
RENEW_JITTER = 0.1
ISSUE_TIMEOUT_SECONDS = 15 * 60.0
"""How long one CSR may stay unsigned before we start over (the kubelet's certificate manager waits as
long); a pending CSR is garbage-collected by the controller-manager after a day anyway."""
APPROVAL_REMINDER_SECONDS = 120.0
RECHECK_SECONDS = 60.0
"""The longest nap between looks at the wall clock: asyncio timers run on the monotonic clock, which
stands still while a machine is suspended, so a single long sleep could oversleep the renewal point."""
FILE_POLL_SECONDS = 10.0
RETRY_INITIAL_SECONDS = 2.0
RETRY_MAX_SECONDS = 300.0

Clock = Callable[[], datetime]
GeneralNames = frozenset[x509.GeneralName]

_RANDOM = random.SystemRandom()
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class CsrRejectedError(Exception):
    """The CSR was denied, failed, deleted or answered with a certificate for another key."""


def utc_now() -> datetime:
    return datetime.now(UTC)


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


def _sorted_names(names: GeneralNames) -> list[x509.GeneralName]:
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
        .add_extension(x509.SubjectAlternativeName(_sorted_names(names)), critical=False)
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


def backoff_delay(failures: int, *, initial: float, cap: float) -> float:
    """Exponential, capped, and jittered down to half so retries of many nodes spread out."""
    return jittered_backoff_seconds(failures + 1, initial_seconds=initial, max_seconds=cap)


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
        return f"its names ({_describe(held)}) differ from the node's addresses and name ({_describe(names)})"
    if now < certificate.not_valid_before_utc:
        return f"it is not valid before {certificate.not_valid_before_utc.isoformat()}"
    if now >= renew_at:
        return (
            f"it is past its renewal point {renew_at.isoformat()} "
            f"(valid until {certificate.not_valid_after_utc.isoformat()})"
        )
    return None


def _describe(names: GeneralNames) -> str:
    return ", ".join(str(name.value) for name in _sorted_names(names)) or "none"


def server_ssl_context(client_ca_file: Path) -> ssl.SSLContext:
    """The kubelet API's server context, without an identity yet.

    TLS 1.2 at least, as the kubelet. Client certificates are requested but optional: the apiserver
    authenticates with one, metrics-server and others with a bearer token instead. One that is offered
    must verify against the cluster CA, so the auth layer can trust `getpeercert()`.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_OPTIONAL
    context.load_verify_locations(cafile=str(client_ca_file))
    return context


def _bundle_pem(chain: Sequence[x509.Certificate], key: PrivateKeyTypes) -> bytes:
    certificates = b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in chain)
    return certificates + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _parse_bundle(data: bytes) -> tuple[list[x509.Certificate], PrivateKeyTypes]:
    """Certificates and the key from one PEM file (the format we persist, as the kubelet does)."""
    chain = x509.load_pem_x509_certificates(data)
    begin = data.find(b"-----BEGIN PRIVATE KEY-----")
    if begin < 0:
        raise ValueError("no PKCS#8 private key in the file")
    return chain, serialization.load_pem_private_key(data[begin:], password=None)


def load_identity(context: ssl.SSLContext, chain: Sequence[x509.Certificate], key: PrivateKeyTypes) -> None:
    """Put certificate and key into the context, affecting only handshakes that start afterwards.

    `ssl` loads identities only from a path. We hand it exactly the bytes we have checked (never the
    operator's files, which may change between check and load and leave a context with a certificate
    but no matching key), through an anonymous in-memory file where the platform has one, so the key
    is not written anywhere else.
    """
    data = _bundle_pem(chain, key)
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        descriptor = os.memfd_create("vk-provider-serving", os.MFD_CLOEXEC)
        try:
            with open(descriptor, "wb", closefd=False) as memory:
                memory.write(data)
            context.load_cert_chain(f"/proc/self/fd/{descriptor}")
        finally:
            os.close(descriptor)
        return
    descriptor, name = tempfile.mkstemp(prefix="vk-provider-serving-", suffix=".pem")  # 0600
    try:
        with open(descriptor, "wb") as temporary:
            temporary.write(data)
        context.load_cert_chain(name)
    finally:
        os.unlink(name)


def _write_private_file(path: Path, data: bytes) -> None:
    """Replace `path` atomically with a 0600 file, so a crash never leaves half a certificate."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with open(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def _describe_certificate(certificate: x509.Certificate) -> str:
    return (
        f"serial {certificate.serial_number:x}, valid "
        f"{certificate.not_valid_before_utc.isoformat()} to {certificate.not_valid_after_utc.isoformat()}"
    )


class ServingCertificate(abc.ABC):
    """The source of the kubelet API's TLS identity.

    `ssl_context` is the one server context for the lifetime of the process; a new certificate is
    loaded into it in place. `ready` is set once it holds a certificate; `run` keeps it current.
    Constructing one reads the client CA bundle and raises (OSError, ssl.SSLError) if it cannot.
    """

    def __init__(self, *, client_ca_file: Path, clock: Clock = utc_now) -> None:
        self.ssl_context = server_ssl_context(client_ca_file)
        self.ready = asyncio.Event()
        self.certificate: x509.Certificate | None = None
        """The certificate new connections get (None until there is one)."""
        self.renew_at: datetime | None = None
        """When the current certificate will be replaced (None: it is not renewed by us)."""
        self._clock = clock

    @abc.abstractmethod
    async def run(self) -> None:
        """Keep the certificate current until cancelled; never raises otherwise."""

    def _install(self, chain: Sequence[x509.Certificate], key: PrivateKeyTypes) -> None:
        load_identity(self.ssl_context, chain, key)
        self.certificate = chain[0]
        self.ready.set()


def from_files(
    cert_file: Path, key_file: Path, *, client_ca_file: Path, poll_seconds: float = FILE_POLL_SECONDS
) -> FileCertificate:
    """Serve an operator's own certificate and key, reloaded whenever either file changes.

    The pair is loaded at once when it is there; a missing or broken pair is logged and `ready` stays
    unset until a good one appears.
    """
    return FileCertificate(cert_file, key_file, client_ca_file=client_ca_file, poll_seconds=poll_seconds)


class FileCertificate(ServingCertificate):
    """An operator's pair, polled for changes (see `from_files`)."""

    def __init__(self, cert_file: Path, key_file: Path, *, client_ca_file: Path, poll_seconds: float) -> None:
        super().__init__(client_ca_file=client_ca_file)
        self._cert_file = cert_file
        self._key_file = key_file
        self._poll_seconds = poll_seconds
        self._seen: object = None
        self.reload_if_changed()

    def _stamp(self) -> object:
        # mtime alone can miss a replacement within the file system's timestamp resolution; size and
        # inode catch that and the symlink swaps of Kubernetes secret volumes.
        stamps = []
        for path in (self._cert_file, self._key_file):
            status = path.stat()
            stamps.append((status.st_mtime_ns, status.st_size, status.st_ino))
        return tuple(stamps)

    def reload_if_changed(self) -> bool:
        """Load the pair if the files changed since the last look; True if a new pair was loaded."""
        try:
            stamp = self._stamp()
        except OSError as error:
            if self._seen != "missing":  # log once per disappearance, not on every poll
                logger.warning("the serving certificate files are not readable: %s", error)
                self._seen = "missing"
            return False
        if stamp == self._seen:
            return False
        self._seen = stamp
        try:
            chain = x509.load_pem_x509_certificates(self._cert_file.read_bytes())
            key = serialization.load_pem_private_key(self._key_file.read_bytes(), password=None)
            if not key_matches(chain[0], key):
                raise ValueError("the key does not belong to the certificate")
            self._install(chain, key)
        except (OSError, ValueError, TypeError, ssl.SSLError) as error:
            # A writer may have replaced one file and not yet the other; its next write changes the
            # stamp and brings us back here.
            logger.warning(
                "could not load the serving certificate from %s and %s: %s%s",
                self._cert_file,
                self._key_file,
                error,
                "; the previous one stays in use" if self.ready.is_set() else "",
            )
            return False
        logger.info(
            "serving certificate loaded from %s: %s", self._cert_file, _describe_certificate(chain[0])
        )
        if chain[0].not_valid_after_utc <= self._clock():
            logger.warning("the serving certificate in %s has expired", self._cert_file)
        return True

    async def run(self) -> None:
        while True:
            self.reload_if_changed()
            await asyncio.sleep(self._poll_seconds)


def via_csr(
    api: KubeApi,
    *,
    node_name: str,
    addresses: Sequence[str],
    client_ca_file: Path,
    state_dir: Path,
    self_approve: bool,
    expiration_seconds: int | None = None,
    renew_fraction: float = RENEW_FRACTION,
    renew_jitter: float = RENEW_JITTER,
    issue_timeout_seconds: float = ISSUE_TIMEOUT_SECONDS,
    approval_reminder_seconds: float = APPROVAL_REMINDER_SECONDS,
    retry_initial_seconds: float = RETRY_INITIAL_SECONDS,
    retry_max_seconds: float = RETRY_MAX_SECONDS,
    recheck_seconds: float = RECHECK_SECONDS,
    clock: Clock = utc_now,
) -> ServingCertificate:
    """A certificate from the cluster's kubelet-serving signer, renewed before it expires.

    A still-good certificate persisted in `state_dir` by an earlier run is loaded at once (so `ready`
    may already be set on return); otherwise `run` requests one. `expiration_seconds` asks the signer
    for a shorter validity than its default (at least 600). `clock` is the wall clock the renewal
    decisions read (tests move it forward).
    """
    if expiration_seconds is not None and expiration_seconds < MIN_EXPIRATION_SECONDS:
        raise ValueError(f"expiration_seconds must be at least {MIN_EXPIRATION_SECONDS}")
    if renew_fraction < 0.0 or renew_jitter < 0.0 or renew_fraction + renew_jitter > 1.0:
        raise ValueError("renew_fraction and renew_jitter must be fractions of the validity")
    return _CsrCertificate(
        api,
        node_name=node_name,
        names=serving_names(node_name, addresses),
        client_ca_file=client_ca_file,
        state_dir=state_dir,
        self_approve=self_approve,
        expiration_seconds=expiration_seconds,
        renew_fraction=renew_fraction,
        renew_jitter=renew_jitter,
        issue_timeout_seconds=issue_timeout_seconds,
        approval_reminder_seconds=approval_reminder_seconds,
        retry_initial_seconds=retry_initial_seconds,
        retry_max_seconds=retry_max_seconds,
        recheck_seconds=recheck_seconds,
        clock=clock,
    )


class _CsrCertificate(ServingCertificate):
    def __init__(
        self,
        api: KubeApi,
        *,
        node_name: str,
        names: GeneralNames,
        client_ca_file: Path,
        state_dir: Path,
        self_approve: bool,
        expiration_seconds: int | None,
        renew_fraction: float,
        renew_jitter: float,
        issue_timeout_seconds: float,
        approval_reminder_seconds: float,
        retry_initial_seconds: float,
        retry_max_seconds: float,
        recheck_seconds: float,
        clock: Clock,
    ) -> None:
        super().__init__(client_ca_file=client_ca_file, clock=clock)
        self._api = api
        self._node_name = node_name
        self._names = names
        self._store = state_dir / STORE_FILE_NAME
        self._self_approve = self_approve
        self._expiration_seconds = expiration_seconds
        self._renew_fraction = renew_fraction
        self._renew_jitter = renew_jitter
        self._issue_timeout = issue_timeout_seconds
        self._reminder = approval_reminder_seconds
        self._retry_initial = retry_initial_seconds
        self._retry_max = retry_max_seconds
        self._recheck = recheck_seconds
        self._reuse_stored()

    def _deadline(self, certificate: x509.Certificate) -> datetime:
        return renewal_deadline(certificate, fraction=self._renew_fraction, jitter=self._renew_jitter)

    def _reuse_stored(self) -> None:
        try:
            chain, key = _parse_bundle(self._store.read_bytes())
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError) as error:
            logger.warning("ignoring the stored serving certificate %s: %s", self._store, error)
            return
        renew_at = self._deadline(chain[0])
        now = self._clock()

        def problem_if_renewed_at(moment: datetime) -> str | None:
            return stored_certificate_problem(
                chain[0], key, node_name=self._node_name, names=self._names, now=now, renew_at=moment
            )

        problem = problem_if_renewed_at(renew_at)
        if problem is None:
            origin = f"reused from {self._store}"
        elif problem_if_renewed_at(chain[0].not_valid_after_utc) is None:
            # Due for renewal but still valid, and right for this node: serve it while a new one is
            # requested, so the kubelet API is not down until then (an operator may take a while to
            # approve). `renew_at` is in the past, so `run` starts the renewal at once.
            origin = f"reused from {self._store} until a new one is issued ({problem})"
        else:
            logger.info("not reusing the stored serving certificate %s: %s", self._store, problem)
            return
        try:
            self._use(chain, key, renew_at, origin=origin)
        except (ValueError, ssl.SSLError) as error:
            logger.warning("ignoring the stored serving certificate %s: %s", self._store, error)

    def _use(
        self, chain: Sequence[x509.Certificate], key: PrivateKeyTypes, renew_at: datetime, *, origin: str
    ) -> None:
        self._install(chain, key)
        self.renew_at = renew_at
        logger.info(
            "serving certificate for node %s %s: %s; renewal from %s",
            self._node_name,
            origin,
            _describe_certificate(chain[0]),
            renew_at.isoformat(),
        )

    async def run(self) -> None:
        while True:
            if self.renew_at is None or self._clock() >= self.renew_at:
                if self.renew_at is not None:
                    logger.info(
                        "renewing the serving certificate of node %s (renewal point %s reached)",
                        self._node_name,
                        self.renew_at.isoformat(),
                    )
                await self._renew()
            assert self.renew_at is not None  # noqa: S101 - _renew returns only with a certificate
            # Nap in short steps and look at the wall clock again, see RECHECK_SECONDS.
            remaining = (self.renew_at - self._clock()).total_seconds()
            await asyncio.sleep(max(0.0, min(remaining, self._recheck)))

    async def _renew(self) -> None:
        """Obtain and load a new certificate, retrying every failure until one is in place."""
        failures = 0
        while True:
            try:
                name, chain, key = await self._request_certificate()
                self._use(chain, key, self._deadline(chain[0]), origin=f"issued through CSR {name}")
            except Exception as error:
                delay = backoff_delay(failures, initial=self._retry_initial, cap=self._retry_max)
                failures += 1
                # Expected failures in one line; anything else with its traceback, as it is a bug.
                expected = isinstance(
                    error, KubeApiError | CsrRejectedError | TimeoutError | OSError | aiohttp.ClientError
                )
                logger.warning(
                    "could not obtain a serving certificate for node %s: %s; retrying in %.1fs",
                    self._node_name,
                    str(error) or type(error).__name__,
                    delay,
                    exc_info=not expected,
                )
                await asyncio.sleep(delay)
                continue
            try:
                _write_private_file(self._store, _bundle_pem(chain, key))
            except OSError as error:
                logger.warning(
                    "could not store the serving certificate in %s (a restart will request a new one): %s",
                    self._store,
                    error,
                )
            return

    async def _request_certificate(self) -> tuple[str, list[x509.Certificate], PrivateKeyTypes]:
        key = new_private_key()
        csr = build_csr(key, node_name=self._node_name, names=self._names)
        body = csr_object(
            csr,
            node_name=self._node_name,
            usages=key_usages(key),
            expiration_seconds=self._expiration_seconds,
        )
        created = await self._api.create(CSR_PATH, body)
        name = created["metadata"]["name"]
        logger.info(
            "created CSR %s for the serving certificate of node %s (%s)",
            name,
            self._node_name,
            _describe(self._names),
        )
        pem = await self._await_certificate(name, created)
        try:
            chain = x509.load_pem_x509_certificates(pem)
        except ValueError as error:
            raise CsrRejectedError(f"CSR {name} holds no readable certificate: {error}") from None
        if not key_matches(chain[0], key):
            raise CsrRejectedError(f"CSR {name} was answered with a certificate for another key")
        return name, chain, key

    async def _await_certificate(self, name: str, current: RawObject) -> bytes:
        """Approve (or ask for approval) and wait until the signer has issued the certificate."""
        deadline = time.monotonic() + self._issue_timeout
        manual = not self._self_approve
        may_approve = self._self_approve
        next_hint = 0.0
        while True:
            issued = _issued_certificate(name, current)
            if issued is not None:
                return issued
            approved = _has_condition(current, "Approved")
            if not approved and may_approve:
                try:
                    current = await self._approve(current)
                    may_approve = False  # once is enough; the answer is examined above
                    continue
                except KubeApiError as error:
                    if error.conflict:  # changed under us (perhaps approved by someone): look again
                        current = await self._api.get(f"{CSR_PATH}/{name}")
                        continue
                    if error.status not in (401, 403):
                        raise
                    # Missing RBAC is a setup matter the operator can still settle by hand.
                    manual, may_approve = True, False
                    logger.warning(
                        "self-approval of CSR %s was refused (%s); the node needs `update` on "
                        "certificatesigningrequests/approval and `approve` on signers %s",
                        name,
                        error,
                        SIGNER_NAME,
                    )
            now = time.monotonic()
            if manual and not approved and now >= next_hint:
                logger.warning(
                    'waiting for approval of CSR %s: run "kubectl certificate approve %s"', name, name
                )
                next_hint = now + self._reminder
            if now >= deadline:
                raise TimeoutError(f"CSR {name} was not issued within {self._issue_timeout:.0f}s")
            until = min(deadline, next_hint) if manual and not approved else deadline
            current = await self._next_version(name, current, until - now)

    async def _approve(self, current: RawObject) -> RawObject:
        name = current["metadata"]["name"]
        status = dict(current.get("status") or {})
        status["conditions"] = [
            *(status.get("conditions") or []),
            {
                "type": "Approved",
                "status": "True",
                "reason": APPROVAL_REASON,
                "message": f"vk-provider approved the kubelet serving certificate of node {self._node_name}",
                "lastUpdateTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        ]
        # PUT with the resourceVersion we read: a concurrent change (an operator's deny) wins with a 409.
        approved = await self._api.request(
            "PUT", f"{CSR_PATH}/{name}/approval", body={**current, "status": status}
        )
        logger.info("approved CSR %s ourselves", name)
        return approved

    async def _next_version(self, name: str, current: RawObject, seconds: float) -> RawObject:
        """The CSR after its next change, or as it is after `seconds` without one."""
        query: dict[str, str | int | bool] = {"fieldSelector": f"metadata.name={name}"}
        resource_version = current.get("metadata", {}).get("resourceVersion")
        if resource_version:
            query["resourceVersion"] = resource_version
        events = self._api.watch(CSR_PATH, query=query, timeout_seconds=max(1, math.ceil(seconds)))
        try:
            async for event in events:
                if event.type == "DELETED":
                    raise CsrRejectedError(f"CSR {name} was deleted")
                if event.type in ("ADDED", "MODIFIED"):
                    return event.object
        except KubeApiError as error:
            if not error.gone:  # 410: our resourceVersion is too old; reading afresh settles it
                raise
        finally:
            # The stream is an async generator: closing it here releases its connection now, not
            # whenever the garbage collector gets to it.
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        return await self._api.get(f"{CSR_PATH}/{name}")


def _has_condition(csr: RawObject, kind: str) -> bool:
    conditions = (csr.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status", "True") == "True" for c in conditions)


def _issued_certificate(name: str, csr: RawObject) -> bytes | None:
    """The PEM the signer issued, None while there is none; raises if the CSR will never get one."""
    for condition in (csr.get("status") or {}).get("conditions") or []:
        kind = condition.get("type")
        if kind in ("Denied", "Failed") and condition.get("status", "True") == "True":
            raise CsrRejectedError(
                f"CSR {name} {kind.lower()}: {condition.get('reason', '')}: {condition.get('message', '')}"
            )
    encoded = (csr.get("status") or {}).get("certificate")
    return base64.b64decode(encoded) if encoded else None
