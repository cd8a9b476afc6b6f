"""`auto`: a certificate from the cluster's signer when it comes, the node's own until then.

Why: the same node must work in a cluster that issues kubelet-serving certificates (kubeadm, most
self-managed clusters), in one that never issues them for a virtual node's addresses (EKS), and in one
where nobody approves the CSR. So the node asks with a CSR, as a kubelet does; when no certificate is
issued within `wait_seconds`, or the CSR is denied, it serves a self-signed one so the kubelet API works
wherever the apiserver does not verify kubelet certificates, and says so (state `SelfSigned`, a Warning
Event through the daemon). The CSR flow keeps asking in the background with its own backoff; once it
is issued, it is loaded into the same server context, so new handshakes get it without a restart.

Both sources load into one `ssl.SSLContext` owned here: the handshakes are watched here too, so a
client refusing the self-signed certificate shows as `RejectedByClients`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from vk_provider.kubelet.certificates.selfsigned import SelfSignedCertificate
from vk_provider.kubelet.certificates.serving import Clock, ServingCertificate, utc_now
from vk_provider.kubelet.certificates.state import (
    DENIED,
    ISSUED,
    REFUSED_REASONS,
    CertificateState,
)

logger = logging.getLogger(__package__)

DEFAULT_WAIT_SECONDS = 60.0
RECHECK_SECONDS = 3600.0


class AutoCertificate(ServingCertificate):
    """See the module. `csr` builds the CSR flow on the context it is given (`via_csr(ssl_context=)`);
    it must report `Issued` when it installs a certificate and `Denied` when its CSR is refused."""

    def __init__(
        self,
        csr: Callable[[ssl.SSLContext], ServingCertificate],
        *,
        node_name: str,
        addresses: Sequence[str],
        client_ca_file: Path,
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
        clock: Clock = utc_now,
    ) -> None:
        super().__init__(client_ca_file=client_ca_file, clock=clock)
        self._wait = wait_seconds
        self._node_name = node_name
        self._own = SelfSignedCertificate(
            node_name=node_name,
            addresses=addresses,
            client_ca_file=client_ca_file,
            because="",
            clock=clock,
            ssl_context=self.ssl_context,
            mint_now=False,
        )
        self._csr = csr(self.ssl_context)
        self._denied = asyncio.Event()
        self.fell_back = False
        """True once the node served its own certificate because none was issued."""
        self._own.subscribe(self._own_changed)
        self._csr.subscribe(self._csr_changed)
        self._csr_changed(self._csr.state)  # a stored certificate is issued at construction

    def requesting_since(self) -> datetime | None:
        return self._csr.requesting_since()

    def _csr_changed(self, state: CertificateState) -> None:
        if state.reason == ISSUED:
            self.certificate = self._csr.certificate
            self.renew_at = self._csr.renew_at
            self.ready.set()
            if self.fell_back and self.state.reason != ISSUED:
                logger.info("node %s: the issued certificate replaces the self-signed one", self._node_name)
            self._report(state)
            return
        if state.reason == DENIED:
            self._denied.set()
        if self.fell_back:
            self._own.explain(self._why(state))
        elif not self._csr.ready.is_set():
            self._report(state)

    def _own_changed(self, state: CertificateState) -> None:
        if self._csr.ready.is_set():
            return  # the issued certificate is in service; ours is history
        self.certificate = self._own.certificate
        self.renew_at = self._own.renew_at
        self.ready.set()
        # A refusal stands until the issued certificate comes: a new CSR does not make the self-signed
        # certificate any more acceptable.
        if self.state.reason not in REFUSED_REASONS:
            self._report(state)

    def _why(self, csr_state: CertificateState) -> str:
        if csr_state.reason == DENIED:
            cause = csr_state.message
        else:
            cause = f"no certificate was issued within {self._wait:g}s; {csr_state.message}"
        return (
            f"serving_certificate auto: {cause}. The node keeps asking and switches to the issued "
            "certificate without a restart"
        )

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._csr.run(), name="serving certificate CSR")
            await self._wait_for_issue()
            if not self._csr.ready.is_set():
                self._fall_back()
                await self._serve_own_until_issued()
            await asyncio.Event().wait()  # the CSR flow goes on renewing

    async def _wait_for_issue(self) -> None:
        """Until the CSR is issued or denied, or `wait_seconds` pass."""
        issued = asyncio.create_task(self._csr.ready.wait())
        denied = asyncio.create_task(self._denied.wait())
        try:
            await asyncio.wait({issued, denied}, timeout=self._wait, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (issued, denied):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _fall_back(self) -> None:
        self.fell_back = True
        logger.warning(
            "node %s: %s; serving a self-signed certificate meanwhile",
            self._node_name,
            self._why(self._csr.state),
        )
        self._own.explain(self._why(self._csr.state))
        self._own.mint()

    async def _serve_own_until_issued(self) -> None:
        """Renew our own certificate before it expires, until the CSR's is in service."""
        while not self._csr.ready.is_set():
            assert self._own.renew_at is not None  # noqa: S101 - minted by _fall_back
            remaining = (self._own.renew_at - self._clock()).total_seconds()
            if remaining <= 0:
                self._own.mint()  # checked just above: the issued certificate is not there yet
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, RECHECK_SECONDS)):
                    await self._csr.ready.wait()
