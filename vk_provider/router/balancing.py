"""Which endpoint a request goes to: the side by weight, then the least busy endpoint of that side.

The side is drawn once per request (one draw against the weight), so a retry of that request stays
on the side it drew. The draws of a route are the points of a golden-ratio sequence (each the last
plus 0.618... modulo 1, from a random start) rather than independent random numbers: any run of
consecutive draws spreads over [0, 100) almost evenly, so the away share of every window of
requests is within a few requests of the weight, where independent draws stray by the square root
of the count (about 2 points in 500 requests at 50%, sometimes 6). Router replicas keep their own
sequences and need no shared counter: each one's share is close, so their sum is too.

Within a side the endpoint with the fewest outstanding requests wins: LLM requests vary from
milliseconds to minutes, and counting what is in flight spreads them far better than round robin.
Ties are broken at random so that several router replicas, which do not see each other's counts, do
not all pile onto the first endpoint.

An endpoint that refuses connections is ejected for a while (doubling on repeated refusal, up to a
cap, and forgotten on the first success), so a pod that just died costs one failed connect, not one
per request. Terminating endpoints get nothing new: they are draining.

Endpoint state is kept per URL, not per route, so it survives table swaps: an endpoint that stays in
the new table keeps its outstanding count and its ejection.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable

from vk_provider.routetable.table import SIDES, Endpoint, Route, Side


def other(side: Side) -> Side:
    return "away" if side == "home" else "home"


GOLDEN_STEP = (math.sqrt(5.0) - 1.0) / 2.0
"""The step between a route's consecutive draws (as a fraction of the range): the rotation by the
golden ratio leaves the most even gaps of any step (the three-distance theorem)."""


def side_for_draw(away_weight: int, draw: float) -> Side:
    """The side for a draw uniform in [0, 100): away for the lowest `away_weight` percent."""
    return "away" if draw < away_weight else "home"


@dataclasses.dataclass(frozen=True)
class EjectionPolicy:
    base_seconds: float = 5.0
    max_seconds: float = 60.0


@dataclasses.dataclass
class EndpointState:
    outstanding: int = 0
    ejected_until: float = 0.0
    refusals: int = 0
    """Consecutive refusals, which set the next ejection's length."""


@dataclasses.dataclass(frozen=True)
class Pick:
    """An endpoint chosen for one attempt of one request."""

    side: Side
    endpoint: Endpoint
    fell_back: bool
    """True when the drawn side had nothing usable and the other side was used instead."""


class Balancer:
    """Outstanding counts and ejections per endpoint URL, and the choice that reads them."""

    def __init__(
        self,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        ejection: EjectionPolicy | None = None,
    ) -> None:
        self.rng = rng if rng is not None else random.Random()  # noqa: S311 - load spreading, not secrets
        self._clock = clock
        self._ejection = ejection if ejection is not None else EjectionPolicy()
        self._states: dict[str, EndpointState] = {}
        self._last_draws: dict[str, float] = {}
        """Per route key: its last draw as a fraction of the range."""

    def draw(self, route: Route) -> float:
        """The request's one draw in [0, 100): the next point of `route`'s golden-ratio sequence."""
        key = route.key
        last = self._last_draws.get(key)
        point = self.rng.random() if last is None else (last + GOLDEN_STEP) % 1.0
        self._last_draws[key] = point
        return point * 100.0

    def state(self, url: str) -> EndpointState:
        state = self._states.get(url)
        if state is None:
            state = self._states[url] = EndpointState()
        return state

    def outstanding(self, url: str) -> int:
        state = self._states.get(url)
        return state.outstanding if state is not None else 0

    def is_ejected(self, url: str) -> bool:
        state = self._states.get(url)
        return state is not None and state.ejected_until > self._clock()

    def usable(self, endpoint: Endpoint) -> bool:
        return not endpoint.terminating and not self.is_ejected(endpoint.url)

    def pick(self, route: Route, draw: float, exclude: frozenset[str] = frozenset()) -> Pick | None:
        """The endpoint for the next attempt, or None when neither side has a usable one left.

        `exclude` holds the URLs this request already failed to connect to, so a retry moves on.
        """
        drawn = side_for_draw(route.away_weight, draw)
        for side in (drawn, other(drawn)):
            tied = self._least_outstanding(route.endpoints(side), exclude)
            if tied:
                return Pick(side, self.rng.choice(tied), fell_back=side != drawn)
        return None

    def _least_outstanding(self, endpoints: tuple[Endpoint, ...], exclude: frozenset[str]) -> list[Endpoint]:
        """The usable endpoints with the fewest requests in flight, in one pass (it runs per request;
        the clock is read only when an endpoint has been ejected)."""
        states = self._states
        now: float | None = None
        least = -1
        tied: list[Endpoint] = []
        for endpoint in endpoints:
            url = endpoint.url
            if endpoint.terminating or url in exclude:
                continue
            outstanding = 0
            state = states.get(url)
            if state is not None:
                if state.ejected_until:
                    now = self._clock() if now is None else now
                    if state.ejected_until > now:
                        continue
                outstanding = state.outstanding
            if not tied or outstanding < least:
                least, tied = outstanding, [endpoint]
            elif outstanding == least:
                tied.append(endpoint)
        return tied

    def acquire(self, url: str) -> None:
        self.state(url).outstanding += 1

    def release(self, url: str) -> None:
        state = self.state(url)
        state.outstanding = max(0, state.outstanding - 1)

    def refused(self, url: str) -> float:
        """Eject `url` after a refused connection; returns the ejection's length in seconds."""
        state = self.state(url)
        period = min(self._ejection.base_seconds * 2.0**state.refusals, self._ejection.max_seconds)
        state.refusals += 1
        state.ejected_until = self._clock() + period
        return period

    def succeeded(self, url: str) -> None:
        """A connection worked: the endpoint is healthy again, and its next ejection starts short."""
        state = self._states.get(url)
        if state is not None:
            state.refusals = 0
            state.ejected_until = 0.0

    def forget_except(self, urls: set[str], route_keys: set[str]) -> None:
        """Drop idle state of endpoints and the sequences of routes no longer in the table, so the
        maps do not grow forever."""
        for url in [url for url, state in self._states.items() if url not in urls and not state.outstanding]:
            del self._states[url]
        for key in [key for key in self._last_draws if key not in route_keys]:
            del self._last_draws[key]

    def side_counts(self, route: Route) -> dict[str, dict[str, int]]:
        """Per side: endpoints in the table, usable ones, terminating, ejected, requests in flight."""
        counts: dict[str, dict[str, int]] = {}
        for side in SIDES:
            endpoints = route.endpoints(side)
            counts[side] = {
                "total": len(endpoints),
                "usable": sum(1 for endpoint in endpoints if self.usable(endpoint)),
                "terminating": sum(1 for endpoint in endpoints if endpoint.terminating),
                "ejected": sum(1 for endpoint in endpoints if self.is_ejected(endpoint.url)),
                "outstanding": sum(self.outstanding(endpoint.url) for endpoint in endpoints),
            }
        return counts
