"""The gauge of away endpoints kept on active checks, as a new table of many routes updates it."""

from __future__ import annotations

import pytest

from vk_provider.router import RouterMetrics

pytestmark = pytest.mark.unit


def _kept_lines(metrics: RouterMetrics) -> list[str]:
    text = metrics.exposition().decode()
    return sorted(line for line in text.splitlines() if line.startswith("vk_provider_router_endpoints_kept"))


def test_a_new_table_leaves_the_series_a_fresh_router_would_show(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = RouterMetrics()
    metrics.kept_on_active_checks({("ml", f"m{number}"): 0 for number in range(1000)} | {("ml", "gone"): 2})
    made: list[tuple[str, ...]] = []
    labels = metrics._kept.labels

    def recording(*values: str) -> object:
        made.append(values)
        return labels(*values)

    monkeypatch.setattr(metrics._kept, "labels", recording)
    after = {("ml", f"m{number}"): 0 for number in range(1000)} | {("ml", "m7"): 1}
    metrics.kept_on_active_checks(after)

    fresh = RouterMetrics()
    fresh.kept_on_active_checks(after)
    assert _kept_lines(metrics) == _kept_lines(fresh)
    assert 'vk_provider_router_endpoints_kept_on_active_checks{name="m7",namespace="ml"} 1.0' in _kept_lines(
        metrics
    )
    assert made == [("ml", "m7")]  # only the series that changed, not a thousand made anew
