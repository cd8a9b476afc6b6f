"""AWS credentials kept out of logs and messages.

botocore logs, at DEBUG, every request it sends (headers included: the `Authorization` header names the
access key id, `X-Amz-Security-Token` carries the session token), every canonical request it signs
(with the token again), and request and response bodies (a model's environment, which may hold the
pod's own secrets). And SageMaker's `InvalidSignatureException` quotes the canonical request it
expected. `Redactor.redact` scrubs all of that from a text: by pattern (the header forms, access key
ids, `Environment` maps in JSON or Python form) and by value (every credential value handed to
`remember`). `install_log_filter` puts one filter doing so on botocore's, boto3's and urllib3's
loggers, so their records are scrubbed before any handler sees them, whatever the log level.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable

REDACTED = "***"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # `X-Amz-Security-Token: b'...'` in header dicts, `x-amz-security-token:...` in canonical requests.
    (re.compile(r"""(?i)(x-amz-security-token['"]?\s*[:=]\s*b?['"]?)[^'"\s,}]+"""), rf"\g<1>{REDACTED}"),
    (re.compile(r"(Credential=)[^/\s,'\"]+"), rf"\g<1>{REDACTED}"),
    (re.compile(r"(Signature=)[0-9a-fA-F]+"), rf"\g<1>{REDACTED}"),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED),
    # A model's environment in a request or response body, which botocore logs as the repr of the JSON
    # bytes: there JSON's escapes \" and \\ read \\" and \\\\ (and non-ASCII \xNN).
    (
        re.compile(
            r'("Environment"\s*:\s*)\{(?:[^{}"\\]|\\\\\\\\|\\\\"|\\.|"(?:[^"\\]|\\\\\\\\|\\\\"|\\.)*")*\}'
        ),
        rf"\g<1>{{{REDACTED}}}",
    ),
    # The same in a Python repr of a parsed answer.
    (
        re.compile(r"('Environment'\s*:\s*)\{(?:[^{}'\"\\]|\\.|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")*\}"),
        rf"\g<1>{{{REDACTED}}}",
    ),
)

LOGGER_PREFIXES = ("botocore", "boto3", "urllib3", "s3transfer")
"""Loggers whose records are scrubbed (these and every child that exists when the filter is installed)."""
_KNOWN_LOGGERS = (
    "botocore",
    "botocore.auth",
    "botocore.awsrequest",
    "botocore.client",
    "botocore.credentials",
    "botocore.endpoint",
    "botocore.hooks",
    "botocore.httpsession",
    "botocore.parsers",
    "botocore.regions",
    "botocore.retries.standard",
    "botocore.retryhandler",
    "botocore.utils",
    "boto3",
    "boto3.resources.action",
    "urllib3",
    "urllib3.connectionpool",
)


class Redactor:
    """Scrubs credentials from text; thread-safe (botocore logs from the executor's threads)."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()

    def remember(self, values: Iterable[str | None]) -> None:
        """Scrub these exact values too (an access key id, a secret key, a session token)."""
        with self._lock:
            self._values.update(value for value in values if value and len(value) >= 4)

    def redact(self, text: str) -> str:
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        with self._lock:
            values = sorted(self._values, key=len, reverse=True)
        for value in values:
            text = text.replace(value, REDACTED)
        return text


class RedactingFilter(logging.Filter):
    """Rewrites a record's message when it holds anything `redactor` scrubs; never drops a record."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is the handler's problem, not ours
            return True
        scrubbed = self.redactor.redact(message)
        if scrubbed != message:
            record.msg = scrubbed
            record.args = None
        return True


REDACTOR = Redactor()
"""The process's one redactor: every SageMaker provider remembers its credential values here."""
_FILTER = RedactingFilter(REDACTOR)
_install_lock = threading.Lock()


def install_log_filter() -> None:
    """Put the scrubbing filter on the AWS libraries' loggers (idempotent; call after making clients)."""
    with _install_lock:
        names = set(_KNOWN_LOGGERS)
        names.update(
            name for name in list(logging.Logger.manager.loggerDict) if name.split(".")[0] in LOGGER_PREFIXES
        )
        for name in sorted(names):
            target = logging.getLogger(name)
            if _FILTER not in target.filters:
                target.addFilter(_FILTER)
