"""Telling a member which of its offers to use: the pod rewritten in the member's own terms.

A member is directable when it implements `SupportsOfferPlacement` (`request_for_offer`): RunPod, say,
which places a pod by its annotations `runpod.vk-provider.dev/{gpu-type,cloud,data-centers,
max-price-per-hour}` and its container's `nvidia.com/gpu`. The chain asks the capability, never the
member's own modules, so no provider imports another.

A member that publishes a GPU catalog but is not directable cannot be told to use the offer placement
chose, so its offers are not used; it takes part only in trial in order (pods without catalog
annotations).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vk_provider.provider import GpuOffer, PodLifecycle, PodRequest, SupportsOfferPlacement

Director = Callable[[PodRequest, GpuOffer, Sequence[str], float | None], PodRequest]
"""(pod, offer, locations, price cap) -> the pod as the member must receive it."""


def director_for(provider: PodLifecycle) -> Director | None:
    if not isinstance(provider, SupportsOfferPlacement):
        return None
    member = provider

    def direct(pod: PodRequest, offer: GpuOffer, locations: Sequence[str], cap: float | None) -> PodRequest:
        return member.request_for_offer(pod, offer, locations=locations, max_price_per_hour=cap)

    return direct
