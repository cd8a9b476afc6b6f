"""The per-side series, written as text by the router itself: byte for byte what prometheus_client
writes for the same families, before and after the sides answer again, and without the sides gone."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from vk_provider.router.sidecounts import LATENCY_BUCKETS, SideCounts, SideCountsText, described_families

PREFIX = "vk_provider_router"
Sides = dict[tuple[str, str, str], SideCounts]


class _Reference(Collector):
    """The same families through prometheus_client's own classes and writer."""

    def __init__(self, sides: Mapping[tuple[str, str, str], SideCounts]) -> None:
        self._sides = sides

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            f"{PREFIX}_requests",
            "Requests answered by an upstream, by route, side and status class (2xx, 5xx, ...).",
            labels=["namespace", "name", "side", "code"],
        )
        latency = HistogramMetricFamily(
            f"{PREFIX}_response_header_seconds",
            "Time from the request's arrival to the upstream's response headers.",
            labels=["namespace", "name", "side"],
        )
        for (namespace, name, side), counts in self._sides.items():
            for hundreds, count in sorted(counts.by_class.items()):
                requests.add_metric([namespace, name, side, f"{hundreds}xx"], count)
            cumulative = 0
            buckets = []
            for bound, count in zip((*LATENCY_BUCKETS, float("inf")), counts.buckets, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(cumulative)))
            latency.add_metric([namespace, name, side], buckets, counts.total_seconds)
        yield requests
        yield latency


def reference(sides: Sides) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Reference(sides))
    return generate_latest(registry).decode()


def answered(*records: tuple[int, float]) -> SideCounts:
    counts = SideCounts()
    for status, seconds in records:
        counts.record(status, seconds)
    return counts


def test_the_text_is_prometheus_clients_byte_for_byte_as_sides_answer_and_go() -> None:
    sides: Sides = {
        ("ml", "chat", "home"): answered((200, 0.001), (200, 0.0011), (503, 2.5), (404, 45.0)),
        ("ml", "chat", "away"): answered((200, 0.3)),
        ("odd", 'quote"back\\slash\nline', "away"): answered((500, 1e-05)),
    }
    text = SideCountsText(PREFIX)
    assert text.exposition({}) == reference({})  # the headers alone
    assert text.exposition(sides) == reference(sides)

    sides[("ml", "chat", "away")].record(502, 12.5)  # a side answers again: its lines are new
    big = sides[("ml", "big", "home")] = answered((200, 0.004))
    big.by_class[2], big.buckets[2], big.count = 1_234_567, 1_234_567, 1_234_567  # written 1.234567e+06
    del sides[("odd", 'quote"back\\slash\nline', "away")]
    assert text.exposition(sides) == reference(sides)
    assert 'quote\\"' not in text.exposition(sides)


def test_the_described_families_are_the_written_ones() -> None:
    """The reference of every metric reads them from `described_families`: the same names, types and
    help as the text, and the labels the text writes."""

    class Described(Collector):
        def collect(self) -> Iterator[Metric]:
            return iter(described_families(PREFIX))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Described())
    assert generate_latest(registry).decode() == SideCountsText(PREFIX).exposition({})
    labels = {family.name: getattr(family, "_labelnames", ()) for family in described_families(PREFIX)}
    assert labels == {
        f"{PREFIX}_requests": ("namespace", "name", "side", "code"),
        f"{PREFIX}_response_header_seconds": ("namespace", "name", "side"),
    }
