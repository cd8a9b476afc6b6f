"""Where the provider's AWS credentials come from, and the boto3 session and client made with them.

The region is the `region` setting, else boto3's (AWS_DEFAULT_REGION, the profile's), else AWS_REGION.
Credentials come from boto3's standard chain (environment variables, web identity for IRSA, the shared
files, container and instance metadata), optionally with a named `profile`; or, with
`credentials_file`, from a mounted AWS shared-credentials file (a Kubernetes Secret), read with the
profile's section (`default` if none) and re-read whenever the file changes, so a rotated key takes
effect without a restart, as for the other providers' keys. Their values are handed to the redactor
and never logged.
"""

from __future__ import annotations

import configparser
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import botocore.session
from botocore.config import Config
from botocore.credentials import CredentialProvider, Credentials, ReadOnlyCredentials
from botocore.exceptions import BotoCoreError

from vk_providers.sagemaker.config import SageMakerSettings

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

logger = logging.getLogger(__name__)

FILE_METHOD = "vk-provider-credentials-file"


class CredentialsFileError(ValueError):
    """The credentials file is missing, unreadable, or lacks the profile's keys."""


def read_credentials_file(path: Path, profile: str) -> tuple[str, str, str | None]:
    """(access key id, secret access key, session token or None) from `path`'s section `profile`."""
    parser = configparser.RawConfigParser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CredentialsFileError(
            f"cannot read the AWS credentials file {path} ({error.strerror or type(error).__name__})"
        ) from None
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error:
        # The parser's own message may quote the offending line, which may be a key.
        raise CredentialsFileError(f"the AWS credentials file {path} is not an INI file") from None
    if not parser.has_section(profile):
        raise CredentialsFileError(f"the AWS credentials file {path} has no [{profile}] section")
    section = parser[profile]
    access_key = section.get("aws_access_key_id", "").strip()
    secret_key = section.get("aws_secret_access_key", "").strip()
    token = section.get("aws_session_token", "").strip() or None
    if not access_key or not secret_key:
        raise CredentialsFileError(
            f"the [{profile}] section of {path} needs aws_access_key_id and aws_secret_access_key"
        )
    return access_key, secret_key, token


class FileCredentials(Credentials):
    """Credentials read from a file, re-read when its modification time or size changes.

    botocore asks for `get_frozen_credentials()` before signing each request; that costs one stat of
    the file. A file that turns unreadable keeps the last good values (with a warning), so a Secret
    being rewritten does not fail requests in between.
    """

    def __init__(
        self, path: Path, profile: str, *, on_values: Callable[[Iterable[str | None]], None]
    ) -> None:
        self._path = path
        self._profile = profile
        self._on_values = on_values
        self._lock = threading.Lock()
        self._stamp = self._file_stamp()
        access_key, secret_key, token = read_credentials_file(path, profile)
        on_values((access_key, secret_key, token))
        super().__init__(access_key, secret_key, token, method=FILE_METHOD)

    def __repr__(self) -> str:
        return f"FileCredentials(file={str(self._path)!r}, profile={self._profile!r})"

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            stat = self._path.stat()
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size)

    def get_frozen_credentials(self) -> ReadOnlyCredentials:
        with self._lock:
            stamp = self._file_stamp()
            if stamp is not None and stamp != self._stamp:
                try:
                    access_key, secret_key, token = read_credentials_file(self._path, self._profile)
                except CredentialsFileError as error:
                    logger.warning("%s; keeping the credentials read before", error)
                else:
                    self._on_values((access_key, secret_key, token))
                    self.access_key, self.secret_key, self.token = access_key, secret_key, token
                    logger.info("AWS credentials file %s changed; using its new credentials", self._path)
                self._stamp = stamp
            return ReadOnlyCredentials(self.access_key, self.secret_key, self.token)


class _FileCredentialProvider(CredentialProvider):
    METHOD = FILE_METHOD
    CANONICAL_NAME = "VkProviderCredentialsFile"

    def __init__(self, credentials: FileCredentials) -> None:
        super().__init__()
        self._credentials = credentials

    def load(self) -> Credentials:
        return self._credentials


def make_session(
    settings: SageMakerSettings, *, on_values: Callable[[Iterable[str | None]], None]
) -> boto3.Session:
    """A boto3 session for the settings; ValueError (naming no secret) when it cannot be made.

    Only the credentials file is read here; the standard chain is resolved when the client is made,
    off the event loop (it may call the instance metadata service).
    """
    core = botocore.session.get_session()
    credentials: FileCredentials | None = None
    if settings.credentials_file is not None:
        try:
            credentials = FileCredentials(
                settings.credentials_file, settings.profile or "default", on_values=on_values
            )
        except CredentialsFileError as error:
            raise ValueError(f"sagemaker provider: {error}") from None
        # Also botocore's shared-credentials file, so that `profile` may name a section of it alone.
        core.set_config_variable("credentials_file", str(settings.credentials_file))
    try:
        session = boto3.Session(
            botocore_session=core, profile_name=settings.profile, region_name=settings.region
        )
    except BotoCoreError as error:
        raise ValueError(f"sagemaker provider: {error}") from None
    if credentials is not None:
        # First in the chain. (With an explicit profile botocore has dropped the environment provider,
        # so there is no fixed name to insert before.)
        resolver = core.get_component("credential_provider")
        resolver.providers.insert(0, _FileCredentialProvider(credentials))
    if not session.region_name and os.environ.get("AWS_REGION"):
        # botocore reads AWS_DEFAULT_REGION only; other SDKs (and EKS's pod identity webhook) set AWS_REGION.
        core.set_config_variable("region", os.environ["AWS_REGION"])
    if not session.region_name:
        raise ValueError(
            "sagemaker provider: no region: set `region`, AWS_REGION or AWS_DEFAULT_REGION, "
            "or a profile's region"
        )
    return session


def make_client(session: boto3.Session, settings: SageMakerSettings) -> SageMakerClient:
    """The SageMaker client: botocore's own retries off (the provider's caller retries), timeouts on."""
    config = Config(
        connect_timeout=settings.connect_timeout_seconds,
        read_timeout=settings.calls.call_timeout_seconds,
        retries={"total_max_attempts": 1, "mode": "standard"},
        max_pool_connections=settings.max_concurrent_calls,
        user_agent_extra="vk-provider",
    )
    return session.client("sagemaker", endpoint_url=settings.endpoint_url, config=config)
