"""The virtual node's kubelet serving certificate: the TLS identity its kubelet API presents.

Why: the apiserver reaches a node's kubelet API (logs, exec, metrics) over HTTPS and, in a hardened
cluster (`--kubelet-certificate-authority`), verifies the node's certificate against the cluster CA for
the address it dials. A self-signed certificate will not do. A real kubelet asks the cluster for one
with a CertificateSigningRequest for the `kubernetes.io/kubelet-serving` signer, which the
kube-controller-manager signs with the cluster CA once the request is approved; we do the same
(`via_csr`, which persists the certificate in `state_dir` and renews it before it expires).

`from_files` serves an operator's own pair instead and reloads it when either file changes.
`SelfSignedCertificate` serves one the node signs itself; `AutoCertificate` asks with a CSR and
serves its own while none is issued (EKS issues none for a virtual node), switching once one is.
Every source reports a `CertificateState`, which the node daemon shows as its ServingCertificate
condition, and notices clients refusing a self-signed certificate (`handshakes`).

Until a certificate is loaded `ready` stays unset; the caller (the kubelet API server) waits for it.

The RBAC `ServingCertificate.check_acceptance` needs: get on `nodes/proxy`, for the node's own name.
The RBAC `via_csr` needs: create, get, list and watch on `certificatesigningrequests`; for
self-approval also update on `certificatesigningrequests/approval` and approve on `signers` named
`kubernetes.io/kubelet-serving` (all in the `certificates.k8s.io` group).

The modules, each importing only those above it:

- `drafting`: what the certificate and its CSR must hold, and the checks a certificate must pass
  (pure: no I/O, no API server, no clock);
- `serving`: the server's TLS context, loading an identity into it, the PEM files, the abstract
  `ServingCertificate` and `from_files`;
- `requesting`: the CSR flow against the API server (`via_csr`): request, approval, renewal;
- `selfsigned`: the node's own certificate; `fallback`: `auto`, the CSR flow with it as a fallback.

`state` (the reported state), `handshakes` (noticing refusals) and `probe` (asking the apiserver
whether it is one of the refusing clients) stand apart, imported by `serving`.

This module re-exports what the rest of vk-provider uses; anything else is imported from its module.
"""

from vk_provider.kubelet.certificates.drafting import (
    SIGNER_NAME,
    build_csr,
    csr_object,
    is_dns_name,
    key_usages,
    names_of,
    new_private_key,
    node_subject,
    renewal_deadline,
    serving_names,
    stored_certificate_problem,
)
from vk_provider.kubelet.certificates.fallback import DEFAULT_WAIT_SECONDS, AutoCertificate
from vk_provider.kubelet.certificates.probe import probe_through_apiserver
from vk_provider.kubelet.certificates.requesting import (
    APPROVAL_REASON,
    CSR_PATH,
    STORE_FILE_NAME,
    CsrCertificate,
    backoff_delay,
    via_csr,
)
from vk_provider.kubelet.certificates.selfsigned import SelfSignedCertificate
from vk_provider.kubelet.certificates.serving import (
    FileCertificate,
    ServingCertificate,
    from_files,
    server_ssl_context,
)
from vk_provider.kubelet.certificates.state import CONDITION_TYPE, CertificateState

__all__ = [
    "APPROVAL_REASON",
    "CONDITION_TYPE",
    "CSR_PATH",
    "DEFAULT_WAIT_SECONDS",
    "SIGNER_NAME",
    "STORE_FILE_NAME",
    "AutoCertificate",
    "CertificateState",
    "CsrCertificate",
    "FileCertificate",
    "SelfSignedCertificate",
    "ServingCertificate",
    "backoff_delay",
    "build_csr",
    "csr_object",
    "from_files",
    "is_dns_name",
    "key_usages",
    "names_of",
    "new_private_key",
    "node_subject",
    "probe_through_apiserver",
    "renewal_deadline",
    "server_ssl_context",
    "serving_names",
    "stored_certificate_problem",
    "via_csr",
]
