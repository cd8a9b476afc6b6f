"""What a SageMaker endpoint costs an hour: its instance type's on-demand price times its instance count.

SageMaker bills a real-time endpoint per instance-second from creation to deletion, whatever its traffic,
so the price is known before the pod is placed. The node counts it against its spend ceiling and in its
cost metric (`vk_provider.provider.SupportsPodPrice`).

The built-in table holds on-demand real-time inference prices (USD per instance-hour) in us-east-1 only,
and is used only there: prices differ by region (most are dearer than us-east-1), and a table that
under-counted would let the spend ceiling be passed. Elsewhere, and for instance types the table does
not hold, the provider's `instance_prices` setting gives the prices (it also overrides the table); an
instance type priced nowhere makes the pod's price unknown, which the node refuses under a spend
ceiling unless it allows unpriced pods. Check current figures at https://aws.amazon.com/sagemaker/pricing/
(Real-Time Inference) or with the AWS Price List API (`pricing:GetProducts`, service `AmazonSageMaker`).
"""

from __future__ import annotations

from collections.abc import Mapping

from vk_provider.errors import InvalidPodError
from vk_provider.provider import PricedPod
from vk_providers.sagemaker.config import SageMakerSettings
from vk_providers.sagemaker.translate import instance_count_of, instance_types_of

LIST_PRICE_REGION = "us-east-1"

US_EAST_1_PRICES: Mapping[str, float] = {
    # From third-party summaries of AWS's price page, not checked against AWS's own page or Price List API:
    "ml.m5.xlarge": 0.269,  # zircon.tech, "The real cost of running AI models on AWS SageMaker" (Oct 2025)
    "ml.g5.xlarge": 1.408,  # zircon.tech (same article: "about $1.41/hour" in us-east-1, Oct 2025);
    # wring.co ("SageMaker Inference: Real-Time vs Serverless", Mar 2026) gives $1.21: the dearer is kept
    "ml.g5.2xlarge": 1.515,  # wring.co (same article: $1.52)
    "ml.p4d.24xlarge": 37.688,  # wring.co (same article: $37.69)
    # From memory of AWS's price page, not verified from any source:
    "ml.g4dn.xlarge": 0.7364,
    "ml.g6.xlarge": 1.0062,
}
"""On-demand real-time inference, USD per instance-hour, us-east-1. Where each figure comes from is noted
beside it; none is verified against AWS's own price page (override with `instance_prices`)."""


def instance_price(instance_type: str, *, region: str, configured: Mapping[str, float]) -> float | None:
    """USD an hour for one instance of `instance_type` in `region`: the configured price, else the
    built-in table's in us-east-1; None when neither has one."""
    if instance_type in configured:
        return configured[instance_type]
    if region == LIST_PRICE_REGION:
        return US_EAST_1_PRICES.get(instance_type)
    return None


def endpoint_price(pod: PricedPod, settings: SageMakerSettings, region: str) -> float | None:
    """USD an hour the pod's endpoint may cost: the dearest of its instance types (it may land on any,
    see `translate.INSTANCE_TYPE_ANNOTATION`) times its instance count; None when a type has no price
    here, or the pod names no valid type or count (its creation then fails with the reason)."""
    try:
        instance_types = instance_types_of(pod.annotations, settings)
        count = instance_count_of(pod.annotations, settings)
    except InvalidPodError:
        return None
    prices = [
        instance_price(instance_type, region=region, configured=settings.instance_prices)
        for instance_type in instance_types
    ]
    known = [price for price in prices if price is not None]
    return None if len(known) < len(prices) else round(max(known) * count, 6)
