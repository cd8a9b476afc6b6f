"""Notice TLS clients refusing the certificate we serve, from the alerts they send in the handshake.

Why: an apiserver started with `--kubelet-certificate-authority` verifies the node's serving
certificate; one it cannot verify (our self-signed fallback) makes `kubectl logs`, `exec` and `top`
fail for the user, while the node itself sees nothing but handshakes that end early. The client says
why in a TLS alert (Go's crypto/tls sends `bad_certificate` or `unknown_ca`), but not who it is: the
node's own request through the apiserver (`probe`) tells the apiserver from other clients.

How: asyncio's TLS transport drives an `ssl.SSLObject` that it makes with the server context's
`wrap_bio`; `SSLContext.sslobject_class` (public since Python 3.7) lets us hand it a subclass whose
`do_handshake` reports a failed handshake before re-raising it. asyncio itself only logs those in
debug mode.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

REFUSAL_ALERTS = frozenset(
    {
        "TLSV1_ALERT_UNKNOWN_CA",
        "SSLV3_ALERT_BAD_CERTIFICATE",
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
        "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
    }
)
"""The alerts by which a client says it does not accept our certificate (OpenSSL's names)."""

RefusalListener = Callable[[str], None]


def watch_refusals(context: ssl.SSLContext, on_refusal: RefusalListener) -> None:
    """Call `on_refusal(alert)` whenever a client ends a handshake by refusing our certificate.

    The listener runs in the event loop, inside the handshake step: it must be quick and not raise.
    """

    class _WatchedSSLObject(ssl.SSLObject):
        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                raise  # the handshake goes on once more bytes arrive
            except ssl.SSLError as error:
                if error.reason in REFUSAL_ALERTS:
                    on_refusal(str(error.reason))
                raise

    context.sslobject_class = _WatchedSSLObject
