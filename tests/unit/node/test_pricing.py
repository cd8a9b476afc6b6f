"""A pod's price from its provider before it is placed: asked with what the pod's object says, counted by
the spend ceiling and metered by the cost metric; a provider that cannot or will not say leaves it unknown.
"""

from __future__ import annotations

import logging
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.unit.node.test_admission import RecordingEvents, pod, reconciler_for, status_patches
from tests.unit.node.test_placement_record import ManualClock
from tests.unit.node.test_pod_updates import CachedPods, RecordingApi
from vk_provider.kit.placement.cost import CostMeter
from vk_provider.node.admission import no_quote
from vk_provider.node.costs import PodCosts
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.node.pricing import provider_quote
from vk_provider.provider import Placement, PodRef, PodState, PricedPod, ProviderContext
from vk_providers.mock import MockProvider

pytestmark = pytest.mark.unit

GPU = "nvidia.com/gpu"


class PricedMock(MockProvider):
    """A mock that prices its pods as a remote cluster would: $2.50 an hour per GPU requested."""

    def __init__(self, context: ProviderContext, asked: list[PricedPod] | None = None) -> None:
        super().__init__(context)
        self.asked = asked if asked is not None else []

    def pod_price_per_hour(self, pod: PricedPod) -> float | None:
        self.asked.append(pod)
        return 2.5 * float(pod.requests.get(GPU, 0))


def test_the_provider_is_asked_with_the_pods_annotations_and_requests(tmp_path: Path) -> None:
    provider = PricedMock(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    quote = provider_quote(provider)
    priced = pod("a", requests={GPU: "2", "cpu": "500m"}, annotations={"team": "ml"})
    assert quote(priced) == 5.0
    (asked,) = provider.asked
    assert (asked.ref.namespace, asked.ref.name, asked.ref.uid) == ("ns", "pod-a", "a")
    assert asked.annotations == {"team": "ml"}
    assert asked.requests[GPU] == 2
    assert asked.requests["cpu"] == Fraction(1, 2)


class Unpriced:
    pass


class Broken:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def pod_price_per_hour(self, pod: PricedPod) -> float | None:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[no-any-return]


def test_a_provider_that_prices_nothing_leaves_every_price_unknown() -> None:
    assert provider_quote(Unpriced()) is no_quote


@pytest.mark.parametrize("answer", [RuntimeError("bug"), float("nan"), float("inf"), -1.0, "2.0"])
def test_a_price_that_fails_or_makes_no_sense_is_unknown_not_free(
    answer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    assert provider_quote(Broken(answer))(pod("a")) is None
    assert "its price is unknown" in caplog.text


async def test_a_provider_priced_pod_counts_against_the_spend_ceiling_and_in_the_cost_metric(
    tmp_path: Path,
) -> None:
    api, events, metrics, pods = RecordingApi(), RecordingEvents(), DaemonMetrics(), CachedPods()
    provider = PricedMock(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    reconciler, _ = reconciler_for(
        tmp_path, pods, api=api, events=events, metrics=metrics, provider=provider, max_spend_per_hour=6.0
    )
    clock = ManualClock()
    reconciler._costs = PodCosts(  # a clock the test moves
        metrics, CostMeter(clock), quote=provider_quote(provider), provider_name="mock"
    )
    pods.objects["a"] = pod("a", requests={GPU: "2"})  # $5/h
    pods.objects["b"] = pod("b", requests={GPU: "1"})  # $2.50/h: $7.50 in all, past $6
    await reconciler.reconcile("a")
    await reconciler.reconcile("b")
    assert [state.ref.uid for state in await provider.list_pods()] == ["a"]
    refused = status_patches(api)[-1]
    assert refused["reason"] == "OutOfBudget"
    assert "its pods cost $5.00/h already, and this pod may cost $2.50/h" in refused["message"]

    clock.now = 1800.0  # half an hour running at $5/h
    await reconciler.reconcile("a")
    exposition = metrics.exposition().decode()
    assert 'vk_provider_pod_cost_usd_total{namespace="ns",pod="pod-a",provider="mock"} 2.5' in exposition
    assert 'pod="pod-b"' not in exposition


async def test_pods_of_a_free_provider_add_no_cost_series(tmp_path: Path) -> None:
    metrics, pods = DaemonMetrics(), CachedPods()
    reconciler, _ = reconciler_for(tmp_path, pods, metrics=metrics, max_spend_per_hour=1.0)
    pods.objects["a"] = pod("a")
    await reconciler.reconcile("a")
    await reconciler.reconcile("a")
    assert "vk_provider_pod_cost_usd_total{" not in metrics.exposition().decode()


def test_a_placement_without_a_price_is_metered_at_the_providers_price(tmp_path: Path) -> None:
    metrics = DaemonMetrics()
    clock = ManualClock()
    costs = PodCosts(metrics, CostMeter(clock), quote=lambda raw: 4.0, provider_name="chain")
    seen = pod("a")
    by_default = Placement("aws", gpu_count=1)  # a chain member that took the pod by its own defaults
    state = PodState(PodRef("ns", "pod-a", "a"), "Running", placement=by_default)
    costs.observe(seen, state)
    clock.now = 900.0  # a quarter of an hour at $4/h
    costs.observe(seen, state)
    assert costs.prices == {"a": 4.0}
    exposition = metrics.exposition().decode()
    assert 'vk_provider_pod_cost_usd_total{namespace="ns",pod="pod-a",provider="aws"} 1.0' in exposition
