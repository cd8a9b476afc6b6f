"""From the GPU offers of several providers to the ordered list of offers to try for one pod. Pure.

An offer is a candidate when all of these hold (checked in this order; the first that fails is the
offer's `Rejection`):

1. `provider`: the pod lists no providers, or lists this one;
2. `gpu-type`: the pod lists no GPU types, or one of them names the offer's type (`gpus.gpu_type_matches`);
3. `gpu-count`: the offer is for the pod's GPU count, and the provider's ceiling (`max_count`) allows it;
4. `price`: the pod sets no cap, or the offer's list price for the whole pod is at most the cap (a price
   that is negative or not a number is never a candidate);
5. `stock`: the offer is not sold out (`availability` "none"; an offer that does not say is accepted);
6. `region`: the pod lists no regions, or the offer has stock in one of them; an offer that names no
   locations cannot show that it does, and is rejected.

Candidates are ordered by, in turn:

1. price per hour, cheapest first;
2. the pod's GPU-type preference: the position in `gpu-types` of the first name that accepts the offer;
3. the provider order: the position in the pod's `providers`, else in the node's list of providers;
4. stock: high, medium, low, then not stated;
5. the order the provider listed its offers in.

The last key makes the order total, so the same offers always give the same list.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

from vk_provider.kit.placement.annotations import PlacementRequest
from vk_provider.kit.placement.gpus import gpu_type_matches, names_for
from vk_provider.provider import GpuOffer, Placement

RejectionReason = Literal["provider", "gpu-type", "gpu-count", "price", "stock", "region"]
_STOCK_RANK = {"high": 0, "medium": 1, "low": 2, None: 3}
_EXPLAINED_OFFERS = 5
_LISTED_TYPES = 8


@dataclasses.dataclass(frozen=True, slots=True)
class Catalog:
    """One provider's offers, under the name the pod's `providers` annotation uses for it."""

    provider: str
    offers: tuple[GpuOffer, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    provider: str
    offer: GpuOffer
    locations: tuple[str, ...]
    """Where the pod may go, in the pod's region order (only locations with stock); empty when the pod
    names no regions."""
    gpu_type_rank: int
    provider_rank: int

    def placement(self) -> Placement:
        return Placement(
            provider=self.provider,
            price_per_hour=self.offer.price_per_hour,
            gpu_type=self.offer.gpu_type,
            gpu_count=self.offer.gpu_count,
            tier=self.offer.tier,
            locations=self.locations,
        )

    def describe(self) -> str:
        return describe_offer(self.provider, self.offer)


@dataclasses.dataclass(frozen=True, slots=True)
class Rejection:
    provider: str
    offer: GpuOffer
    reason: RejectionReason


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    request: PlacementRequest
    candidates: tuple[Candidate, ...]
    rejections: tuple[Rejection, ...]

    @property
    def may_free_up(self) -> bool:
        """Whether an offer that meets everything else is only out of stock now (worth trying again)."""
        return any(rejection.reason == "stock" for rejection in self.rejections)

    def explain(self) -> str:
        """Why there is no candidate, naming the closest offers, for the pod's events and status."""
        wanted = self.request.describe()
        near = sorted(
            (r for r in self.rejections if r.reason not in ("provider", "gpu-type")),
            key=lambda r: (r.offer.price_per_hour, r.provider, r.offer.gpu_type),
        )
        if near:
            details = "; ".join(
                f"{describe_offer(r.provider, r.offer)} {_WHY[r.reason]}" for r in near[:_EXPLAINED_OFFERS]
            )
            more = f" (and {len(near) - _EXPLAINED_OFFERS} more)" if len(near) > _EXPLAINED_OFFERS else ""
            return f"no offer matches {wanted}: {details}{more}"
        offered = sorted(
            {r.offer.gpu_type for r in self.rejections if r.reason != "provider"}, key=str.casefold
        )
        if not offered:
            return f"no offer matches {wanted}: the providers offer no GPUs for it"
        listed = ", ".join(_with_names(gpu_type) for gpu_type in offered[:_LISTED_TYPES])
        more = ", ..." if len(offered) > _LISTED_TYPES else ""
        return f"no offer matches {wanted}: the GPU types offered are {listed}{more}"


_WHY: dict[RejectionReason, str] = {
    "provider": "is not on a listed provider",
    "gpu-type": "is not an accepted GPU type",
    "gpu-count": "cannot have that many GPUs",
    "price": "is above the price cap",
    "stock": "is sold out",
    "region": "is not offered in the listed regions",
}


def describe_offer(provider: str, offer: GpuOffer) -> str:
    """An offer as messages name it: `runpod: 2 x NVIDIA H100 80GB HBM3 (SECURE) at $5.98/h`."""
    tier = f" ({offer.tier})" if offer.tier else ""
    return f"{provider}: {offer.gpu_count} x {offer.gpu_type}{tier} at ${offer.price_per_hour:.2f}/h"


def _with_names(gpu_type: str) -> str:
    names = names_for(gpu_type)
    return f"{gpu_type} ({'/'.join(names)})" if names else gpu_type


def choose(request: PlacementRequest, catalogs: Sequence[Catalog]) -> Choice:
    """Every offer of `catalogs` (given in the node's provider order) judged against `request`."""
    provider_ranks = _provider_ranks(request, catalogs)
    ranked: list[tuple[tuple[float, int, int, int, int], Candidate]] = []
    rejections: list[Rejection] = []
    position = 0
    for catalog in catalogs:
        for offer in catalog.offers:
            position += 1
            verdict = _judge(request, catalog.provider, offer, provider_ranks)
            if isinstance(verdict, Candidate):
                key = (
                    offer.price_per_hour,
                    verdict.gpu_type_rank,
                    verdict.provider_rank,
                    _STOCK_RANK.get(offer.availability, len(_STOCK_RANK)),
                    position,
                )
                ranked.append((key, verdict))
            else:
                rejections.append(Rejection(catalog.provider, offer, verdict))
    ranked.sort(key=lambda item: item[0])
    return Choice(request, tuple(candidate for _, candidate in ranked), tuple(rejections))


def _provider_ranks(request: PlacementRequest, catalogs: Sequence[Catalog]) -> dict[str, int]:
    if request.providers:
        return {name.casefold(): index for index, name in enumerate(request.providers)}
    ranks: dict[str, int] = {}
    for catalog in catalogs:
        ranks.setdefault(catalog.provider.casefold(), len(ranks))
    return ranks


def _judge(
    request: PlacementRequest, provider: str, offer: GpuOffer, provider_ranks: dict[str, int]
) -> Candidate | RejectionReason:
    provider_rank = provider_ranks.get(provider.casefold())
    if provider_rank is None:
        return "provider"
    gpu_type_rank = _gpu_type_rank(request, offer)
    if gpu_type_rank is None:
        return "gpu-type"
    unfit = _unfit(request, offer)
    if unfit is not None:
        return unfit
    locations = _locations(request, offer)
    if isinstance(locations, str):
        return locations
    return Candidate(provider, offer, locations, gpu_type_rank, provider_rank)


def _unfit(request: PlacementRequest, offer: GpuOffer) -> RejectionReason | None:
    """Count, price and overall stock."""
    if offer.gpu_count != request.gpu_count or (
        offer.max_count is not None and offer.max_count < request.gpu_count
    ):
        return "gpu-count"
    price = offer.price_per_hour
    if not (math.isfinite(price) and price >= 0) or (
        request.max_price_per_hour is not None and price > request.max_price_per_hour
    ):
        return "price"
    if offer.availability == "none":
        return "stock"
    return None


def _locations(request: PlacementRequest, offer: GpuOffer) -> tuple[str, ...] | RejectionReason:
    """The offer's locations with stock among the pod's regions, in the pod's order."""
    if not request.regions:
        return ()
    places = [
        place
        for region in request.regions
        for place in offer.locations
        if place.location.casefold() == region.casefold()
    ]
    if not places:
        return "region"
    stocked = tuple(place.location for place in places if place.availability != "none")
    return stocked or "stock"


def _gpu_type_rank(request: PlacementRequest, offer: GpuOffer) -> int | None:
    if not request.gpu_types:
        return 0
    for rank, name in enumerate(request.gpu_types):
        if gpu_type_matches(name, offer.gpu_type):
            return rank
    return None
