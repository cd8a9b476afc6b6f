"""API keys that never show up where they should not: reprs, messages, logs.

A provider's key comes from a mounted Secret (a file; the kubelet rewrites it when the Secret changes)
or from the environment. `SecretSource` reads it where it is and re-reads the file when it changes, so a
rotated key takes effect without a restart. `Secret` carries the value: its `str` and `repr` are
redacted, the value is only had through `reveal()`, and `redact(text)` scrubs it (and every earlier
value) from any text before that text is logged or raised.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

REDACTED = "***"


class MissingSecretError(ValueError):
    """No key was configured, or its file is empty or unreadable."""


class Secret:
    """A secret string whose printed forms are redacted."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value:
            raise MissingSecretError("a secret must not be empty")
        self._value = value

    def reveal(self) -> str:
        """The value itself: for the one place that sends it (an Authorization header)."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"

    def __str__(self) -> str:
        return REDACTED

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Secret is not pickled")


class SecretSource:
    """Where a key comes from: a file (preferred, re-read when it changes) or an environment variable.

    `current()` is cheap enough to call before every request (one stat of the file).
    """

    def __init__(
        self,
        *,
        file: Path | None = None,
        env_var: str | None = None,
        environ: Mapping[str, str] | None = None,
        description: str = "API key",
    ) -> None:
        self._file = file
        self._env_var = env_var
        self._environ = os.environ if environ is None else environ
        self._description = description
        self._seen: list[Secret] = []
        self._file_stamp: tuple[int, int] | None = None
        self._file_secret: Secret | None = None

    def __repr__(self) -> str:
        return f"SecretSource(file={self._file!s}, env_var={self._env_var!r})"

    def describe(self) -> str:
        """Where the key is read from, for messages (never the key)."""
        if self._file is not None:
            return f"the file {self._file}"
        return f"the environment variable {self._env_var}"

    def current(self) -> Secret:
        """The key as it is now; raises MissingSecretError naming where it was looked for."""
        if self._file is not None:
            return self._from_file(self._file)
        value = self._environ.get(self._env_var or "", "").strip()
        if not value:
            raise MissingSecretError(f"no {self._description}: {self.describe()} is unset or empty")
        return self._remember(Secret(value))

    def _from_file(self, path: Path) -> Secret:
        try:
            stat = path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if self._file_secret is None or stamp != self._file_stamp:
                value = path.read_text(encoding="utf-8").strip()
                if not value:
                    raise MissingSecretError(f"no {self._description}: the file {path} is empty")
                self._file_secret = self._remember(Secret(value))
                self._file_stamp = stamp
        except OSError as error:
            raise MissingSecretError(
                f"no {self._description}: cannot read {path} ({error.strerror or type(error).__name__})"
            ) from None
        return self._file_secret

    def _remember(self, secret: Secret) -> Secret:
        if secret not in self._seen:
            self._seen.append(secret)
        return secret

    def redact(self, text: str) -> str:
        """`text` with every value this source has ever handed out replaced by ***."""
        for secret in self._seen:
            text = text.replace(secret.reveal(), REDACTED)
        return text
