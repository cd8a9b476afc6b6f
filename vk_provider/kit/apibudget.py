"""The client side of the apiserver's load protection: per-class pacing that yields to 429s.

The apiserver protects itself with API Priority and Fairness (APF): when a priority level's seats and
queues are full it answers 429 with `Retry-After`. That is the primary protection, and a client that
honours it needs no low fixed limit of its own (a fixed QPS 50 made our own limiter, not the apiserver,
the ceiling of the node: 0.15x of what the plane could take). So:

- every request belongs to a class (`classify`): the node's heartbeat (its Lease and Node, and leader
  election), events, or the rest (pod writes and reads). Each class has its own `AdaptiveLimiter`, so a
  burst of pod writes or events never delays a Lease renewal behind it;
- an `AdaptiveLimiter` starts unpaced (or at the hard ceiling) and follows additive-increase /
  multiplicative-decrease: a 429 (or a 5xx with `Retry-After`) halves its rate, at most once per
  throttling episode, and pauses the class for `Retry-After`; each second without one gives back a tenth
  of the rate it had before the cut, so it regains it in about five seconds;
- an optional hard ceiling (`--api-qps`/`--api-burst`, 0 = none) paces the pod and event classes
  together whatever the apiserver says; the heartbeat class is never held by it.

Time is read from a `Clock`, so the tests drive it without sleeping.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from typing import Protocol

logger = logging.getLogger(__name__)

HEARTBEAT = "heartbeat"
"""The node's own Lease and Node object, and leader election: must never starve behind pod work."""
EVENTS = "events"
WORKLOAD = "workload"
"""Everything else: pod status writes, reads, CSRs, reviews."""
CLASSES = (HEARTBEAT, WORKLOAD, EVENTS)

MAX_RETRIES = 10
"""Retries of one request answered 429 (or 5xx with Retry-After), as client-go's default."""
MAX_RETRY_AFTER_SECONDS = 60.0
"""A longer Retry-After is cut to this: a wrong header must not stop the node for an hour."""
DECREASE_FACTOR = 0.5
RECOVERY_FRACTION_PER_SECOND = 0.1
MIN_QPS = 1.0


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The running event loop's monotonic clock."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def classify(method: str, path: str) -> str:
    """The class of a request, from the resource its path names (the same for every verb)."""
    resource = resource_of(path)
    if resource in ("leases", "nodes"):
        return HEARTBEAT
    if resource == "events":
        return EVENTS
    return WORKLOAD


def resource_of(path: str) -> str:
    """`pods` of /api/v1/namespaces/ns/pods/name/status, `leases` of /apis/coordination.k8s.io/v1/..."""
    segments = path.split("?", 1)[0].strip("/").split("/")
    start = 2 if segments[0] == "api" else 3
    rest = segments[start:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        return rest[2]
    return rest[0] if rest else ""


class TokenBucket:
    """`qps` requests a second on average, bursts of `burst`; `qps` may change while it runs."""

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._tokens = float(self.burst)
        self._updated: float | None = None

    def drain(self) -> None:
        self._tokens = 0.0
        self._updated = self._clock.now()

    def reserve(self) -> float:
        """Take a token; return how long to wait before using it (0 if one was there)."""
        now = self._clock.now()
        if self._updated is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.qps)
        self._updated = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0.0 else -self._tokens / self.qps


class AdaptiveLimiter:
    """Paces one request class: unpaced (or at `ceiling_qps`) until the apiserver pushes back, then AIMD.

    `ceiling_qps=0` means no ceiling: the class is unpaced until its first 429, then paced at half the
    rate it was sending at, and unpaced again once it has recovered past twice that rate.
    """

    def __init__(
        self, *, ceiling_qps: float = 0.0, burst: int = 0, clock: Clock | None = None, name: str = ""
    ) -> None:
        self._clock = clock or LoopClock()
        self.name = name
        self.ceiling_qps = ceiling_qps
        self._burst = burst
        self._bucket: TokenBucket | None = None
        if ceiling_qps > 0:
            self._bucket = TokenBucket(ceiling_qps, burst or math.ceil(ceiling_qps), self._clock)
        self._paused_until = 0.0
        self._episode_ends = 0.0
        self._recovering_to = 0.0
        self._recovered_at = 0.0
        self._window_start = 0.0
        self._window_count = 0
        self._last_window_count = 0
        """Requests sent in the current and the previous one-second window: the rate to halve when
        the class is unpaced (counting, not timestamps: this runs for every request)."""
        self.throttled = 0
        """429s (and 5xx with Retry-After) seen."""
        self.waited_seconds = 0.0

    @property
    def qps(self) -> float:
        """The current pace; `math.inf` when unpaced."""
        self._recover()
        return self._bucket.qps if self._bucket is not None else math.inf

    async def acquire(self) -> None:
        """Wait for this class's turn: its Retry-After pause, then its pace."""
        now = self._clock.now()
        delay = max(0.0, self._paused_until - now)
        self._recover()
        if self._bucket is not None:
            delay = max(delay, self._bucket.reserve())
        else:
            self._count(now)
        if delay > 0:
            self.waited_seconds += delay
            await self._clock.sleep(delay)

    def throttle(self, retry_after_seconds: float | None) -> None:
        """The apiserver answered 429 (or 5xx with Retry-After): pause the class, and cut its pace once
        per episode (the requests already in flight answer 429 together, that is one signal)."""
        now = self._clock.now()
        self.throttled += 1
        pause = min(retry_after_seconds or 0.0, MAX_RETRY_AFTER_SECONDS)
        self._paused_until = max(self._paused_until, now + pause)
        if now < self._episode_ends:
            return
        self._episode_ends = now + max(pause, 1.0)
        self._recover()
        current = self._bucket.qps if self._bucket is not None else self._sending_rate(now)
        target = max(MIN_QPS, current * DECREASE_FACTOR)
        burst = self._burst or max(1, math.ceil(target))
        if self._bucket is None:
            self._bucket = TokenBucket(target, burst, self._clock)
        self._bucket.qps = target
        self._bucket.drain()  # no burst right after a congestion signal: paced from now on
        self._recovering_to = current
        self._recovered_at = now
        logger.warning(
            "the apiserver asks for fewer %s requests (Retry-After %.0fs): pacing at %.0f/s, from %.0f/s",
            self.name or "such",
            pause,
            target,
            current,
        )

    def _count(self, now: float) -> None:
        if now - self._window_start >= 1.0:
            full_window = now - self._window_start < 2.0
            self._last_window_count = self._window_count if full_window else 0
            self._window_start = now
            self._window_count = 0
        self._window_count += 1

    def _sending_rate(self, now: float) -> float:
        """Requests a second lately: the previous full window's, or the current one's scaled up."""
        current = self._window_count / min(1.0, max(now - self._window_start, 0.1))
        return max(MIN_QPS, float(self._last_window_count), current)

    def _recover(self) -> None:
        """Additive increase: each second since the last cut (or step) adds a tenth of the rate before it."""
        if self._bucket is None or self._recovering_to <= 0:
            return
        now = self._clock.now()
        if now < self._episode_ends:
            self._recovered_at = max(self._recovered_at, now)
            return
        elapsed = now - max(self._recovered_at, self._episode_ends)
        if elapsed <= 0:
            return
        self._recovered_at = now
        step = max(MIN_QPS, self._recovering_to * RECOVERY_FRACTION_PER_SECOND)
        raised = self._bucket.qps + step * elapsed
        if self.ceiling_qps > 0:
            self._bucket.qps = min(self.ceiling_qps, raised)
            if self._bucket.qps >= self.ceiling_qps:
                self._recovering_to = 0.0
        elif raised >= 2 * self._recovering_to:
            # Well past the rate that was throttled: unpaced again, as at the start.
            self._bucket = None
            self._recovering_to = 0.0
        else:
            self._bucket.qps = raised


@dataclasses.dataclass(frozen=True, slots=True)
class ApiBudget:
    """One `AdaptiveLimiter` per request class, plus the shared hard ceiling of the non-heartbeat ones.

    `qps`/`burst` are the hard ceiling (`--api-qps`/`--api-burst`): 0 = none, then only the
    apiserver's 429s pace the node.
    """

    qps: float = 0.0
    burst: int = 0
    clock: Clock = dataclasses.field(default_factory=LoopClock)
    limiters: dict[str, AdaptiveLimiter] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.limiters:
            return
        for name in CLASSES:
            self.limiters[name] = AdaptiveLimiter(clock=self.clock, name=name)
        self.limiters["ceiling"] = AdaptiveLimiter(
            ceiling_qps=self.qps, burst=self.burst, clock=self.clock, name="ceiling"
        )

    def limiter(self, request_class: str) -> AdaptiveLimiter:
        return self.limiters[request_class]

    async def acquire(self, request_class: str) -> None:
        await self.limiters[request_class].acquire()
        if request_class != HEARTBEAT and self.qps > 0:
            await self.limiters["ceiling"].acquire()

    def throttle(self, request_class: str, retry_after_seconds: float | None) -> None:
        self.limiters[request_class].throttle(retry_after_seconds)

    @property
    def waited_seconds(self) -> float:
        return sum(limiter.waited_seconds for limiter in self.limiters.values())

    @property
    def throttled(self) -> int:
        return sum(limiter.throttled for limiter in self.limiters.values())
