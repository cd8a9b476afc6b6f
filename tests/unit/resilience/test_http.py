"""Reading failed HTTP answers: Retry-After in both forms, RFC 9457 problem documents, retryable statuses."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vk_provider.kit.resilience import ApiStatusError, parse_retry_after
from vk_provider.kit.resilience.http import MAX_DETAIL_CHARS, problem_detail

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("12", 12.0),
        (" 0 ", 0.0),
        ("Wed, 02 Dec 2026 12:00:30 GMT", 30.0),
        ("Wed, 02 Dec 2026 11:59:00 GMT", 0.0),  # in the past: no wait
        ("Wed, 02 Dec 2026 12:01:00 -0000", 60.0),
        (None, None),
        ("soon", None),
        ("-5", None),
        ("1.5", None),  # delay-seconds is an integer
    ],
)
def test_retry_after_reads_seconds_and_http_dates(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, now=NOW) == seconds


def test_problem_document_gives_detail_and_every_validation_error() -> None:
    body = (
        '{"title": "Unprocessable Entity", "status": 422, "detail": "Request validation failed.",'
        ' "errors": ["$: additional properties \'bogus\' not allowed", "$.disk: expected integer"]}'
    )
    assert problem_detail(body, "application/problem+json") == (
        "Request validation failed.; $: additional properties 'bogus' not allowed; $.disk: expected integer"
    )


def test_problem_without_detail_falls_back_to_title_and_text_bodies_are_kept() -> None:
    assert problem_detail('{"title": "Not Found", "status": 404}', "application/json") == "Not Found"
    assert problem_detail("<html>\n  Bad   gateway </html>", "text/html") == "<html> Bad gateway </html>"


def test_long_details_are_cut() -> None:
    detail = problem_detail("x" * 10_000, "text/plain")
    assert len(detail) == MAX_DETAIL_CHARS
    assert detail.endswith("…")


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (408, True),
        (429, True),
        (500, True),
        (503, True),
        (400, False),
        (401, False),
        (404, False),
        (422, False),
    ],
)
def test_only_timeouts_rate_limits_and_server_errors_are_retryable(status: int, retryable: bool) -> None:
    assert ApiStatusError(status, "x").retryable is retryable


def test_status_error_reads_like_the_answer() -> None:
    error = ApiStatusError(503, "upstream busy", retry_after_seconds=2.0)
    assert str(error) == "HTTP 503 Service Unavailable: upstream busy"
    assert error.retry_after_seconds == 2.0
    assert str(ApiStatusError(599)) == "HTTP 599"
