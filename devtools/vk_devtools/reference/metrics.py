"""docs/reference/metrics.md: every Prometheus metric of every component, from its registry.

Each component's metrics objects are built as the component builds them, with every optional source
attached (the API budget, the serving certificate with all its times), and their collectors are read:
name, type, label names and help come from the very objects that serve `/metrics`, so a metric added
to the code is on the page at the next regeneration, and one removed is gone.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from vk_devtools.reference import pages, rendering
from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.interconnect.collector import InterconnectState, build_registry
from vk_provider.kit.apibudget import ApiBudget
from vk_provider.kubelet.stats import ContainerSample, PodSample, render_resource_metrics
from vk_provider.node.metrics import CertificateTimes, DaemonMetrics
from vk_provider.policy.metrics import PolicyMetrics
from vk_provider.provider import PodRef
from vk_provider.router.metrics import NAMESPACE as ROUTER_NAMESPACE
from vk_provider.router.metrics import RouterMetrics
from vk_provider.router.proxy import ProxySettings
from vk_provider.router.sidecounts import described_families
from vk_provider.router.workerprotocol import WorkerConfig
from vk_provider.router.workers import Supervisor
from vk_provider.xds.server import XdsServer
from vk_provider.xds.status import metrics_registry

MODULE = "vk_devtools.reference.metrics"

_SAMPLE_SUFFIX_LABELS = frozenset({"le", "quantile"})
"""Labels a histogram's or summary's samples carry for their buckets, not the metric's own labels."""


@dataclasses.dataclass(frozen=True, order=True)
class Family:
    name: str
    """As a query names it: a counter's `_total` included, a histogram's base name."""
    type: str
    labels: tuple[str, ...]
    help: str


@dataclasses.dataclass(frozen=True)
class Source:
    component: str
    where: str
    """Which endpoint serves them, and when."""
    families: Callable[[], list[Family]]


def registry_families(registry: CollectorRegistry) -> list[Family]:
    """Every family `registry` holds, labelled ones without any series yet included.

    A labelled metric with no series is collected as a family without samples, which says nothing of
    its labels: those come from the collector itself (`_labelnames`, which prometheus-client keeps on
    its metric objects and on the families a custom collector builds)."""
    found: dict[str, Family] = {}
    for collector in list(registry._collector_to_names):
        names = tuple(collector._labelnames) if isinstance(collector, MetricWrapperBase) else None
        for family in metric_families(collector.collect(), labels=names):
            found[family.name] = family
    return sorted(found.values())


def metric_families(metrics: Iterable[Metric], *, labels: tuple[str, ...] | None = None) -> list[Family]:
    """Each of `metrics` as a Family: its labels are `labels` if given, else those the family keeps
    (`_labelnames`), then any other its samples carry."""
    families = []
    for metric in metrics:
        own = labels if labels is not None else tuple(getattr(metric, "_labelnames", ()))
        seen = {key for sample in metric.samples for key in sample.labels} - _SAMPLE_SUFFIX_LABELS
        name = f"{metric.name}_total" if metric.type == "counter" else metric.name
        families.append(Family(name, metric.type, (*own, *sorted(seen - set(own))), metric.documentation))
    return families


def _node() -> list[Family]:
    metrics = DaemonMetrics(node_name="node")
    metrics.set_api_budget_source(ApiBudget())
    now = datetime(2026, 1, 1, tzinfo=UTC)
    metrics.set_serving_certificate_source(
        lambda: ("Issued", True), lambda: 0, lambda: CertificateTimes(now, now, now)
    )
    return registry_families(metrics.registry)


def _node_resources() -> list[Family]:
    """The kubelet's resource metrics, as the node writes them by hand (kubelet.stats), read back
    through prometheus-client's parser."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    container = ContainerSample("c", now, 1, 1, now)
    text = render_resource_metrics([PodSample(PodRef("ns", "pod", "uid"), now, (container,))], now)
    families = []
    for metric in text_string_to_metric_families(text):
        labels = sorted({key for sample in metric.samples for key in sample.labels})
        name = f"{metric.name}_total" if metric.type == "counter" else metric.name
        families.append(Family(name, metric.type, tuple(labels), metric.documentation))
    return sorted(families)


def _router() -> list[Family]:
    # The per-side series are written as text (`router.sidecounts`), outside the registry.
    written = metric_families(described_families(ROUTER_NAMESPACE))
    return sorted([*registry_families(RouterMetrics(build_info=True).registry), *written])


def _router_supervisor() -> list[Family]:
    supervisor = Supervisor(WorkerConfig("127.0.0.1", 0, ProxySettings(), 1.0), 2)
    return registry_families(supervisor.registry)


def _xds() -> list[Family]:
    return registry_families(metrics_registry(XdsServer()))


def _controller() -> list[Family]:
    metrics = ControllerMetrics()
    metrics.set_api_budget_source(ApiBudget())
    return registry_families(metrics.registry)


def _policy() -> list[Family]:
    registry = CollectorRegistry()
    PolicyMetrics(registry)
    return registry_families(registry)


def _interconnect() -> list[Family]:
    return registry_families(build_registry(InterconnectState()))


SOURCES = (
    Source(
        "Virtual node (`vk-provider node`)",
        "the kubelet API's `/metrics` (HTTPS on the kubelet port, authorized as `get nodes/metrics`)",
        _node,
    ),
    Source(
        "Virtual node: pod resource usage",
        "the kubelet API's `/metrics/resource`, with the kubelet's own names, for metrics-server "
        "(`kubectl top`, the HorizontalPodAutoscaler)",
        _node_resources,
    ),
    Source("Router (`vk-provider router`)", "the router's admin listener, `/-/metrics`", _router),
    Source(
        "Router worker supervisor",
        "the same `/-/metrics`, with `--worker-processes` 2 or more: the supervisor's own series beside the "
        "workers' series summed",
        _router_supervisor,
    ),
    Source("xDS server (`vk-provider xds`)", "the status listener's `/-/metrics`", _xds),
    Source(
        "Migration controller (`vk-provider controller`)",
        "the controller's metrics listener, `/metrics`",
        _controller,
    ),
    Source(
        "OffloadPolicy (in the controller)",
        "the controller's `/metrics`, in the same registry",
        _policy,
    ),
    Source(
        "Interconnect exporter (`vk-provider interconnect-exporter`)",
        "`/metrics` on its `--port` (9402), one exporter a GPU node "
        "([the interconnect exporter](../operations/interconnect-exporter.md))",
        _interconnect,
    ),
)


def all_families() -> Iterator[tuple[Source, Family]]:
    for source in SOURCES:
        for family in source.families():
            yield source, family


def render() -> str:
    lines = [
        "# Metrics reference",
        "",
        rendering.generated_note(MODULE, "each component's Prometheus registry"),
        "",
        "Every metric each component serves, as its registry describes it. A counter is named as a query "
        "names it (with `_total`; prometheus-client also serves a `_created` series beside each counter "
        "and histogram); a histogram's series are `<name>_bucket` (with `le`), `<name>_sum` and "
        "`<name>_count`. Series labelled by pod, Offload or policy appear once there is one.",
        "",
    ]
    for source in SOURCES:
        rows = [
            (f"`{f.name}`", f.type, ", ".join(f"`{label}`" for label in f.labels), f.help)
            for f in source.families()
        ]
        lines += [f"## {source.component}", "", f"Served on {source.where}.", ""]
        lines += [*rendering.table(("Metric", "Type", "Labels", "Help"), rows), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    return pages.main_of(MODULE, argv)


if __name__ == "__main__":
    sys.exit(main())
