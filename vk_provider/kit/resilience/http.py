"""A failed HTTP call as data: the status, the provider's own words, and how long it asks us to wait."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from http import HTTPStatus

import aiohttp

MAX_DETAIL_CHARS = 500
"""An error body longer than this is cut: it ends up in pod statuses and events."""


class ApiStatusError(Exception):
    """A provider API answered with an error status (4xx or 5xx)."""

    def __init__(
        self, status: int, detail: str = "", *, reason: str = "", retry_after_seconds: float | None = None
    ) -> None:
        self.status = status
        self.reason = reason or _phrase(status)
        self.detail = detail
        self.retry_after_seconds = retry_after_seconds
        super().__init__(str(self))

    @property
    def retryable(self) -> bool:
        """Timeouts, rate limits and server errors may pass; other client errors will not."""
        return self.status in (408, 429) or self.status >= 500

    def __str__(self) -> str:
        head = f"HTTP {self.status} {self.reason}".rstrip()
        return f"{head}: {self.detail}" if self.detail else head


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP date (RFC 9110 10.2.3).

    None when the header is absent or unreadable; a date in the past gives 0.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:  # "-0000" dates parse as naive; HTTP dates are always GMT
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - (now or datetime.now(UTC))).total_seconds())


def problem_detail(body: str, content_type: str) -> str:
    """The human part of an error body: RFC 9457 `detail` (or `title`) and its `errors`, or the text."""
    text = body.strip()
    if "json" in content_type or text.startswith("{"):
        try:
            document = json.loads(text)
        except ValueError:
            document = None
        if isinstance(document, dict):
            parts: list[str] = []
            for key in ("detail", "message", "error", "title"):
                value = document.get(key)
                if isinstance(value, str) and value.strip():
                    parts.append(value.strip())
                    break
            errors = document.get("errors")
            if isinstance(errors, list):
                parts.extend(str(item) for item in errors if item)
            if parts:
                return _cut("; ".join(parts))
    return _cut(" ".join(text.split()))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"


async def error_from_response(
    response: aiohttp.ClientResponse, *, now: datetime | None = None
) -> ApiStatusError:
    """Read an error response (body included) into an ApiStatusError."""
    try:
        body = await response.text(errors="replace")
    except (aiohttp.ClientError, TimeoutError):
        body = ""
    return ApiStatusError(
        response.status,
        problem_detail(body, response.headers.get("Content-Type", "")),
        reason=response.reason or "",
        retry_after_seconds=parse_retry_after(response.headers.get("Retry-After"), now=now),
    )
