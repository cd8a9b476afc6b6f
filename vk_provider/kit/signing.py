"""SigV4 signatures (AWS Signature Version 4), for the router's requests to SageMaker endpoints.

A SageMaker endpoint's traffic address (`https://runtime.sagemaker.<region>.amazonaws.com/endpoints/
<name>/invocations`) takes only requests signed with SigV4 for the service `sagemaker`, as the pod's
traffic-auth marker says (`vk_provider.kit.traffic_auth`, which names the credential scope). The router
signs each request it sends there (`vk_provider.router.signing`), and the `sagemaker` provider hands
out a signer with its own credentials:

    signer = await provider.request_signer()
    headers = signer.sign("POST", url, {"Content-Type": "application/json"}, body)

The signature covers the method, the URL (path and query), the body's SHA-256 and every header passed
in (plus `host` and `x-amz-date`), so pass exactly the headers that will be sent unchanged, and send
the returned ones with them: `Authorization`, `X-Amz-Date`, and `X-Amz-Security-Token` for session
credentials. It is valid for five minutes from its timestamp.

botocore's `SigV4Auth` does the signing; its own `add_auth` is not used because it logs the canonical
request (with the session token) and the signature at DEBUG, and because a test needs a fixed time.
Getting frozen credentials may refresh them (STS, IRSA: a network call), so call `sign` off the event
loop when the credentials are refreshable.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials

from vk_provider.kit.traffic_auth import SAGEMAKER_SERVICE

SERVICE = SAGEMAKER_SERVICE
"""The signing name of the SageMaker runtime (its endpoint host says `runtime.sagemaker`)."""


class _QuietSigV4Auth(SigV4Auth):
    """SigV4Auth with a given timestamp and no logging of what it signs."""

    def __init__(
        self, credentials: ReadOnlyCredentials, service: str, region: str, timestamp: datetime
    ) -> None:
        super().__init__(credentials, service, region)
        self._timestamp = timestamp

    def add_auth(self, request: AWSRequest) -> None:
        """What `SigV4Auth.add_auth` does for a request with a body, from its public parts."""
        stamp = self._timestamp.strftime(SIGV4_TIMESTAMP)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in request.headers:
                del request.headers[name]
        request.context["timestamp"] = stamp
        request.headers["X-Amz-Date"] = stamp
        if self.credentials.token:
            request.headers["X-Amz-Security-Token"] = self.credentials.token
        signature = self.signature(self.string_to_sign(request, self.canonical_request(request)), request)
        signed = self.signed_headers(self.headers_to_sign(request))
        scope = self.scope(request)
        request.headers["Authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders={signed}, Signature={signature}"
        )


def sign_request(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    credentials: Credentials | ReadOnlyCredentials,
    region: str,
    service: str = SERVICE,
    timestamp: datetime | None = None,
) -> dict[str, str]:
    """`headers` plus the SigV4 headers for this request; `timestamp` (UTC) defaults to now.

    Header names keep the case they were given; the signature does not depend on it.
    """
    frozen = credentials.get_frozen_credentials() if isinstance(credentials, Credentials) else credentials
    moment = (timestamp or datetime.now(UTC)).astimezone(UTC).replace(tzinfo=None)
    request = AWSRequest(method=method.upper(), url=url, headers=dict(headers), data=body)
    _QuietSigV4Auth(frozen, service, region, moment).add_auth(request)
    return {str(name): _text(value) for name, value in request.headers.items()}


def _text(value: str | bytes) -> str:
    return value.decode("ascii") if isinstance(value, bytes) else value


class RequestSigner:
    """Signs requests to one region's SageMaker endpoints with one (maybe refreshing) set of credentials."""

    def __init__(self, credentials: Credentials, region: str, *, service: str = SERVICE) -> None:
        self._credentials = credentials
        self.region = region
        self.service = service

    def __repr__(self) -> str:
        return f"RequestSigner(region={self.region!r}, service={self.service!r})"

    def sign(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        timestamp: datetime | None = None,
    ) -> dict[str, str]:
        return sign_request(
            method,
            url,
            headers,
            body,
            credentials=self._credentials,
            region=self.region,
            service=self.service,
            timestamp=timestamp,
        )
