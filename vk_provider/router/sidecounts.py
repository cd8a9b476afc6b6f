"""What each route's side answered, kept as plain numbers, and written as exposition text.

The two series every request touches (its status class and its latency) are kept in plain integers
per route and side (`SideCounts`), resolved once and turned into text only when scraped:
prometheus_client's `labels()` and `observe()` cost a few microseconds per request in locks, label
tuples and bucket loops, a tenth of the router's whole budget per request.

They are written here rather than through prometheus_client's families because a router with a
thousand routes writes some 40,000 lines per scrape, which took prometheus_client 0.45 s, on the
worker's event loop, while the controller scrapes as often as every 0.25 s in a migration; and
each side's lines are kept between scrapes until the side answers again, so a scrape writes anew
only the routes that served since the last one. The text is what prometheus_client would write for
the same series, byte for byte (a test holds it to that): the controller's reader and the
supervisor's sum read it as such.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Fine at the low end: the gates compare p99s of fast inference endpoints."""

_BUCKET_LABELS = (*(repr(bound) for bound in LATENCY_BUCKETS), "+Inf")


class SideCounts:
    """What one route's side answered: requests per status class and a latency histogram."""

    __slots__ = ("buckets", "by_class", "count", "total_seconds")

    def __init__(self) -> None:
        self.by_class: dict[int, int] = {}
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last one is +Inf
        self.count = 0
        self.total_seconds = 0.0

    def record(self, status: int, seconds: float) -> None:
        hundreds = status // 100
        self.by_class[hundreds] = self.by_class.get(hundreds, 0) + 1
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.count += 1
        self.total_seconds += seconds


REQUESTS_HELP = "Requests answered by an upstream, by route, side and status class (2xx, 5xx, ...)."
LATENCY_HELP = "Time from the request's arrival to the upstream's response headers."

value_text: Callable[[float], str] = floatToGoString
"""A sample's value as prometheus_client writes it (typed here: the library's function is not)."""


def _escaped(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class SideCountsText:
    """The `requests_total` and `response_header_seconds` families of every side, as text."""

    def __init__(self, prefix: str) -> None:
        self._requests = f"{prefix}_requests_total"
        self._latency = f"{prefix}_response_header_seconds"
        self._headers = (
            f"# HELP {self._requests} {REQUESTS_HELP}\n# TYPE {self._requests} counter\n",
            f"# HELP {self._latency} {LATENCY_HELP}\n# TYPE {self._latency} histogram\n",
        )
        self._written: dict[tuple[str, str, str], tuple[int, str, str]] = {}
        """Per side: its count when last written, and its lines of each family."""

    def exposition(self, sides: Mapping[tuple[str, str, str], SideCounts]) -> str:
        requests: list[str] = []
        latency: list[str] = []
        for key, counts in list(sides.items()):
            written = self._written.get(key)
            if written is None or written[0] != counts.count:
                written = self._written[key] = (counts.count, *self._lines(key, counts))
            requests.append(written[1])
            latency.append(written[2])
        for gone in self._written.keys() - sides.keys():
            del self._written[gone]
        return "".join((self._headers[0], *requests, self._headers[1], *latency))

    def _lines(self, key: tuple[str, str, str], counts: SideCounts) -> tuple[str, str]:
        namespace, name, side = (_escaped(part) for part in key)
        labels = f'name="{name}",namespace="{namespace}",side="{side}"'
        requests = "".join(
            f'{self._requests}{{code="{hundreds}xx",{labels}}} {value_text(count)}\n'
            for hundreds, count in sorted(counts.by_class.items())
        )
        cumulative = 0
        buckets = []
        for bound, count in zip(_BUCKET_LABELS, counts.buckets, strict=True):
            cumulative += count
            buckets.append(f'{self._latency}_bucket{{le="{bound}",{labels}}} {value_text(cumulative)}\n')
        latency = (
            "".join(buckets)
            + f"{self._latency}_count{{{labels}}} {value_text(cumulative)}\n"
            + f"{self._latency}_sum{{{labels}}} {value_text(counts.total_seconds)}\n"
        )
        return requests, latency


def described_families(prefix: str) -> list[Metric]:
    """The two families as prometheus_client would hold them, without series: what a list of every
    metric (docs/reference/metrics.md) reads, since no registry holds these."""
    return [
        CounterMetricFamily(
            f"{prefix}_requests", REQUESTS_HELP, labels=["namespace", "name", "side", "code"]
        ),
        HistogramMetricFamily(
            f"{prefix}_response_header_seconds", LATENCY_HELP, labels=["namespace", "name", "side"]
        ),
    ]
