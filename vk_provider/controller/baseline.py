"""Is one side's error rate worse than the other side's, over the same interval, beyond chance?

While a step sends traffic to both sides, the side a migration moves traffic to is judged against
the side it moves traffic from, as canary analysis judges the canary against a baseline running
beside it (Kayenta, Flagger's A/B gates). Errors that a client provokes, or that a dependency both
sides share causes, land on both sides in the proportion of the weight, so they raise both rates
alike and never count against the migration; errors of the judged side's own making raise its rate
alone.

The margin is a share of the requests the baseline serves well, not of all requests: with a
baseline failing 67% of its requests (a client provoking them), a judged side that fails everything
fails 100% of what the baseline serves, the same as with a clean baseline, so a client cannot soften
the severe gate either. With a clean baseline, the margin is plain percentage points.

The router splits requests at random, so two healthy sides' error rates differ by chance (a few
points when a client provokes many errors over a short window). The comparison is therefore a
one-sided two-proportion z-test against the margin: the judged side fails only when its rate
exceeds the baseline's by more than the margin AND by more than SIGNIFICANCE_Z standard errors of
that difference. A side that answers every request with 500 while the other answers most of them
stands out after a few dozen requests; a side just as bad as its baseline never does.
"""

from __future__ import annotations

import math

SIGNIFICANCE_Z = 3.0
"""Standard errors an excess must clear: a healthy side fails by chance in about 1 of 740 checks."""


def exceeds_baseline(
    failures: float,
    requests: float,
    baseline_failures: float,
    baseline_requests: float,
    margin_percent: float,
) -> bool:
    """True when the judged side fails more than `margin_percent` of the requests the baseline serves."""
    if requests <= 0 or baseline_requests <= 0:
        return False
    rate = failures / requests
    baseline_rate = baseline_failures / baseline_requests
    excess = rate - baseline_rate - margin_percent / 100.0 * (1.0 - baseline_rate)
    if excess <= 0:
        return False
    pooled = (failures + baseline_failures) / (requests + baseline_requests)
    standard_error = math.sqrt(pooled * (1.0 - pooled) * (1.0 / requests + 1.0 / baseline_requests))
    return excess > SIGNIFICANCE_Z * standard_error
