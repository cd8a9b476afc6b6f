"""A pod's price from its provider before it is placed (`SupportsPodPrice`), for the spend ceiling
(`node.admission`) and the cost metric (`node.costs`) of pods no placement priced.

The provider is asked with what the pod's object says (annotations and requests), so the same answer
comes back after a restart, when nothing of the first instance's placement is left. A provider that
cannot say, says wrong (a negative or non-finite number) or fails answers None: the pod's price is
unknown, which under a spend ceiling refuses it (unless unpriced pods are allowed), rather than
counting it as free.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from vk_provider.node.admission import QuotePrice, no_quote, pod_requests
from vk_provider.provider import PodRef, PricedPod, SupportsPodPrice

logger = logging.getLogger(__name__)


def priced_pod(pod: Mapping[str, Any]) -> PricedPod:
    metadata = pod.get("metadata") or {}
    return PricedPod(
        ref=PodRef(str(metadata.get("namespace", "")), str(metadata.get("name", "")), str(metadata["uid"])),
        annotations=dict(metadata.get("annotations") or {}),
        requests=pod_requests(pod),
    )


def provider_quote(provider: object) -> QuotePrice:
    """The node's way to ask `provider` what a pod costs; `no_quote` when it prices nothing."""
    if not isinstance(provider, SupportsPodPrice):
        return no_quote
    pricing: SupportsPodPrice = provider

    def quote(pod: Mapping[str, Any]) -> float | None:
        priced = priced_pod(pod)
        try:
            price = pricing.pod_price_per_hour(priced)
        except Exception:  # a bug in a provider must not stop admission; the price is just unknown
            logger.exception("the provider failed to price pod %s; its price is unknown", priced.ref)
            return None
        if price is None:
            return None
        if not (isinstance(price, int | float) and math.isfinite(price) and price >= 0):
            logger.warning("the provider priced pod %s at %r/h; its price is unknown", priced.ref, price)
            return None
        return float(price)

    return quote
