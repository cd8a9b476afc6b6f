"""Fold repeated Events into one, as client-go's event correlator does. Pure: no I/O, a clock passed in.

An Event is an object in etcd every watcher of Events receives, so a component that reports the same
thing over and over (a retry loop, a flapping provider) must not create an Event each time. Three rules,
the ones `k8s.io/client-go/tools/record` applies before a kubelet or a controller posts an Event:

1. Aggregation: events of the same source, object, type and reason but different messages are
   "similar". Once `MAX_SIMILAR` different messages of one such group have been seen, each within
   `AGGREGATION_WINDOW_SECONDS` of the last, the next ones become a single Event whose message is
   `"(combined from similar events): "` and the latest message.
2. Deduplication: an event identical to an earlier one (the same key, message included, or the same
   aggregated group) seen within `AGGREGATION_WINDOW_SECONDS` is not a new Event: the earlier Event's
   `count`, `lastTimestamp` and `message` are patched instead. (client-go keeps the earlier Event for as
   long as its cache does; here, as for aggregation, one quiet window starts a fresh Event.)
3. Spam filter: a token bucket per source and object, `SPAM_BURST` events at once and one more every
   `SPAM_REFILL_SECONDS`; an event without a token is dropped (logged by the caller, never posted).

The caches are bounded (least recently used entries go first), as client-go's LRU caches of 4096.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Generic, TypeVar

AGGREGATION_WINDOW_SECONDS = 600.0
"""client-go's defaultAggregateIntervalInSeconds: 10 minutes."""
MAX_SIMILAR = 10
"""client-go's defaultAggregateMaxEvents: at this many different messages, similar events combine."""
SPAM_BURST = 25
"""client-go's defaultSpamBurst."""
SPAM_REFILL_SECONDS = 300.0
"""client-go's defaultSpamQPS is 1/300: one token every 5 minutes."""
CACHE_ENTRIES = 4096
"""client-go's maxLruCacheEntries."""
COMBINED_PREFIX = "(combined from similar events): "

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@dataclasses.dataclass(frozen=True, slots=True)
class EventKey:
    """What makes events "similar": the same source, object, type and reason."""

    component: str
    host: str
    kind: str
    namespace: str
    name: str
    uid: str
    type: str
    reason: str

    @property
    def spam_key(self) -> tuple[str, ...]:
        """The spam filter's bucket: source and object."""
        return (self.component, self.host, self.kind, self.namespace, self.name, self.uid)


@dataclasses.dataclass(frozen=True, slots=True)
class Correlated:
    """What to post for an event: a new Event named `name` (`count` 1), or, for a repeat, a patch of the
    Event `name` to this `count`, `message` and last time."""

    name: str
    message: str
    count: int
    first_at: datetime
    last_at: datetime

    @property
    def is_repeat(self) -> bool:
        return self.count > 1


@dataclasses.dataclass(slots=True)
class _Group:
    messages: set[str]
    last_seen: float


@dataclasses.dataclass(slots=True)
class _Observed:
    name: str
    count: int
    first_at: datetime
    last_seen: float


@dataclasses.dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class EventCorrelator:
    """Decides, for each event as it happens, whether it is a new Event, a repeat, or spam.

    `clock`: monotonic seconds, for the windows and the token buckets; `new_name`: the name of a new
    Event about the object named (client-go's `<object>.<unique suffix>`).
    """

    def __init__(self, *, clock: Callable[[], float], new_name: Callable[[str], str]) -> None:
        self._clock = clock
        self._new_name = new_name
        self._groups: _Lru[EventKey, _Group] = _Lru(CACHE_ENTRIES)
        self._observed: _Lru[tuple[EventKey, str | None], _Observed] = _Lru(CACHE_ENTRIES)
        self._buckets: _Lru[tuple[str, ...], _Bucket] = _Lru(CACHE_ENTRIES)
        self.dropped = 0

    def correlate(self, key: EventKey, message: str, at: datetime) -> Correlated | None:
        """What to post for this event, or None when the spam filter drops it."""
        now = self._clock()
        message, identity = self._aggregate(key, message, now)
        correlated = self._observe(key, identity, message, at, now)
        if not self._allow(key.spam_key, now):
            self.dropped += 1
            return None
        return correlated

    def _aggregate(self, key: EventKey, message: str, now: float) -> tuple[str, str | None]:
        """The message to post and what identifies the Event among the group's: the message itself, or
        None for the group's combined Event."""
        group = self._groups.get(key)
        if group is None or now - group.last_seen > AGGREGATION_WINDOW_SECONDS:
            group = _Group(set(), now)
        group.messages.add(message)
        group.last_seen = now
        self._groups.put(key, group)
        if len(group.messages) < MAX_SIMILAR:
            return message, message
        group.messages.discard(message)  # as client-go, the set does not grow past the limit
        return COMBINED_PREFIX + message, None

    def _observe(
        self, key: EventKey, identity: str | None, message: str, at: datetime, now: float
    ) -> Correlated:
        observed = self._observed.get((key, identity))
        if observed is None or now - observed.last_seen > AGGREGATION_WINDOW_SECONDS:
            observed = _Observed(self._new_name(key.name), 0, at, now)
        observed.count += 1
        observed.last_seen = now
        self._observed.put((key, identity), observed)
        return Correlated(observed.name, message, observed.count, observed.first_at, at)

    def _allow(self, spam_key: tuple[str, ...], now: float) -> bool:
        bucket = self._buckets.get(spam_key)
        if bucket is None:
            bucket = _Bucket(float(SPAM_BURST), now)
        bucket.tokens = min(float(SPAM_BURST), bucket.tokens + (now - bucket.at) / SPAM_REFILL_SECONDS)
        bucket.at = now
        self._buckets.put(spam_key, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True
