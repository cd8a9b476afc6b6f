"""The node daemon's own Prometheus metrics, served on the kubelet API's `/metrics`.

They answer the questions an operator asks of a virtual node: is work piling up (queue depth), how
long does a pod take to reconcile and how often does that fail, and is the backend slow, failing or
down (provider call latency, errors by type, availability). The resource usage of pods is elsewhere
(`vk_provider.kubelet.stats`), because the kubelet serves it on `/metrics/resource` with its own names.

Every `DaemonMetrics` has its own `CollectorRegistry`, never prometheus-client's global one: two
daemons in one process (tests do that) must not share or collide on series.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vk_provider.kit.apibudget import ApiBudget
from vk_provider.kit.apibudgetmetrics import ApiBudgetCollector
from vk_provider.kit.buildinfo import register_build_info
from vk_provider.node.admission import FIXED_REFUSALS

NAMESPACE = "vk_provider"

_PROVIDER_CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Up to a minute: remote providers (GPU clouds) can take tens of seconds to answer a create."""


@dataclasses.dataclass(frozen=True)
class CertificateTimes:
    """The serving certificate's clock, as the alerts need it (None: not known or not applicable)."""

    expires: datetime | None = None
    """When the certificate in service expires (None: none in service)."""
    renews: datetime | None = None
    """When the node replaces it (None: the node does not renew it, an operator's files)."""
    requesting_since: datetime | None = None
    """Since when the node has asked the cluster's signer for a certificate it has not got."""


class DaemonMetrics:
    """The node's counters and histograms, with one small method per thing the node code records."""

    def __init__(self, node_name: str | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        register_build_info(self.registry)
        if node_name is not None:
            # The info idiom again: the node's name, which no other series of ours carries (they are
            # told apart by the scrape's `instance`), for dashboards to pick a node by name.
            Gauge(
                "node_info",
                "The virtual node this daemon runs or stands by for (always 1).",
                ["node"],
                namespace=NAMESPACE,
                registry=self.registry,
            ).labels(node_name).set(1)
        self._queue_depth = Gauge(
            "pod_queue_depth",
            "Pods waiting in the work queue for a reconcile.",
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._queue_depth.set_function(lambda: 0.0)  # until the node tells where its queue is
        self._reconcile_seconds = Histogram(
            "reconcile_duration_seconds",
            "Time taken by one reconcile of one pod.",
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._reconciles = Counter(
            "reconciles",
            "Reconciles of pods, by result (success or failure).",
            ["result"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._provider_call_seconds = Histogram(
            "provider_call_duration_seconds",
            "Time taken by calls to the provider, by operation (create, delete, get, list, ...).",
            ["operation"],
            namespace=NAMESPACE,
            registry=self.registry,
            buckets=_PROVIDER_CALL_BUCKETS,
        )
        self._provider_call_errors = Counter(
            "provider_call_errors",
            "Provider calls that raised, by operation and error type.",
            ["operation", "error"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._provider_available = Gauge(
            "provider_available",
            "1 while the provider's health check passes, 0 otherwise.",
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._pod_cost = Counter(
            "pod_cost_usd",
            "Estimated cost of placed pods at their provider's list price per hour, while running.",
            ["namespace", "pod", "provider"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._admission_refusals = Counter(
            "pod_admission_refusals",
            "Pods the node refused before creating anything at the provider, by reason (OutOfcpu, "
            "OutOfBudget, InvalidPlacement, ...) and check (resources, pods-ceiling, spend-ceiling, "
            "placement).",
            ["reason", "check"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._provider_pod_events = Counter(
            "provider_pod_events",
            "Events a provider posted on pods, by type and reason (NoCapacity: a placement refused and "
            "the next one tried; ProviderRefused: a chain member refused the pod).",
            ["type", "reason"],
            namespace=NAMESPACE,
            registry=self.registry,
        )
        for result in ("success", "failure"):
            self._reconciles.labels(result=result)  # both series exist from the start, at 0
        # At 0 from the start too, so that `increase()` sees the first OutOfBudget refusal (a series
        # that first appears at 1 has no increase); `OutOf<resource>` ones appear with their resource.
        for reason, check in FIXED_REFUSALS:
            self._admission_refusals.labels(reason=reason, check=check)
        self._leader = Gauge(
            "node_leader",
            "1 while this replica holds the node's leader Lease and runs the node, 0 as a standby.",
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._leader_transitions = Counter(
            "node_leader_transitions",
            "Times this replica became the node's leader.",
            namespace=NAMESPACE,
            registry=self.registry,
        )
        self._takeover_seconds = Gauge(
            "node_takeover_duration_seconds",
            "From taking the leader Lease to the node Ready with its provider's workloads adopted, "
            "at the last takeover.",
            namespace=NAMESPACE,
            registry=self.registry,
        )

    def set_api_budget_source(self, budget: ApiBudget) -> None:
        """Report the API client's pacing (its 429s, its pace, its waits) at each scrape."""
        self.registry.register(ApiBudgetCollector(budget, NAMESPACE))

    def set_serving_certificate_source(
        self,
        state: Callable[[], tuple[str, bool]],
        refused_handshakes: Callable[[], int],
        times: Callable[[], CertificateTimes] = CertificateTimes,
    ) -> None:
        """Report the serving certificate's state (reason, working), refused handshakes and its
        expiry, renewal and outstanding request at each scrape."""
        self.registry.register(_ServingCertificateCollector(state, refused_handshakes, times))

    def set_queue_depth_source(self, depth: Callable[[], int]) -> None:
        """Read the queue depth from `depth` at each scrape (a callback: the queue stays the truth)."""
        self._queue_depth.set_function(lambda: float(depth()))

    def observe_reconcile(self, seconds: float, ok: bool) -> None:
        self._reconcile_seconds.observe(seconds)
        self._reconciles.labels(result="success" if ok else "failure").inc()

    def add_pod_cost(self, namespace: str, pod: str, provider: str, dollars: float) -> None:
        if dollars > 0:
            self._pod_cost.labels(namespace=namespace, pod=pod, provider=provider).inc(dollars)

    def forget_pod_cost(self, namespace: str, pod: str, provider: str) -> None:
        """Drop a deleted pod's series, so the registry does not grow with every pod ever placed."""
        with contextlib.suppress(KeyError):
            self._pod_cost.remove(namespace, pod, provider)

    def count_provider_pod_event(self, type: str, reason: str) -> None:
        self._provider_pod_events.labels(type=type, reason=reason).inc()

    def count_admission_refusal(self, reason: str, check: str) -> None:
        self._admission_refusals.labels(reason=reason, check=check).inc()

    def set_leader(self, leading: bool) -> None:
        if leading:
            self._leader_transitions.inc()
        self._leader.set(1.0 if leading else 0.0)

    def observe_takeover(self, seconds: float) -> None:
        self._takeover_seconds.set(seconds)

    def set_provider_available(self, available: bool) -> None:
        self._provider_available.set(1.0 if available else 0.0)

    @contextlib.asynccontextmanager
    async def time_provider_call(self, operation: str) -> AsyncIterator[None]:
        """Record the latency of the provider call made inside, and its error type if it raises.

        A cancelled call (BaseException) is neither timed nor counted: it tells nothing about the provider.
        """
        started = time.perf_counter()
        try:
            yield
        except Exception as error:
            self._provider_call_seconds.labels(operation=operation).observe(time.perf_counter() - started)
            self._provider_call_errors.labels(operation=operation, error=type(error).__name__).inc()
            raise
        self._provider_call_seconds.labels(operation=operation).observe(time.perf_counter() - started)

    def exposition(self) -> bytes:
        """The registry in the classic Prometheus text format (0.0.4), which every agent reads."""
        return generate_latest(self.registry)


class _ServingCertificateCollector(Collector):
    """The serving certificate as the ServingCertificate condition says it, read at scrape time: one
    series, labelled with the reason, 1 while the kubelet API serves a certificate nobody refused."""

    def __init__(
        self,
        state: Callable[[], tuple[str, bool]],
        refused: Callable[[], int],
        times: Callable[[], CertificateTimes],
    ) -> None:
        self._state = state
        self._refused = refused
        self._times = times

    def collect(self) -> Iterator[Metric]:
        reason, working = self._state()
        gauge = GaugeMetricFamily(
            f"{NAMESPACE}_serving_certificate_working",
            "1 while the kubelet API serves a certificate (issued, from files, or self-signed) that no "
            "client has refused; 0 while it waits for one, its files are broken, or clients refuse it. "
            "The label is the ServingCertificate condition's reason.",
            labels=["reason"],
        )
        gauge.add_metric([reason], 1.0 if working else 0.0)
        yield gauge
        yield CounterMetricFamily(
            f"{NAMESPACE}_serving_certificate_refused_handshakes",
            "TLS handshakes on the kubelet port that the client ended by refusing our certificate "
            "(unknown CA, bad certificate): the apiserver verifies kubelet certificates, or a client "
            "lacks the cluster CA.",
            value=self._refused(),
        )
        # Each only while it means something: an absent series is not a timestamp of 0 (1970), which
        # an alert on "expires within a week" would take for long expired.
        times = self._times()
        for name, moment, text in (
            ("expiry", times.expires, "When the serving certificate in service expires."),
            (
                "renewal",
                times.renews,
                "When the node replaces the serving certificate in service (absent for an operator's "
                "files, which the node does not renew).",
            ),
            (
                "requesting_since",
                times.requesting_since,
                "Since when the node has asked the cluster's kubelet-serving signer for a certificate it "
                "has not got (across its retries: a CSR left pending, denied, or failing).",
            ),
        ):
            if moment is not None:
                yield GaugeMetricFamily(
                    f"{NAMESPACE}_serving_certificate_{name}_timestamp_seconds",
                    text,
                    value=moment.timestamp(),
                )
