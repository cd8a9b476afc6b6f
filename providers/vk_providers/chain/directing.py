"""Telling a member which of its offers to use: the pod rewritten in the member's own terms.

A member is directable when it implements `SupportsOfferPlacement` (it rewrites the pod itself), or when
this module knows how it places pods. Today that is the `runpod` provider, placed by its annotations
`runpod.vk-provider.dev/{gpu-type,cloud,data-centers,max-price-per-hour}` and its container's
`nvidia.com/gpu`; once it implements `SupportsOfferPlacement` itself, its entry here can go.

A member that publishes a GPU catalog but is not directable cannot be told to use the offer placement
chose, so its offers are not used; it takes part only in trial in order (pods without catalog
annotations).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from vk_provider.kit.placement import GPU_RESOURCE
from vk_provider.provider import GpuOffer, PodLifecycle, PodRequest, SupportsOfferPlacement
from vk_providers.runpod import RunPodProvider
from vk_providers.runpod.config import CLOUDS
from vk_providers.runpod.translate import (
    CLOUD_ANNOTATION,
    DATA_CENTERS_ANNOTATION,
    GPU_TYPE_ANNOTATION,
    MAX_PRICE_ANNOTATION,
)

Director = Callable[[PodRequest, GpuOffer, Sequence[str], float | None], PodRequest]
"""(pod, offer, locations, price cap) -> the pod as the member must receive it."""


def director_for(provider: PodLifecycle) -> Director | None:
    if isinstance(provider, SupportsOfferPlacement):
        member = provider

        def direct(
            pod: PodRequest, offer: GpuOffer, locations: Sequence[str], cap: float | None
        ) -> PodRequest:
            return member.request_for_offer(pod, offer, locations=locations, max_price_per_hour=cap)

        return direct
    if isinstance(provider, RunPodProvider):
        return direct_runpod
    return None


def direct_runpod(
    pod: PodRequest, offer: GpuOffer, locations: Sequence[str], cap: float | None
) -> PodRequest:
    """The runpod provider reads its placement from annotations, and the GPU count from the container."""
    annotations = dict(pod.annotations)
    annotations[GPU_TYPE_ANNOTATION] = offer.gpu_type
    if offer.tier in CLOUDS:
        annotations[CLOUD_ANNOTATION] = offer.tier
    if locations:
        annotations[DATA_CENTERS_ANNOTATION] = ",".join(locations)
    if cap is not None:
        annotations[MAX_PRICE_ANNOTATION] = repr(cap)
    containers = pod.containers
    if len(containers) == 1:  # runpod refuses any other shape, with its own message
        [container] = containers
        limits = {**container.limits, GPU_RESOURCE: str(offer.gpu_count)}
        containers = (dataclasses.replace(container, limits=limits),)
    return dataclasses.replace(pod, annotations=annotations, containers=containers)
