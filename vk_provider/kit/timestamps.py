"""Times as the Kubernetes API and provider APIs write them: RFC 3339, in UTC.

One place for both directions, so a `Z` suffix, fractional seconds or a missing zone are handled the
same way by every reader (the node, the controller, the CLI and the providers).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def parse_timestamp(value: Any, *, assume_utc: bool = True) -> datetime | None:
    """An aware datetime from an RFC 3339 string (`Z` or an offset), or None for anything else.

    A time without a zone is taken as UTC, or refused (None) with `assume_utc=False` for APIs where
    a missing zone means the value is not what it claims to be.
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC) if assume_utc else None
    return moment


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with whole seconds, as the API writes `metav1.Time`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with microseconds, as the API writes `metav1.MicroTime` (Leases, Events)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
