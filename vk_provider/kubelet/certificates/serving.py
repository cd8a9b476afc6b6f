"""The kubelet API's TLS side: the server context, the identity put into it, and the PEM files it comes from.

`ServingCertificate` owns the one server context and is what the kubelet API server consumes;
`from_files` is its simplest source, an operator's certificate and key, reloaded when either file
changes. Beside them: loading a certificate and key into the context, and the single-file PEM bundle
(read, and written atomically with mode 0600) in which the CSR flow keeps what the signer issued.

Why the boundary: this module is where files and `ssl` are touched. What a certificate must hold is
decided in `drafting` (pure); the CSR flow against the API server is `requesting`, which builds on
`ServingCertificate` and the bundle here. The abstract class lives here, beside the context it owns,
so both sources import it from one place and nothing here imports the CSR flow.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kubelet.certificates.drafting import describe_certificate, key_matches
from vk_provider.kubelet.certificates.handshakes import watch_refusals
from vk_provider.kubelet.certificates.probe import ApiserverProbe, ProbeResult, Verdict
from vk_provider.kubelet.certificates.state import (
    FILE_INVALID,
    FILE_LOADED,
    REFUSED_REASONS,
    REJECTED_BY_CLIENTS,
    REJECTED_BY_OTHER_CLIENTS,
    SELF_SIGNED,
    STARTING,
    CertificateState,
    StateListener,
)

# The package's logger, under the name of the module it used to be: log configuration and filters
# written for `vk_provider.kubelet.certificates` keep matching.
logger = logging.getLogger(__package__)

FILE_POLL_SECONDS = 10.0
CHECK_ATTEMPTS = 8
"""Probes through the apiserver (with backoff, about 6 minutes) before a certificate is left unsettled."""
UNSETTLED_RECHECK_SECONDS = 600.0

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


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


def bundle_pem(chain: Sequence[x509.Certificate], key: PrivateKeyTypes) -> bytes:
    """Certificates and key as one PEM file, the format `parse_bundle` reads and `load_identity` loads."""
    certificates = b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in chain)
    return certificates + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def parse_bundle(data: bytes) -> tuple[list[x509.Certificate], PrivateKeyTypes]:
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
    data = bundle_pem(chain, key)
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


def write_private_file(path: Path, data: bytes) -> None:
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


class ServingCertificate(abc.ABC):
    """The source of the kubelet API's TLS identity.

    `ssl_context` is the one server context for the lifetime of the process; a new certificate is
    loaded into it in place. `ready` is set once it holds a certificate; `run` keeps it current.
    `state` says what is served and why (the node's ServingCertificate condition); `subscribe` to hear
    of every change. Constructing one reads the client CA bundle and raises (OSError, ssl.SSLError) if
    it cannot.

    With `ssl_context`, the source loads its certificates into a context someone else owns (`auto`
    shares one between its CSR and its self-signed certificate), and that owner watches handshakes.
    """

    def __init__(
        self, *, client_ca_file: Path, clock: Clock = utc_now, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        if ssl_context is None:
            ssl_context = server_ssl_context(client_ca_file)
            watch_refusals(ssl_context, self._refused)
        self.ssl_context = ssl_context
        self.ready = asyncio.Event()
        self.certificate: x509.Certificate | None = None
        """The certificate new connections get (None until there is one)."""
        self.renew_at: datetime | None = None
        """When the current certificate will be replaced (None: it is not renewed by us)."""
        self.state: CertificateState = STARTING
        self.refused_handshakes = 0
        """Handshakes that clients ended by refusing our certificate (any certificate, any client)."""
        self._listeners: list[StateListener] = []
        self._clock = clock
        # What is known of the certificate in service (by serial): the alert of the last client that
        # refused it, and the apiserver's verdict on it (`check_acceptance`).
        self._refusal: tuple[int, str] | None = None
        self._verdict: tuple[int, ProbeResult] | None = None
        self._checking = False
        self._check_wanted = asyncio.Event()
        self._unsettled_until = 0.0

    @abc.abstractmethod
    async def run(self) -> None:
        """Keep the certificate current until cancelled; never raises otherwise."""

    def requesting_since(self) -> datetime | None:
        """Since when this source has asked the cluster's signer for a certificate it has not got yet
        (None: it waits for none). Only the CSR flow asks; it keeps the moment across its retries."""
        return None

    def subscribe(self, listener: StateListener) -> None:
        """Call `listener(state)` on every change of `state` from now on (in the event loop)."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: StateListener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _report(self, state: CertificateState) -> None:
        if state == self.state:
            return
        self.state = state
        for listener in list(self._listeners):
            listener(state)
        if state.reason == SELF_SIGNED:
            self._want_check()

    def _install(self, chain: Sequence[x509.Certificate], key: PrivateKeyTypes) -> None:
        load_identity(self.ssl_context, chain, key)
        self.certificate = chain[0]
        self.ready.set()

    def _refused(self, alert: str) -> None:
        """A client refused our certificate. Only a self-signed one makes that news: a curl without
        the cluster CA refuses an issued one too, and says nothing about the apiserver."""
        self.refused_handshakes += 1
        if self.state.reason != SELF_SIGNED and self.state.reason not in REFUSED_REASONS:
            logger.debug("a TLS client refused the serving certificate (%s)", alert)
            return
        self._refusal = (self._serial(), alert)
        self._judge()

    def _serial(self) -> int:
        return self.certificate.serial_number if self.certificate is not None else 0

    def _known(self) -> tuple[str | None, ProbeResult | None]:
        """The refusal alert and the apiserver's verdict, both of the certificate in service."""
        serial = self._serial()
        alert = self._refusal[1] if self._refusal is not None and self._refusal[0] == serial else None
        verdict = self._verdict[1] if self._verdict is not None and self._verdict[0] == serial else None
        return alert, verdict

    def _judge(self) -> None:
        """The state a self-signed certificate is in, from who refused it and what the apiserver says."""
        alert, result = self._known()
        if result is not None and result.verdict is Verdict.REFUSED:
            self._report(CertificateState(REJECTED_BY_CLIENTS, _apiserver_refuses(result.detail)))
        elif alert is None:
            return
        elif result is not None and result.verdict is Verdict.ACCEPTED:
            self._report(CertificateState(REJECTED_BY_OTHER_CLIENTS, _others_refuse(alert)))
        elif self._checking and result is None:
            self._want_check()  # the apiserver's answer decides; until then the state stands
        else:
            unsettled = result.detail if result is not None else None
            self._report(CertificateState(REJECTED_BY_CLIENTS, _someone_refuses(alert, unsettled)))
            self._want_check()

    def _want_check(self) -> None:
        """Have `check_acceptance` ask about the certificate in service, unless its answer is known (or
        was unsettled a moment ago)."""
        if not self._checking:
            return
        _, known = self._known()
        if known is None or (known.verdict is Verdict.UNKNOWN and time.monotonic() >= self._unsettled_until):
            self._check_wanted.set()

    async def check_acceptance(self, probe: ApiserverProbe) -> None:
        """Whenever a self-signed certificate is served or refused, ask `probe` (the apiserver, through
        its node proxy: `probe.probe_through_apiserver`) whether the apiserver accepts it, and say
        which clients refuse it: the apiserver (`RejectedByClients`, logs and exec fail) or only
        others (`RejectedByOtherClients`, `kubectl top` fails). Until cancelled; never raises."""
        self._checking = True
        if self.state.reason == SELF_SIGNED or self.state.reason in REFUSED_REASONS:
            self._want_check()
        while True:
            await self._check_wanted.wait()
            self._check_wanted.clear()
            await self._check_until_settled(probe)

    async def _check_until_settled(self, probe: ApiserverProbe) -> None:
        for attempt in range(1, CHECK_ATTEMPTS + 1):
            if self.state.reason != SELF_SIGNED and self.state.reason not in REFUSED_REASONS:
                return  # an issued or operator's certificate: the apiserver's trust is not in doubt
            _, known = self._known()
            if known is not None and known.verdict is not Verdict.UNKNOWN:
                return
            serial = self._serial()
            result = await probe()
            if self._serial() != serial:
                continue  # a new certificate came meanwhile: ask about that one
            self._verdict = (serial, result)
            logger.info("serving certificate %x, asked through the apiserver: %s", serial, result.detail)
            self._judge()
            if result.verdict is not Verdict.UNKNOWN:
                return
            await asyncio.sleep(jittered_backoff_seconds(attempt, initial_seconds=5.0, max_seconds=120.0))
        # Unsettled (no permission, no Node, another replica answers): ask again only much later.
        self._unsettled_until = time.monotonic() + UNSETTLED_RECHECK_SECONDS


def _apiserver_refuses(detail: str) -> str:
    return (
        f"the apiserver refuses the self-signed serving certificate ({detail}): it verifies kubelet "
        "certificates (--kubelet-certificate-authority), so kubectl logs, exec, port-forward and top fail "
        f"on this node. Fix: {_FIX}"
    )


def _others_refuse(alert: str) -> str:
    return (
        "the apiserver accepts the self-signed serving certificate (a request through its node proxy "
        "succeeded), so kubectl logs, exec and port-forward work; another TLS client refuses it (its "
        f"handshakes end with the alert {alert}): metrics-server (kubectl top) or a Prometheus scraping "
        "the kubelet port. Fix: let that client skip kubelet certificate verification (metrics-server "
        f"--kubelet-insecure-tls), or {_FIX}"
    )


def _someone_refuses(alert: str, unsettled: str | None) -> str:
    why = f": {unsettled}" if unsettled else ""
    return (
        f"TLS clients refuse the self-signed serving certificate (their handshakes end with the alert "
        f"{alert}), and the node could not ask the apiserver whether it is one of them{why}. If the "
        "apiserver verifies kubelet certificates (--kubelet-certificate-authority), kubectl logs, exec, "
        "port-forward and top fail on this node; otherwise only metrics-server (kubectl top) or a "
        f"Prometheus refuses it. Fix: {_FIX}"
    )


_FIX = (
    "serving_certificate csr (and have the node's kubelet-serving CSR approved) or file (a certificate "
    "from a CA the clients trust)"
)


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
                self._invalid(f"cannot read the serving certificate files: {error}")
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
            self._invalid(f"could not load {self._cert_file} and {self._key_file}: {error}")
            return False
        logger.info("serving certificate loaded from %s: %s", self._cert_file, describe_certificate(chain[0]))
        if chain[0].not_valid_after_utc <= self._clock():
            logger.warning("the serving certificate in %s has expired", self._cert_file)
            self._invalid(
                f"the certificate in {self._cert_file} expired at "
                f"{chain[0].not_valid_after_utc.isoformat()}; clients refuse it"
            )
        else:
            self._report(
                CertificateState(
                    FILE_LOADED,
                    f"serving the certificate from {self._cert_file} ({describe_certificate(chain[0])})",
                )
            )
        return True

    def _invalid(self, problem: str) -> None:
        if self.ready.is_set():
            problem += "; the certificate loaded before stays in use"
        else:
            problem += "; the kubelet API is not served until a good pair is there"
        self._report(CertificateState(FILE_INVALID, problem))

    async def run(self) -> None:
        while True:
            self.reload_if_changed()
            await asyncio.sleep(self._poll_seconds)
