"""Health gates: judge one step's interval from the routers' Prometheus counters.

The controller scrapes every router replica at the start and at the end of a step's interval and
subtracts; the difference, summed over replicas, is what happened during the interval on the side
being judged. Counters only grow, so a negative difference means a router restarted in between: the
interval is then not judged at all (NOT_ENOUGH_DATA), and starts over.

What counts as a failed request: a 5xx answer, or a proxy failure after the request went out
(`upstream`, `upstream_broken`). A refused connection that the router retried elsewhere is not a
failed request (the client never saw it), so the `connect` reason is left out.

Besides the tolerant gates (a failing interval is held up to `failuresBeforeRollback` times), the
severe gate is checked over short windows inside the interval: an error rate at or above its
threshold over at least its minimum of requests rolls back at once (`Verdict.SEVERE`). A side
answering 500 to half its requests is not going to get better by waiting three intervals.

p99 is interpolated inside the histogram bucket that holds it, as Prometheus' histogram_quantile
does; the bucket edges alone would overstate it by up to 2.5x.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

from prometheus_client.parser import text_string_to_metric_families

from vk_provider.offload.plan import Verdict
from vk_provider.offload.spec import Gates, SevereGate

METRIC_PREFIX = "vk_provider_router_"
RETRIED_REASONS = frozenset({"connect"})


@dataclasses.dataclass(frozen=True)
class SideSample:
    """One route side's counters, summed over the routers scraped."""

    responses: float = 0.0
    server_errors: float = 0.0
    proxy_errors: float = 0.0
    buckets: tuple[tuple[float, float], ...] = ()
    """(upper bound in seconds, cumulative count), ascending; the last bound is +Inf."""

    def __add__(self, other: SideSample) -> SideSample:
        return SideSample(
            self.responses + other.responses,
            self.server_errors + other.server_errors,
            self.proxy_errors + other.proxy_errors,
            _merge_buckets(self.buckets, other.buckets, 1.0),
        )

    def minus(self, earlier: SideSample) -> SideSample | None:
        """What was counted since `earlier`, or None when a counter went down (a router restarted)."""
        difference = SideSample(
            self.responses - earlier.responses,
            self.server_errors - earlier.server_errors,
            self.proxy_errors - earlier.proxy_errors,
            _merge_buckets(self.buckets, earlier.buckets, -1.0),
        )
        counts = [difference.responses, difference.server_errors, difference.proxy_errors]
        counts.extend(count for _, count in difference.buckets)
        return None if any(count < 0 for count in counts) else difference

    @property
    def requests(self) -> float:
        return self.responses + self.proxy_errors

    @property
    def failures(self) -> float:
        return self.server_errors + self.proxy_errors


def _merge_buckets(
    first: tuple[tuple[float, float], ...], second: tuple[tuple[float, float], ...], sign: float
) -> tuple[tuple[float, float], ...]:
    merged: dict[float, float] = dict(first)
    for bound, count in second:
        merged[bound] = merged.get(bound, 0.0) + sign * count
    return tuple(sorted(merged.items()))


def parse_side_sample(text: str, namespace: str, name: str, side: str) -> SideSample:
    """The counters of one route side in one router's /-/metrics exposition."""
    wanted = {"namespace": namespace, "name": name, "side": side}
    responses = server_errors = proxy_errors = 0.0
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(METRIC_PREFIX):
            continue
        for sample in family.samples:
            labels = sample.labels
            if any(labels.get(key) != value for key, value in wanted.items()):
                continue
            if sample.name == f"{METRIC_PREFIX}requests_total":
                responses += sample.value
                if labels.get("code") == "5xx":
                    server_errors += sample.value
            elif sample.name == f"{METRIC_PREFIX}errors_total":
                if labels.get("reason") not in RETRIED_REASONS:
                    proxy_errors += sample.value
            elif sample.name == f"{METRIC_PREFIX}response_header_seconds_bucket":
                bound = float(labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return SideSample(responses, server_errors, proxy_errors, tuple(sorted(buckets.items())))


def total(samples: Iterable[SideSample]) -> SideSample:
    summed = SideSample()
    for sample in samples:
        summed = summed + sample
    return summed


def quantile_seconds(buckets: tuple[tuple[float, float], ...], quantile: float) -> float | None:
    """The quantile's estimate from cumulative buckets; None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = quantile * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound  # beyond the last finite bucket: its edge is all we know
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound


@dataclasses.dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    message: str
    requests: int = 0
    error_rate_percent: float = 0.0
    p99_ms: float | None = None

    def as_status(self) -> Mapping[str, object]:
        return {
            "verdict": self.verdict.value,
            "requests": self.requests,
            "errorRatePercent": round(self.error_rate_percent, 3),
            "p99Milliseconds": None if self.p99_ms is None else round(self.p99_ms, 1),
            "message": self.message,
        }


def judge_severe(window: SideSample | None, severe: SevereGate, side: str) -> Judgement | None:
    """A SEVERE judgement when the window's error rate reaches the severe threshold, else None."""
    if window is None or not severe.enabled:
        return None
    requests = int(window.requests)
    if requests < severe.min_requests or requests <= 0:
        return None
    error_rate = 100.0 * window.failures / requests
    if error_rate < severe.error_rate_percent:
        return None
    p99 = quantile_seconds(window.buckets, 0.99)
    return Judgement(
        Verdict.SEVERE,
        f"{side} side: {requests} requests, {error_rate:.2f}% errors: at or above the severe "
        f"{severe.error_rate_percent:g}%",
        requests,
        error_rate,
        None if p99 is None else p99 * 1000.0,
    )


def judge(interval: SideSample | None, gates: Gates, side: str) -> Judgement:
    """The verdict on one interval of the judged side."""
    severe = judge_severe(interval, gates.severe, side)
    if severe is not None:
        return severe
    if interval is None:
        return Judgement(Verdict.NOT_ENOUGH_DATA, "a router restarted during the interval; measuring again")
    requests = int(interval.requests)
    if requests < gates.min_requests_per_interval:
        return Judgement(
            Verdict.NOT_ENOUGH_DATA,
            f"{requests} requests on the {side} side, "
            f"fewer than the {gates.min_requests_per_interval} needed",
            requests,
        )
    error_rate = 100.0 * interval.failures / requests if requests else 0.0
    p99 = quantile_seconds(interval.buckets, 0.99)
    p99_ms = None if p99 is None else p99 * 1000.0
    measured = f"{requests} requests, {error_rate:.2f}% errors, p99 " + (
        "n/a" if p99_ms is None else f"{p99_ms:.0f} ms"
    )
    problems = []
    if error_rate > gates.max_error_rate_percent:
        problems.append(f"error rate above {gates.max_error_rate_percent:g}%")
    if p99_ms is not None and p99_ms > gates.max_p99_latency_ms:
        problems.append(f"p99 above {gates.max_p99_latency_ms} ms")
    if problems:
        return Judgement(
            Verdict.UNHEALTHY, f"{side} side: {measured}: {', '.join(problems)}", requests, error_rate, p99_ms
        )
    return Judgement(Verdict.HEALTHY, f"{side} side: {measured}", requests, error_rate, p99_ms)
