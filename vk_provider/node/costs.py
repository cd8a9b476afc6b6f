"""What the node's placed pods cost, added up into `vk_provider_pod_cost_usd_total` while they run.

Apart from reconciling: the reconciler tells the meter each state it sees and each pod that goes, and
the meter keeps the price, the running time and the metric's series. The price comes from the
provider's placement, or after a restart from the placement recorded on the pod (its `Chosen` status
condition, or the `chosen` annotation of older nodes): only the instance that placed a pod knows its
placement, the record outlives it. A pod no placement priced (a provider that does not choose among
backends, such as SageMaker or a remote cluster, or a chain member that took the pod by its own
defaults) costs what its provider prices it at (`node.pricing`), counted under the node's provider's
name or the member's; a pod priced at nothing (the `mock` and `local` providers) or not priced at all
adds no series.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from vk_provider.kit.placement.cost import CostMeter
from vk_provider.kit.placement.record import recorded_placement
from vk_provider.node.admission import QuotePrice, no_quote
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.provider import Placement, PodState


class PodCosts:
    def __init__(
        self,
        metrics: DaemonMetrics,
        meter: CostMeter | None = None,
        *,
        quote: QuotePrice = no_quote,
        provider_name: str = "",
    ) -> None:
        self._metrics = metrics
        self._meter = meter or CostMeter()
        self._quote = quote
        self._provider_name = provider_name
        self._labels: dict[str, tuple[str, str, str]] = {}
        """Placed pods' cost labels (namespace, pod, provider) by UID, to close their series."""
        self._prices: dict[str, float] = {}
        """Placed pods' list price per hour by UID, where known: what admission counts as spent."""

    @property
    def prices(self) -> dict[str, float]:
        """The known price per hour of each placed pod still here, by UID (a copy)."""
        return dict(self._prices)

    def observe(self, pod: Mapping[str, Any], state: PodState) -> None:
        """Add what the pod cost since it was last looked at to the cost counter (placed pods only)."""
        placement = state.placement or recorded_placement(pod)
        if placement is None or placement.price_per_hour is None:
            placement = self._priced(pod, placement)
        if placement is None:
            return
        uid = pod["metadata"]["uid"]
        if placement.price_per_hour is not None:
            self._prices[uid] = placement.price_per_hour
        self._labels[uid] = (pod["metadata"]["namespace"], pod["metadata"]["name"], placement.provider)
        running = state.phase == "Running" and not state.terminated
        dollars = self._meter.observe(uid, price_per_hour=placement.price_per_hour, running=running)
        self._metrics.add_pod_cost(*self._labels[uid], dollars)

    def _priced(self, pod: Mapping[str, Any], placement: Placement | None) -> Placement | None:
        """`placement` (None: the node's provider) at the provider's price for the pod, if it has one
        (a chain member that took it by its own defaults, a provider that places nothing)."""
        price = self._quote(pod)
        if not price:  # unknown, or free: nothing to meter
            return placement
        if placement is None:
            return Placement(self._provider_name, price_per_hour=price)
        return dataclasses.replace(placement, price_per_hour=price)

    def stop(self, uid: str) -> None:
        """The pod is gone: charge its last stretch and close its series."""
        self._prices.pop(uid, None)
        labels = self._labels.pop(uid, None)
        if labels is not None:
            self._metrics.add_pod_cost(*labels, self._meter.forget(uid))
            self._metrics.forget_pod_cost(*labels)
