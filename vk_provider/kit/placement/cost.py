"""What placed pods cost, added up from their list price and the time they run. Pure but for a clock.

The node observes each pod whenever it looks at its state (a push, a poll, a reconcile) and adds what
`CostMeter.observe` returns to its cost counter. The time between two observations is charged at the
earlier observation's price, and only if the pod was running then: a pod is charged from the first
observation that sees it running until the first that sees it stopped (or `forget`). The estimate is
at list price (discounts and storage are not reflected) and at most one observation interval off.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

SECONDS_PER_HOUR = 3600.0


@dataclasses.dataclass(frozen=True, slots=True)
class _Seen:
    at: float
    price_per_hour: float | None
    running: bool


class CostMeter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """`clock` is monotonic seconds (tests pass a manual one)."""
        self._clock = clock
        self._seen: dict[str, _Seen] = {}

    def observe(self, uid: str, *, price_per_hour: float | None, running: bool) -> float:
        """US dollars the pod `uid` cost since its last observation (0.0 the first time)."""
        now = self._clock()
        charge = self._charge(uid, now)
        self._seen[uid] = _Seen(now, price_per_hour, running)
        return charge

    def forget(self, uid: str) -> float:
        """The pod is gone: what it cost since its last observation; it is not tracked any more."""
        charge = self._charge(uid, self._clock())
        self._seen.pop(uid, None)
        return charge

    def _charge(self, uid: str, now: float) -> float:
        seen = self._seen.get(uid)
        if seen is None or not seen.running or seen.price_per_hour is None:
            return 0.0
        return seen.price_per_hour * max(0.0, now - seen.at) / SECONDS_PER_HOUR
