"""What the exporter last read, and its Prometheus families.

`InterconnectState.record_*` take one read of a source each (the InfiniBand tree, the dcgm-exporter)
and keep its totals, their rates since the previous read (`rates`) and the read errors; the collector
turns the state into families at every scrape. A source that could not be read this time has no
series until it can be again: a stale total would read as "no errors" to whoever looks.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vk_provider.interconnect.names import (
    DCGM_SOURCE,
    IB_COUNTER_SATURATED,
    IB_COUNTERS,
    IB_LABELS,
    IB_PORT_ACTIVE,
    NVLINK_COUNTERS,
    NVLINK_LABELS,
    READ_ERROR_SOURCES,
    READ_ERRORS,
    SYSFS_SOURCE,
    IbCounter,
    Published,
)
from vk_provider.interconnect.nvlink import GpuNvlink
from vk_provider.interconnect.rates import Observed, rates_between, remember
from vk_provider.interconnect.sysfs import TreeReading
from vk_provider.kit.buildinfo import register_build_info

SeriesKey = tuple[Published, tuple[str, ...]]
"""A counter and its label values: (device, port) for InfiniBand, (gpu, uuid) for NVLink."""


@dataclasses.dataclass
class _Source:
    """One source's last read and what it takes to compute the next read's rates."""

    totals: dict[SeriesKey, int] = dataclasses.field(default_factory=dict)
    rates: dict[SeriesKey, float] = dataclasses.field(default_factory=dict)
    observed: dict[SeriesKey, Observed] = dataclasses.field(default_factory=dict)

    def record(self, totals: dict[SeriesKey, int], at: float) -> None:
        now = {key: Observed(value, at) for key, value in totals.items()}
        self.rates = rates_between(self.observed, now)
        self.observed = remember(self.observed, now)
        self.totals = totals

    def lose(self) -> None:
        """This read failed: no series until the next good one, whose rates span the gap."""
        self.totals = {}
        self.rates = {}


class InterconnectState:
    def __init__(self) -> None:
        self._ib = _Source()
        self._nvlink = _Source()
        self.saturated: set[tuple[str, str, str]] = set()
        """(device, port, counter file) of every PortCounters counter stuck at its maximum."""
        self.active: dict[tuple[str, str], bool] = {}
        self.read_errors: collections.Counter[str] = collections.Counter()

    def record_infiniband(self, reading: TreeReading, at: float) -> None:
        totals: dict[SeriesKey, int] = {}
        self.saturated = set()
        self.active = {}
        for port in reading.ports:
            labels = (port.device, port.port)
            for counter, value in port.totals.items():
                totals[(counter, labels)] = value
                if counter.saturates_at is not None and value >= counter.saturates_at:
                    self.saturated.add((port.device, port.port, counter.file))
            if port.active is not None:
                self.active[labels] = port.active
        self._ib.record(totals, at)
        self.read_errors[SYSFS_SOURCE] += len(reading.errors)

    def record_nvlink(self, gpus: Iterable[GpuNvlink], at: float) -> None:
        totals: dict[SeriesKey, int] = {
            (counter, (gpu.gpu, gpu.uuid)): value for gpu in gpus for counter, value in gpu.totals.items()
        }
        self._nvlink.record(totals, at)

    def nvlink_failed(self) -> None:
        self._nvlink.lose()
        self.read_errors[DCGM_SOURCE] += 1

    def totals(self) -> dict[SeriesKey, int]:
        return {**self._ib.totals, **self._nvlink.totals}

    def rates(self) -> dict[SeriesKey, float]:
        return {**self._ib.rates, **self._nvlink.rates}


class InterconnectCollector(Collector):
    """The state's families, every one described even with no series yet (a node without NVLink still
    says what it would publish)."""

    def __init__(self, state: InterconnectState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        totals, per_second = self._state.totals(), self._state.rates()
        for counter in (*IB_COUNTERS, *NVLINK_COUNTERS):
            labels = list(IB_LABELS if isinstance(counter, IbCounter) else NVLINK_LABELS)
            total = CounterMetricFamily(counter.total_name, counter.help, labels=labels)
            rate = GaugeMetricFamily(
                counter.rate_name, f"{counter.help} Per second, over the last interval.", labels=labels
            )
            for (which, values), count in sorted(totals.items(), key=_order):
                if which == counter:
                    total.add_metric(list(values), count)
            for (which, values), events_a_second in sorted(per_second.items(), key=_order):
                if which == counter:
                    rate.add_metric(list(values), events_a_second)
            yield total
            yield rate
        errors = CounterMetricFamily(
            READ_ERRORS,
            "Counters that could not be read, by source: a file of the InfiniBand tree (missing, unreadable "
            "or not a number), or a read of the dcgm-exporter (unreachable, not its text).",
            labels=["source"],
        )
        for source in READ_ERROR_SOURCES:
            errors.add_metric([source], self._state.read_errors[source])
        yield errors
        saturated = GaugeMetricFamily(
            IB_COUNTER_SATURATED,
            "1 for an InfiniBand PortCounters counter at its maximum, where it stops counting: its rate "
            "reads 0 whatever happens until it is reset.",
            labels=[*IB_LABELS, "counter"],
        )
        for device, port, name in sorted(self._state.saturated):
            saturated.add_metric([device, port, name], 1)
        yield saturated
        active = GaugeMetricFamily(
            IB_PORT_ACTIVE,
            "1 while the InfiniBand port's logical state is ACTIVE, else 0.",
            labels=list(IB_LABELS),
        )
        for (device, port), is_active in sorted(self._state.active.items()):
            active.add_metric([device, port], 1 if is_active else 0)
        yield active


def _order(item: tuple[SeriesKey, float]) -> tuple[str, ...]:
    """Series in label order: by device and port, or by GPU index and UUID."""
    return item[0][1]


def build_registry(state: InterconnectState) -> CollectorRegistry:
    """The exporter's registry: the interconnect families and `vk_provider_build_info`."""
    registry = CollectorRegistry(auto_describe=True)
    register_build_info(registry)
    registry.register(InterconnectCollector(state))
    return registry
