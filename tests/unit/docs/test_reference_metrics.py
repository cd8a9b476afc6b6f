"""docs/reference/metrics.md is every metric the components' registries hold."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from vk_devtools.reference import metrics, pages
from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.router.metrics import RouterMetrics

PAGE = pages.page_of(metrics.MODULE)


def test_the_committed_page_is_what_the_registries_hold() -> None:
    assert pages.is_current(PAGE), PAGE.stale_line()


class _Custom(Collector):
    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("toy_depth", "How deep.", labels=["pool"])


def test_labels_are_read_from_metrics_without_any_series_yet() -> None:
    registry = CollectorRegistry()
    Counter("toy_calls", "Calls.", ["operation", "error"], registry=registry)
    registry.register(_Custom())
    families = {family.name: family for family in metrics.registry_families(registry)}
    assert families["toy_calls_total"] == metrics.Family(
        "toy_calls_total", "counter", ("operation", "error"), "Calls."
    )
    assert families["toy_depth"] == metrics.Family("toy_depth", "gauge", ("pool",), "How deep.")


def _exposed(registry: CollectorRegistry) -> set[str]:
    """The family names a scrape of `registry` shows (counters as the text parser names them), less the
    `_created` companions the page mentions once for all."""
    text = generate_latest(registry).decode()
    names = {family.name for family in text_string_to_metric_families(text)}
    return {name for name in names if not name.endswith("_created")}


def test_every_family_a_scrape_shows_is_on_the_page() -> None:
    page = metrics.render()
    for registry in (DaemonMetrics("node").registry, RouterMetrics().registry, ControllerMetrics().registry):
        for name in _exposed(registry):
            assert f"`{name}`" in page or f"`{name}_total`" in page, f"{name} is missing from the page"


def test_every_component_has_metrics_and_no_name_is_listed_twice_in_one() -> None:
    for source in metrics.SOURCES:
        names = [family.name for family in source.families()]
        assert names, source.component
        assert len(names) == len(set(names)), source.component
