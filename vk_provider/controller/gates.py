"""Health gates: judge one step's interval from the routers' Prometheus counters.

The controller scrapes every router replica at the start and at the end of a step's interval and
subtracts; the difference, summed over replicas, is what happened during the interval on the side
being judged. Counters only grow, so a negative difference means a router restarted in between: the
interval is then not judged at all (NOT_ENOUGH_DATA), and starts over.

What counts as a failed request: an answer in one of the Offload's `errorStatuses` classes (5xx
unless told otherwise), or a proxy failure after the request went out (`upstream`,
`upstream_broken`). A refused connection that the router retried elsewhere is not a failed request
(the client never saw it), so the `connect` reason is left out.

While a step's weight sends traffic to both sides, the judged side's error rate is compared with the
other side's over the same interval (`vk_provider.controller.baseline`), as canary analysis compares
canary and baseline: a client that provokes 500s gets them from both sides alike, so they cannot
roll a healthy migration back. The absolute limits judge one-sided steps (weight 0 or 100), and a
two-sided step whose other side served too few requests to be a fair baseline.

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

from vk_provider.controller.baseline import exceeds_baseline
from vk_provider.controller.serving import other_side
from vk_provider.offload.plan import Verdict
from vk_provider.offload.spec import Gates, SevereGate

METRIC_PREFIX = "vk_provider_router_"
RETRIED_REASONS = frozenset({"connect"})


@dataclasses.dataclass(frozen=True)
class SideSample:
    """One route side's counters, summed over the routers scraped."""

    responses: float = 0.0
    by_class: tuple[tuple[str, float], ...] = ()
    """Responses by status class ("2xx", "5xx", ...), ascending; classes never seen are left out."""
    proxy_errors: float = 0.0
    buckets: tuple[tuple[float, float], ...] = ()
    """(upper bound in seconds, cumulative count), ascending; the last bound is +Inf."""

    def __add__(self, other: SideSample) -> SideSample:
        return SideSample(
            self.responses + other.responses,
            _merge_counts(self.by_class, other.by_class, 1.0),
            self.proxy_errors + other.proxy_errors,
            _merge_buckets(self.buckets, other.buckets, 1.0),
        )

    def minus(self, earlier: SideSample) -> SideSample | None:
        """What was counted since `earlier`, or None when a counter went down (a router restarted)."""
        difference = SideSample(
            self.responses - earlier.responses,
            _merge_counts(self.by_class, earlier.by_class, -1.0),
            self.proxy_errors - earlier.proxy_errors,
            _merge_buckets(self.buckets, earlier.buckets, -1.0),
        )
        counts = [difference.responses, difference.proxy_errors]
        counts.extend(count for _, count in difference.by_class)
        counts.extend(count for _, count in difference.buckets)
        return None if any(count < 0 for count in counts) else difference

    @property
    def requests(self) -> float:
        return self.responses + self.proxy_errors

    @property
    def server_errors(self) -> float:
        return self.of_class("5xx")

    def of_class(self, status_class: str) -> float:
        return sum(count for name, count in self.by_class if name == status_class)

    def failures(self, error_statuses: Iterable[str]) -> float:
        """Responses in the classes that count as errors, plus the relays that failed."""
        return sum(self.of_class(status_class) for status_class in set(error_statuses)) + self.proxy_errors


def _merge_counts(
    first: tuple[tuple[str, float], ...], second: tuple[tuple[str, float], ...], sign: float
) -> tuple[tuple[str, float], ...]:
    merged: dict[str, float] = dict(first)
    for name, count in second:
        merged[name] = merged.get(name, 0.0) + sign * count
    return tuple(sorted(merged.items()))


def _merge_buckets(
    first: tuple[tuple[float, float], ...], second: tuple[tuple[float, float], ...], sign: float
) -> tuple[tuple[float, float], ...]:
    merged: dict[float, float] = dict(first)
    for bound, count in second:
        merged[bound] = merged.get(bound, 0.0) + sign * count
    return tuple(sorted(merged.items()))


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
    baseline_error_rate_percent: float | None = None
    """The other side's error rate over the same interval, when the judged side was compared with it."""

    def as_status(self) -> Mapping[str, object]:
        baseline = self.baseline_error_rate_percent
        return {
            "verdict": self.verdict.value,
            "requests": self.requests,
            "errorRatePercent": round(self.error_rate_percent, 3),
            "baselineErrorRatePercent": None if baseline is None else round(baseline, 3),
            "p99Milliseconds": None if self.p99_ms is None else round(self.p99_ms, 1),
            "message": self.message,
        }


@dataclasses.dataclass(frozen=True)
class ErrorRates:
    """The judged side's failures, and the other side's when it is a fair baseline."""

    requests: int
    failures: float
    baseline_requests: int = 0
    baseline_failures: float = 0.0
    compared: bool = False

    @property
    def percent(self) -> float:
        return 100.0 * self.failures / self.requests if self.requests else 0.0

    @property
    def baseline_percent(self) -> float | None:
        if not self.compared:
            return None
        return 100.0 * self.baseline_failures / self.baseline_requests

    def above(self, absolute_percent: float, increase_percent: float) -> bool:
        """Beyond the limit: the increase over the baseline when compared, else the absolute rate."""
        if self.compared:
            return exceeds_baseline(
                self.failures, self.requests, self.baseline_failures, self.baseline_requests, increase_percent
            )
        return self.percent > absolute_percent and not self.shared_with_small_baseline(increase_percent)

    def shared_with_small_baseline(self, increase_percent: float) -> bool:
        """A baseline too small to judge against can still show that the failures are not the judged
        side's own: when it fails at least as much (beyond the margin), the absolute limit would
        punish the migration for errors both sides have, e.g. 500s a client provokes while a loaded
        window holds only a few baseline requests. It only ever spares; with no baseline request at
        all, or one that fails less, the absolute limit rules."""
        if self.compared or self.baseline_requests <= 0 or self.requests <= 0:
            return False
        rate = self.failures / self.requests
        baseline_rate = self.baseline_failures / self.baseline_requests
        return rate - baseline_rate - increase_percent / 100.0 * (1.0 - baseline_rate) <= 0


def error_rates(
    judged: SideSample, baseline: SideSample | None, gates: Gates, min_baseline_requests: int
) -> ErrorRates:
    """Counted by the Offload's error statuses; a baseline with fewer requests than the gate's
    minimum is too noisy to judge against (and could hide a failure), so the absolute limit rules,
    unless that baseline fails at least as much (`ErrorRates.shared_with_small_baseline`)."""
    requests = int(judged.requests)
    failures = judged.failures(gates.error_statuses)
    if baseline is None or not gates.compare_with_other_side:
        return ErrorRates(requests, failures)
    baseline_requests = int(baseline.requests)
    baseline_failures = baseline.failures(gates.error_statuses)
    compared = baseline_requests >= max(1, min_baseline_requests)
    return ErrorRates(requests, failures, baseline_requests, baseline_failures, compared=compared)


def _rates_message(rates: ErrorRates, side: str) -> str:
    measured = f"{rates.requests} requests, {rates.percent:.2f}% errors"
    if rates.compared:
        measured += f" ({other_side(side)} side {rates.baseline_percent:.2f}% over {rates.baseline_requests})"
    return measured


def judge_severe(
    window: SideSample | None, gates: Gates, side: str, baseline: SideSample | None = None
) -> Judgement | None:
    """A SEVERE judgement when the window's error rate reaches the severe threshold, else None.

    `baseline` is the other side over the same window, while the step sends it traffic too."""
    severe: SevereGate = gates.severe
    if window is None or not severe.enabled:
        return None
    if int(window.requests) < severe.min_requests or window.requests <= 0:
        return None
    rates = error_rates(window, baseline, gates, severe.min_requests)
    if rates.compared:
        if not rates.above(severe.error_rate_percent, severe.error_rate_increase_percent):
            return None
        threshold = (
            f"fails more than {severe.error_rate_increase_percent:g}% of what the {other_side(side)} side "
            "serves: severe"
        )
    else:
        if rates.percent < severe.error_rate_percent or rates.shared_with_small_baseline(
            severe.error_rate_increase_percent
        ):
            return None
        threshold = f"at or above the severe {severe.error_rate_percent:g}%"
    p99 = quantile_seconds(window.buckets, 0.99)
    return Judgement(
        Verdict.SEVERE,
        f"{side} side: {_rates_message(rates, side)}: {threshold}",
        rates.requests,
        rates.percent,
        None if p99 is None else p99 * 1000.0,
        rates.baseline_percent,
    )


def judge(
    interval: SideSample | None, gates: Gates, side: str, baseline: SideSample | None = None
) -> Judgement:
    """The verdict on one interval of the judged side (and `baseline`, the other side's, if it served)."""
    severe = judge_severe(interval, gates, side, baseline)
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
    rates = error_rates(interval, baseline, gates, gates.min_requests_per_interval)
    p99 = quantile_seconds(interval.buckets, 0.99)
    p99_ms = None if p99 is None else p99 * 1000.0
    measured = f"{_rates_message(rates, side)}, p99 " + ("n/a" if p99_ms is None else f"{p99_ms:.0f} ms")
    problems = []
    if rates.above(gates.max_error_rate_percent, gates.max_error_rate_increase_percent):
        if rates.compared:
            problems.append(
                f"fails more than {gates.max_error_rate_increase_percent:g}% of what the "
                f"{other_side(side)} side serves"
            )
        else:
            problems.append(f"error rate above {gates.max_error_rate_percent:g}%")
    if p99_ms is not None and p99_ms > gates.max_p99_latency_ms:
        problems.append(f"p99 above {gates.max_p99_latency_ms} ms")
    verdict = Verdict.UNHEALTHY if problems else Verdict.HEALTHY
    message = f"{side} side: {measured}" + (f": {', '.join(problems)}" if problems else "")
    return Judgement(verdict, message, requests, rates.percent, p99_ms, rates.baseline_percent)
