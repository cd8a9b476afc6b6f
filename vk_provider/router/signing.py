"""SigV4 signing of the requests the router sends to signed endpoints (SageMaker invocation URLs).

Credentials come from botocore's standard chain, found as the AWS CLI finds them: the environment
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), web identity (IRSA:
`AWS_ROLE_ARN` and `AWS_WEB_IDENTITY_TOKEN_FILE`), the shared credentials and config files
(`AWS_SHARED_CREDENTIALS_FILE`, `AWS_PROFILE`), container and instance metadata. `vk-provider router
--aws-profile P --aws-credentials-file F` names a profile and a credentials file (e.g. a mounted
Secret's) instead. The chain is resolved off the event loop, at the first signed request;
credentials that expire (IRSA, assumed roles, instance roles) are refreshed by botocore before they
do. Keys read from the shared credentials file (`--aws-credentials-file`, else
`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`) are re-read when the file changes, as the
node's SageMaker provider re-reads its own, so a rotated Secret takes effect without a restart: at
most once a second (`check_seconds`) the router stats the file, following symlinks since a mounted
Secret is updated by swapping one, and the next signed request after a change in its modification
time, size or inode resolves the chain again. A changed file that yields no keys (half-written, or
missing the profile) keeps the keys read before, with a warning; its next change is tried again.
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
import dataclasses
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import botocore.session
from botocore.credentials import Credentials, SharedCredentialProvider
from botocore.exceptions import BotoCoreError, ClientError
from multidict import CIMultiDict

from vk_provider.kit.signing import sign_request
from vk_provider.kit.traffic_auth import TrafficAuth

logger = logging.getLogger(__name__)

FileStamp = tuple[int, int, int]
"""A file's (modification time in ns, size, inode): mtime alone misses a rewrite within the file
system's timestamp resolution; the inode catches a Secret volume's symlink swap."""


@dataclasses.dataclass(frozen=True)
class WatchedFile:
    """The file credentials were read from, and its stamp from just before they were read."""

    path: Path
    stamp: FileStamp | None


@dataclasses.dataclass(frozen=True)
class ResolvedCredentials:
    """Credentials found, and the file to watch when they were read from one."""

    credentials: Credentials
    source: WatchedFile | None = None


CredentialsResolver = Callable[[], ResolvedCredentials | None]
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

    def resolve() -> ResolvedCredentials | None:
        session = botocore.session.Session(profile=profile)
        if credentials_file is not None:
            session.set_config_variable("credentials_file", str(credentials_file))
        path = shared_credentials_path(session)
        # Stamped before botocore reads it: a change in between then shows at the next check instead
        # of being taken for the version read.
        stamp = file_stamp(path)
        credentials: Credentials | None = session.get_credentials()
        if credentials is None:
            return None
        if credentials.method != SharedCredentialProvider.METHOD:
            return ResolvedCredentials(credentials)
        return ResolvedCredentials(credentials, WatchedFile(path, stamp))

    return resolve


def shared_credentials_path(session: botocore.session.Session) -> Path:
    """The shared credentials file botocore reads for `session`, expanded as botocore expands it."""
    configured = str(session.get_config_variable("credentials_file"))
    return Path(os.path.expanduser(os.path.expandvars(configured)))


def file_stamp(path: Path) -> FileStamp | None:
    """The stamp of the file `path` leads to (following symlinks); None when it cannot be stat'ed."""
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size, status.st_ino)


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
    """Signs requests with the router's AWS credentials, found once and reported once when missing.

    Credentials read from a file are found again when the file changes (looked at every
    `check_seconds` at most, at a signed request).
    """

    def __init__(
        self,
        resolve: CredentialsResolver | None = None,
        *,
        retry_seconds: float = 30.0,
        check_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._resolve = resolve if resolve is not None else standard_chain()
        self._retry_seconds = retry_seconds
        self._check_seconds = check_seconds
        self._clock = clock
        self._found: ResolvedCredentials | None = None
        self._stamp: FileStamp | None = None
        """The watched file's stamp when last looked at."""
        self._check_at = 0.0
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
        found = self._found
        if found is None:
            return await self._first_credentials()
        if found.source is not None and self._file_changed(found.source.path):
            found = await self._reread(found, found.source.path)
        return found.credentials

    def _file_changed(self, path: Path) -> bool:
        """Whether the watched file changed, looked at no more often than every `check_seconds`.

        The stat is done on the event loop: one a second costs microseconds, less than handing it to
        a thread would.
        """
        now = self._clock()
        if now < self._check_at:
            return False
        self._check_at = now + self._check_seconds
        stamp = file_stamp(path)
        # A file that disappeared leaves the keys read before in use; its return is a change.
        if stamp is None or stamp == self._stamp:
            return False
        # Recorded now, so that requests arriving during the re-read do not start another one.
        self._stamp = stamp
        return True

    async def _reread(self, found: ResolvedCredentials, path: Path) -> ResolvedCredentials:
        """The credentials in the changed file; the ones read before when it yields none."""
        problem = "it has no usable keys for the profile"
        try:
            fresh = await asyncio.to_thread(self._resolve)
        except FAILURES as error:
            fresh, problem = None, str(error)
        # Keys from elsewhere in the chain (an instance role found because the file lacks the
        # profile) are not a rotation: taking them would also stop watching the file.
        if fresh is None or fresh.source is None or fresh.source.path != path:
            logger.warning(
                "the AWS credentials file %s changed but cannot be used (%s); "
                "signing with the credentials read before",
                path,
                problem,
            )
            return found
        self._adopt(fresh)
        logger.info("the AWS credentials file %s changed; signing with its new credentials", path)
        return fresh

    def _adopt(self, found: ResolvedCredentials) -> None:
        self._found = found
        if found.source is not None and found.source.stamp is not None:
            self._stamp = found.source.stamp
        self._check_at = self._clock() + self._check_seconds

    async def _first_credentials(self) -> Credentials:
        async with self._lock:
            if self._found is not None:
                return self._found.credentials
            if self._failure is not None and self._clock() < self._retry_at:
                raise SigningUnavailableError(self._failure)
            try:
                found = await asyncio.to_thread(self._resolve)
            except FAILURES as error:
                reason = f"cannot load the router's AWS credentials: {error}"
            else:
                if found is not None:
                    self._adopt(found)
                    return found.credentials
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
