"""The query options of `GET /containerLogs/...`, parsed and validated the way the kubelet does it.

`kubectl logs` talks to the apiserver, which forwards the options to the kubelet as query parameters
of `PodLogOptions`; providers receive them as a `LogOptions`. Parsing follows the kubelet's decoding
so that a request behaves the same on a virtual node as on a real one:

- integers are base-10 64-bit numbers (a leading sign is allowed, as Go's ParseInt allows it);
- booleans are false only for "0", "f" and "false" in any case; anything else, the empty string
  included (`?follow`), is true. So a boolean is never a bad value;
- `sinceTime` is an RFC 3339 time; `sinceSeconds` becomes `since_time = now - sinceSeconds`;
- validation: `tailLines` >= 0, `limitBytes` >= 1, `sinceSeconds` >= 1, and not both `sinceSeconds`
  and `sinceTime`;
- the legacy `tail` parameter overrides `tailLines`, and `tail=all` means no tail at all.

The kubelet answers a bad value with a generic message; here the message names the parameter, which
is what a person reading `kubectl logs` output needs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone

from vk_provider.provider import LogOptions

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_GO_INTEGER = re.compile(r"[+-]?[0-9]+")
_FALSE_WORDS = ("0", "f", "false")
_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([Zz])|([+-])(\d\d):(\d\d))"
)
_EARLIEST = datetime.min.replace(tzinfo=UTC)


class LogOptionsError(ValueError):
    """A query parameter the kubelet would refuse; the message names it and says why."""


def parse_log_options(query: Mapping[str, str], *, now: datetime) -> LogOptions:
    """The options of a log request; `now` anchors `sinceSeconds`. Raises LogOptionsError."""
    tail_lines = _tail_lines(query)
    limit_bytes = _optional_integer(query, "limitBytes")
    since_seconds = _optional_integer(query, "sinceSeconds")
    since_time = _optional_time(query, "sinceTime")
    if tail_lines is not None and tail_lines < 0:
        raise _invalid("tailLines", tail_lines, "must be greater than or equal to 0")
    if limit_bytes is not None and limit_bytes < 1:
        raise _invalid("limitBytes", limit_bytes, "must be greater than 0")
    if since_seconds is not None and since_time is not None:
        raise LogOptionsError("at most one of `sinceTime` or `sinceSeconds` may be specified")
    if since_seconds is not None:
        if since_seconds < 1:
            raise _invalid("sinceSeconds", since_seconds, "must be greater than 0")
        since_time = _seconds_before(now, since_seconds)
    return LogOptions(
        follow=_boolean(query, "follow"),
        tail_lines=tail_lines,
        limit_bytes=limit_bytes,
        previous=_boolean(query, "previous"),
        since_time=since_time,
        timestamps=_boolean(query, "timestamps"),
    )


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 time as a UTC datetime (fractions beyond microseconds are cut). Raises ValueError."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not an RFC 3339 time")
    year, month, day, hour, minute, second = (int(group) for group in match.groups()[:6])
    microseconds = int((match.group(7) or "")[:6].ljust(6, "0"))
    zone = UTC
    if match.group(8) is None:
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        zone = timezone(-offset if match.group(9) == "-" else offset)
    return datetime(year, month, day, hour, minute, second, microseconds, tzinfo=zone).astimezone(UTC)


def _tail_lines(query: Mapping[str, str]) -> int | None:
    legacy = query.get("tail")
    if legacy:  # the kubelet lets the old name win, and "all" means the whole log
        return None if legacy == "all" else _integer("tail", legacy)
    return _optional_integer(query, "tailLines")


def _optional_integer(query: Mapping[str, str], name: str) -> int | None:
    text = query.get(name)
    return None if text is None else _integer(name, text)


def _integer(name: str, text: str) -> int:
    if not _GO_INTEGER.fullmatch(text):
        raise LogOptionsError(f"{name}: {text!r} is not an integer")
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise LogOptionsError(f"{name}: {text!r} is out of range for a 64-bit integer")
    return value


def _boolean(query: Mapping[str, str], name: str) -> bool:
    text = query.get(name)
    return text is not None and text.lower() not in _FALSE_WORDS


def _optional_time(query: Mapping[str, str], name: str) -> datetime | None:
    text = query.get(name)
    if text is None:
        return None
    try:
        return parse_rfc3339(text)
    except ValueError:  # also a well-formed but impossible date, such as February 30
        raise LogOptionsError(f"{name}: {text!r} is not an RFC 3339 time") from None


def _seconds_before(now: datetime, seconds: int) -> datetime:
    try:
        return now - timedelta(seconds=seconds)
    except OverflowError:  # further back than datetime reaches: the whole log
        return _EARLIEST


def _invalid(name: str, value: int, reason: str) -> LogOptionsError:
    """Worded like the apiserver's field errors, which users know from `kubectl`."""
    return LogOptionsError(f"{name}: Invalid value: {value}: {reason}")
