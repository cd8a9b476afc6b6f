"""What the node says about its serving certificate: a reason, a message, and whether it works.

Why a module of its own: every source of the certificate (CSR, self-signed, files, and `auto`, which
combines the first two) reports the same small value, and the node daemon turns it into the
`ServingCertificate` Node condition, Events and a metric without knowing which source it came from.
Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

CONDITION_TYPE = "ServingCertificate"

# The condition's reasons. `working` below says which of them are True.
ISSUED = "Issued"
"""Serving a certificate the cluster's kubelet-serving signer issued through a CSR."""
FILE_LOADED = "FileLoaded"
"""Serving the operator's certificate from files."""
SELF_SIGNED = "SelfSigned"
"""Serving a certificate of our own: fine where the apiserver does not verify kubelet certificates."""
REQUESTING = "Requesting"
"""No certificate yet: the CSR is being created (or created again after a failure)."""
PENDING = "Pending"
"""No certificate yet: a CSR waits for approval or for the signer."""
DENIED = "Denied"
"""No certificate yet: the last CSR was denied or failed; a new one follows after a backoff."""
REQUEST_FAILED = "RequestFailed"
"""No certificate yet: creating or watching the CSR failed (an API error, missing RBAC) or it was not
issued in time; a new one follows after a backoff."""
FILE_INVALID = "FileInvalid"
"""The operator's files are missing, unreadable or do not match."""
REJECTED_BY_CLIENTS = "RejectedByClients"
"""Serving a self-signed certificate that the apiserver refuses (it verifies kubelet certificates), or
that some client refuses when the node cannot tell whether the apiserver is one of them."""
REJECTED_BY_OTHER_CLIENTS = "RejectedByOtherClients"
"""Serving a self-signed certificate that the apiserver accepts (logs, exec and port-forward work) but
another TLS client refuses: metrics-server (`kubectl top`) or a Prometheus scraping the kubelet port."""

WORKING_REASONS = frozenset({ISSUED, FILE_LOADED, SELF_SIGNED, REJECTED_BY_OTHER_CLIENTS})
WARNING_REASONS = frozenset(
    {SELF_SIGNED, DENIED, REQUEST_FAILED, FILE_INVALID, REJECTED_BY_CLIENTS, REJECTED_BY_OTHER_CLIENTS}
)
REFUSED_REASONS = frozenset({REJECTED_BY_CLIENTS, REJECTED_BY_OTHER_CLIENTS})
"""A self-signed certificate some client refused: it stays so until another certificate is served."""
"""States an operator should hear about through a Warning Event: SelfSigned too, as `kubectl logs`
fails in every cluster that verifies kubelet certificates."""


@dataclasses.dataclass(frozen=True, slots=True)
class CertificateState:
    reason: str
    message: str

    @property
    def working(self) -> bool:
        """The condition's status: the kubelet API serves a certificate no client has refused yet."""
        return self.reason in WORKING_REASONS

    @property
    def warning(self) -> bool:
        return self.reason in WARNING_REASONS


STARTING = CertificateState(REQUESTING, "the serving certificate is being obtained")

StateListener = Callable[[CertificateState], None]
