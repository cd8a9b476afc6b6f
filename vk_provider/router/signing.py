"""SigV4 signing of the requests the router sends to signed endpoints (SageMaker invocation URLs).

Credentials come from botocore's standard chain, found as the AWS CLI finds them: the environment
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), web identity (IRSA:
`AWS_ROLE_ARN` and `AWS_WEB_IDENTITY_TOKEN_FILE`), the shared credentials and config files
(`AWS_SHARED_CREDENTIALS_FILE`, `AWS_PROFILE`), container and instance metadata. `vk-provider router
--aws-profile P --aws-credentials-file F` names a profile and a credentials file (e.g. a mounted
Secret's) instead. The chain is resolved once, off the event loop, at the first signed request;
credentials that expire (IRSA, assumed roles, instance roles) are refreshed by botocore before they
do. Keys read from a file are read once: a rotated file takes effect at the router's next start.
They need `sagemaker:InvokeEndpoint` on the endpoints, which the provider's credentials have: mount
the provider's credentials Secret into the router too and name it with `--aws-credentials-file`.

Without credentials a signed request is answered 502 with the reason; the router logs the failure as
an error once (not once per request), logs again when signing works, and looks for credentials again
at most every `retry_seconds`, so a Secret mounted late is picked up without a restart.

What is signed: the method, the target URL, the body's SHA-256, `host`, `x-amz-date` (and
`x-amz-security-token`), plus the headers the invocation's meaning depends on: `Content-Type`,
`Accept` and the client's `X-Amz-*`/`X-Amzn-*` (SageMaker's custom attributes, target model,
...). Other headers (`X-Forwarded-*`, `User-Agent`, ...) go along unsigned, so nothing on the way can
break the signature by adjusting them. The client's `Host`, `Authorization`, `Content-Length` and
own SigV4 headers are dropped: the signature sets its own, and aiohttp counts the body.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

import botocore.session
from botocore.credentials import Credentials
from botocore.exceptions import BotoCoreError, ClientError
from multidict import CIMultiDict

from vk_provider.kit.signing import sign_request
from vk_provider.kit.traffic_auth import TrafficAuth

logger = logging.getLogger(__name__)

CredentialsResolver = Callable[[], Credentials | None]
"""Finds credentials (may block: metadata services, STS); None when there are none."""

NOT_SENT = frozenset(
    {"host", "authorization", "content-length", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"}
)
"""Client headers a signed request must not carry. (`X-Amz-Content-SHA256` would even replace the
body's hash in botocore's canonical request.)"""

SIGNED_NAMES = frozenset({"content-type", "accept"})
SIGNED_PREFIXES = ("x-amz-", "x-amzn-")

FAILURES = (BotoCoreError, ClientError, OSError, ValueError)
"""What finding or refreshing credentials raises: a missing profile, STS refusing, an unreadable file."""


class SigningUnavailableError(Exception):
    """The router cannot sign requests now (no credentials, or they cannot be refreshed)."""


def standard_chain(
    *, profile: str | None = None, credentials_file: Path | None = None
) -> CredentialsResolver:
    """botocore's credential chain, with an optional profile and shared credentials file."""

    def resolve() -> Credentials | None:
        session = botocore.session.Session(profile=profile)
        if credentials_file is not None:
            session.set_config_variable("credentials_file", str(credentials_file))
        credentials: Credentials | None = session.get_credentials()
        return credentials

    return resolve


def split_headers(forwarded: CIMultiDict[str]) -> tuple[dict[str, str], CIMultiDict[str]]:
    """(headers to sign, headers to send unsigned) of a request's forwarded headers.

    A header sent several times is signed as the one comma-joined value it is then sent as.
    """
    signed: dict[str, str] = {}
    unsigned: CIMultiDict[str] = CIMultiDict()
    seen: set[str] = set()
    for name in forwarded:
        lowered = name.lower()
        if lowered in NOT_SENT or lowered in seen:
            continue  # `getall` below took every spelling of the name at once
        seen.add(lowered)
        values = forwarded.getall(name)
        if lowered in SIGNED_NAMES or lowered.startswith(SIGNED_PREFIXES):
            signed[name] = ",".join(values)
        else:
            unsigned.extend((name, value) for value in values)
    return signed, unsigned


class RequestSigning:
    """Signs requests with the router's AWS credentials, found once and reported once when missing."""

    def __init__(
        self,
        resolve: CredentialsResolver | None = None,
        *,
        retry_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._resolve = resolve if resolve is not None else standard_chain()
        self._retry_seconds = retry_seconds
        self._clock = clock
        self._credentials: Credentials | None = None
        self._lock = asyncio.Lock()
        self._failure: str | None = None
        """Why signing fails, while it does (logged once)."""
        self._retry_at = 0.0

    async def signed_headers(
        self, method: str, url: str, forwarded: CIMultiDict[str], body: bytes, auth: TrafficAuth
    ) -> CIMultiDict[str]:
        """The headers to send `body` to `url` with: `forwarded`, adjusted and signed.

        SigningUnavailableError when it cannot be signed.
        """
        credentials = await self._credentials_now()
        to_sign, headers = split_headers(forwarded)
        try:
            # Off the loop: frozen credentials may need a refresh first, a call to STS.
            signed = await asyncio.to_thread(
                sign_request,
                method,
                url,
                to_sign,
                body,
                credentials=credentials,
                region=auth.region,
                service=auth.service,
            )
        except FAILURES as error:
            raise self._failed(f"cannot refresh the router's AWS credentials: {error}") from None
        self._succeeded()
        headers.extend(signed)
        return headers

    async def _credentials_now(self) -> Credentials:
        if self._credentials is not None:
            return self._credentials
        async with self._lock:
            if self._credentials is not None:
                return self._credentials
            if self._failure is not None and self._clock() < self._retry_at:
                raise SigningUnavailableError(self._failure)
            try:
                credentials = await asyncio.to_thread(self._resolve)
            except FAILURES as error:
                reason = f"cannot load the router's AWS credentials: {error}"
            else:
                if credentials is not None:
                    self._credentials = credentials
                    return credentials
                reason = (
                    "the router has no AWS credentials (environment, web identity, shared credentials "
                    "file, container or instance metadata; or --aws-credentials-file)"
                )
            self._retry_at = self._clock() + self._retry_seconds
            raise self._failed(reason)

    def _failed(self, reason: str) -> SigningUnavailableError:
        if self._failure is None:
            logger.error("cannot sign requests to SigV4 endpoints: %s", reason)
        self._failure = reason
        return SigningUnavailableError(reason)

    def _succeeded(self) -> None:
        if self._failure is not None:
            logger.info("signing requests to SigV4 endpoints works again")
            self._failure = None
