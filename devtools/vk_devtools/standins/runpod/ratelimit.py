"""The stand-in's rate limits per API key, as RunPod documents them for its REST API v2.

Each key has a quota in fixed windows (RunPod's are a minute, an hour and a day); a request counts
against every window, and when any window is used up the request is refused with 429 until that window
resets, even if the others have room (docs.runpod.io/api-reference-v2/rate-limits). Refused requests
count against nothing. Windows start at multiples of their length on the stand-in's clock.

Every answer to an authenticated request carries the state, in the structured-field form of the IETF
draft (draft-ietf-httpapi-ratelimit-headers) that RunPod's OpenAPI document gives:
`RateLimit-Policy: "minute";q=60;w=60, "hour";q=3000;w=3600` (quota, window length) and
`RateLimit: "minute";r=59;t=42, "hour";r=2999;t=1242` (requests left, seconds until the reset); a
429 adds `Retry-After`, the seconds until every exhausted window has reset.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from vk_devtools.standins.runpod.clock import Clock
from vk_devtools.standins.runpod.profile import RateLimitWindow


@dataclasses.dataclass(frozen=True, slots=True)
class Admission:
    """The limiter's answer to one request: its headers, and what refused it if anything did."""

    headers: dict[str, str]
    exhausted: str | None = None
    """The name of the window that refused the request (the first exhausted one); None: admitted."""
    retry_after_seconds: int | None = None


class RateLimiter:
    """Counts each API key's requests in the windows `windows` returns (read for each request)."""

    def __init__(self, windows: Callable[[], Sequence[RateLimitWindow]], clock: Clock) -> None:
        self._windows = windows
        self._clock = clock
        self._used: dict[tuple[str, RateLimitWindow], tuple[int, int]] = {}
        """By key and window: (the window's index on the clock, the requests counted in it)."""

    def admit(self, key: str) -> Admission | None:
        """Count a request of `key` if every window has room; None when no limit is set."""
        windows = tuple(self._windows())
        if not windows:
            return None
        now = self._clock.now()
        used = {window: self._used_now(key, window, now) for window in windows}
        exhausted = [window for window in windows if used[window] >= window.quota]
        if not exhausted:
            for window in windows:
                used[window] += 1
                self._used[(key, window)] = (_index(window, now), used[window])
        headers = {
            "RateLimit-Policy": ", ".join(f'"{w.name}";q={w.quota};w={w.seconds}' for w in windows),
            "RateLimit": ", ".join(
                f'"{w.name}";r={w.quota - used[w]};t={_seconds_to_reset(w, now)}' for w in windows
            ),
        }
        if not exhausted:
            return Admission(headers)
        retry_after = max(_seconds_to_reset(window, now) for window in exhausted)
        headers["Retry-After"] = str(retry_after)
        return Admission(headers, exhausted[0].name, retry_after)

    def _used_now(self, key: str, window: RateLimitWindow, now: float) -> int:
        index, used = self._used.get((key, window), (-1, 0))
        return used if index == _index(window, now) else 0


def _index(window: RateLimitWindow, now: float) -> int:
    return math.floor(now / window.seconds)


def _seconds_to_reset(window: RateLimitWindow, now: float) -> int:
    """Whole seconds (rounded up, so never 0) until the window that holds `now` ends."""
    return max(1, math.ceil((_index(window, now) + 1) * window.seconds - now))
