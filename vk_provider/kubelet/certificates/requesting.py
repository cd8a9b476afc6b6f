"""The serving certificate from the cluster's kubelet-serving signer through a CSR, renewed before expiry.

Why the boundary: this is the one part that talks to the API server and runs a long-lived loop of
requests, approvals, watches, retries and renewals. What the request and the certificate must hold is
in `drafting` (pure), the server context and the PEM store in `serving`; this module puts them in
order and keeps the certificate current.

The flow of `via_csr`:

1. At start, a certificate an earlier run persisted in `state_dir` is reused when it still names this
   node and its addresses and is not past its renewal point, so a restart does not mint a CSR. One
   that is past that point but still valid is served until its replacement is issued.
2. Otherwise: a fresh ECDSA P-256 key and a CSR (CN `system:node:<node>`, O `system:nodes`, the node's
   addresses as IP SANs, the node name as DNS SAN when it is a DNS name), created as a
   `certificates.k8s.io/v1` object. With `self_approve` we approve it through the `/approval`
   subresource (which needs the RBAC in the package's docstring); otherwise we log the
   `kubectl certificate approve` command an operator has to run, again every few minutes while it
   stays pending.
3. We watch the CSR until the signer has put the certificate in `status.certificate`. Denied, Failed,
   deleted, a timeout or any API error: log it, back off (capped and jittered) and start over with a
   new key and CSR.
4. Certificate and key are persisted (one 0600 PEM file, replaced atomically) and loaded into the
   server's SSLContext.
5. When 70-80 % of the validity has passed (the kubelet's rule; the jitter keeps a fleet of nodes from
   renewing at the same instant) steps 2-4 run again. `load_cert_chain` on the same SSLContext changes
   the identity for new handshakes only: established connections keep what they negotiated, and the
   old certificate stays in service until the new one is there.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import ssl
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.kubelet.certificates.drafting import (
    MIN_EXPIRATION_SECONDS,
    RENEW_FRACTION,
    RENEW_JITTER,
    SIGNER_NAME,
    GeneralNames,
    build_csr,
    csr_object,
    describe_certificate,
    describe_names,
    key_matches,
    key_usages,
    new_private_key,
    renewal_deadline,
    serving_names,
    stored_certificate_problem,
)
from vk_provider.kubelet.certificates.serving import (
    Clock,
    ServingCertificate,
    bundle_pem,
    parse_bundle,
    utc_now,
    write_private_file,
)
from vk_provider.kubelet.certificates.state import (
    DENIED,
    ISSUED,
    PENDING,
    REQUEST_FAILED,
    CertificateState,
)

# The package's logger, as in `serving`.
logger = logging.getLogger(__package__)

CSR_PATH = resource_path("certificates.k8s.io/v1", "certificatesigningrequests")
APPROVAL_REASON = "VkProviderSelfApproved"
STORE_FILE_NAME = "kubelet-server-current.pem"
ISSUE_TIMEOUT_SECONDS = 15 * 60.0
"""How long one CSR may stay unsigned before we start over (the kubelet's certificate manager waits as
long); a pending CSR is garbage-collected by the controller-manager after a day anyway."""
APPROVAL_REMINDER_SECONDS = 120.0
RECHECK_SECONDS = 60.0
"""The longest nap between looks at the wall clock: asyncio timers run on the monotonic clock, which
stands still while a machine is suspended, so a single long sleep could oversleep the renewal point."""
RETRY_INITIAL_SECONDS = 2.0
RETRY_MAX_SECONDS = 300.0


class CsrRejectedError(Exception):
    """The CSR was denied, failed, deleted or answered with a certificate for another key."""


def backoff_delay(failures: int, *, initial: float, cap: float) -> float:
    """Exponential, capped, and jittered down to half so retries of many nodes spread out."""
    return jittered_backoff_seconds(failures + 1, initial_seconds=initial, max_seconds=cap)


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
    ssl_context: ssl.SSLContext | None = None,
) -> CsrCertificate:
    """A certificate from the cluster's kubelet-serving signer, renewed before it expires.

    A still-good certificate persisted in `state_dir` by an earlier run is loaded at once (so `ready`
    may already be set on return); otherwise `run` requests one. `expiration_seconds` asks the signer
    for a shorter validity than its default (at least 600). `clock` is the wall clock the renewal
    decisions read (tests move it forward). `ssl_context`: load into this context (see
    `ServingCertificate`) instead of one of its own.
    """
    if expiration_seconds is not None and expiration_seconds < MIN_EXPIRATION_SECONDS:
        raise ValueError(f"expiration_seconds must be at least {MIN_EXPIRATION_SECONDS}")
    if renew_fraction < 0.0 or renew_jitter < 0.0 or renew_fraction + renew_jitter > 1.0:
        raise ValueError("renew_fraction and renew_jitter must be fractions of the validity")
    return CsrCertificate(
        api,
        ssl_context=ssl_context,
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


class CsrCertificate(ServingCertificate):
    """The CSR flow of `via_csr`. `pending_csr` names the CSR it waits for (None: none)."""

    def __init__(
        self,
        api: KubeApi,
        *,
        ssl_context: ssl.SSLContext | None,
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
        super().__init__(client_ca_file=client_ca_file, clock=clock, ssl_context=ssl_context)
        self.pending_csr: str | None = None
        self._requesting_since: datetime | None = None
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

    def requesting_since(self) -> datetime | None:
        return self._requesting_since

    def _deadline(self, certificate: x509.Certificate) -> datetime:
        return renewal_deadline(certificate, fraction=self._renew_fraction, jitter=self._renew_jitter)

    def _reuse_stored(self) -> None:
        try:
            chain, key = parse_bundle(self._store.read_bytes())
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
        self._report(
            CertificateState(ISSUED, f"serving the certificate {origin} ({describe_certificate(chain[0])})")
        )
        logger.info(
            "serving certificate for node %s %s: %s; renewal from %s",
            self._node_name,
            origin,
            describe_certificate(chain[0]),
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
        self._requesting_since = self._clock()
        while True:
            try:
                name, chain, key = await self._request_certificate()
                self._use(chain, key, self._deadline(chain[0]), origin=f"issued through CSR {name}")
                self._requesting_since = None
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
                self._report_failure(error, delay)
                self.pending_csr = None
                await asyncio.sleep(delay)
                continue
            try:
                write_private_file(self._store, bundle_pem(chain, key))
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
        self.pending_csr = name
        self._report_waiting(name, approved=False)
        logger.info(
            "created CSR %s for the serving certificate of node %s (%s)",
            name,
            self._node_name,
            describe_names(self._names),
        )
        pem = await self._await_certificate(name, created)
        try:
            chain = x509.load_pem_x509_certificates(pem)
        except ValueError as error:
            raise CsrRejectedError(f"CSR {name} holds no readable certificate: {error}") from None
        if not key_matches(chain[0], key):
            raise CsrRejectedError(f"CSR {name} was answered with a certificate for another key")
        self.pending_csr = None
        return name, chain, key

    def _report_waiting(self, name: str, *, approved: bool) -> None:
        """Say which CSR the node waits for and what it needs (a certificate in service says it all)."""
        if self.certificate is not None:
            return
        if approved:
            need = "it is approved; the kubelet-serving signer has not issued it yet"
        elif self._self_approve:
            need = "approving it ourselves"
        else:
            need = f'waiting for its approval: run "kubectl certificate approve {name}"'
        self._report(CertificateState(PENDING, f"CSR {name} for the serving certificate: {need}"))

    def _report_failure(self, error: Exception, delay: float) -> None:
        if self.certificate is not None:
            return  # still serving the earlier certificate; the log tells of the failed renewal
        reason = DENIED if isinstance(error, CsrRejectedError) else REQUEST_FAILED
        self._report(
            CertificateState(
                reason,
                f"no serving certificate yet: {str(error) or type(error).__name__}; "
                f"a new CSR in {delay:.0f}s",
            )
        )

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
            if approved:
                self._report_waiting(name, approved=True)
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
