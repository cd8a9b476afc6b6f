"""Choosing among the offers of several providers: what matches, in which order, and why not."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from vk_provider.kit.placement import Catalog, PlacementRequest, choose
from vk_provider.kit.placement.gpus import gpu_type_matches
from vk_provider.provider import Availability, GpuOffer, LocationAvailability, Placement

PROPERTY = settings(database=None, deadline=None, max_examples=300)
H100_SXM, H100_PCIE, A100, RTX_4090 = (
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 PCIe",
    "NVIDIA A100 80GB PCIe",
    "NVIDIA GeForce RTX 4090",
)


def offer(
    gpu_type: str,
    price: float,
    *,
    count: int = 1,
    tier: str | None = None,
    availability: Availability | None = None,
    locations: tuple[LocationAvailability, ...] = (),
    max_count: int | None = None,
) -> GpuOffer:
    return GpuOffer(
        gpu_type=gpu_type,
        gpu_count=count,
        price_per_hour=price,
        tier=tier,
        availability=availability,
        locations=locations,
        max_count=max_count,
    )


def catalogs(**offers: Sequence[GpuOffer]) -> list[Catalog]:
    return [Catalog(provider, tuple(items)) for provider, items in offers.items()]


def order(request: PlacementRequest, given_catalogs: Sequence[Catalog]) -> list[tuple[str, str, float]]:
    return [
        (c.provider, c.offer.gpu_type, c.offer.price_per_hour)
        for c in choose(request, given_catalogs).candidates
    ]


CATALOG_REQUEST = PlacementRequest(gpu_count=1, uses_catalog=True)


def test_the_cheapest_offer_of_any_provider_comes_first() -> None:
    offers = catalogs(a=[offer(A100, 1.6), offer(H100_SXM, 2.9)], b=[offer(A100, 1.2), offer(RTX_4090, 0.3)])
    assert order(CATALOG_REQUEST, offers) == [
        ("b", RTX_4090, 0.3),
        ("b", A100, 1.2),
        ("a", A100, 1.6),
        ("a", H100_SXM, 2.9),
    ]


def test_at_one_price_the_pods_gpu_type_preference_decides() -> None:
    request = PlacementRequest(gpu_types=("H100-80GB", "A100-80GB"), gpu_count=1, uses_catalog=True)
    offers = catalogs(a=[offer(A100, 2.0)], b=[offer(H100_PCIE, 2.0)])
    assert order(request, offers) == [("b", H100_PCIE, 2.0), ("a", A100, 2.0)]


def test_at_one_price_and_type_the_provider_order_decides() -> None:
    offers = catalogs(a=[offer(A100, 2.0)], b=[offer(A100, 2.0)])
    assert order(CATALOG_REQUEST, offers) == [("a", A100, 2.0), ("b", A100, 2.0)]  # the node's order
    listed = PlacementRequest(gpu_count=1, providers=("b", "a"), uses_catalog=True)
    assert order(listed, offers) == [("b", A100, 2.0), ("a", A100, 2.0)]  # the pod's order


def test_then_stock_then_the_providers_own_listing() -> None:
    offers = catalogs(
        a=[
            offer(A100, 2.0, tier="one"),
            offer(A100, 2.0, tier="two", availability="low"),
            offer(A100, 2.0, tier="three", availability="high"),
            offer(A100, 2.0, tier="four"),
        ]
    )
    tiers = [c.offer.tier for c in choose(CATALOG_REQUEST, offers).candidates]
    assert tiers == ["three", "two", "one", "four"]


def test_each_offer_is_judged_once_with_the_first_reason_that_fails() -> None:
    request = PlacementRequest(
        gpu_types=("A100-80GB",), gpu_count=2, max_price_per_hour=4.0, providers=("a",), uses_catalog=True
    )
    fits = offer(A100, 3.0, count=2)
    judged = choose(
        request,
        catalogs(
            a=[
                fits,
                offer(H100_SXM, 3.0, count=2),
                offer(A100, 1.5, count=1),
                offer(A100, 3.0, count=2, max_count=1),
                offer(A100, 5.0, count=2),
                offer(A100, math.nan, count=2),
                offer(A100, -1.0, count=2),
                offer(A100, 3.0, count=2, availability="none"),
            ],
            b=[fits],
        ),
    )
    assert [c.offer for c in judged.candidates] == [fits]
    assert [(r.provider, r.reason) for r in judged.rejections] == [
        ("a", "gpu-type"),
        ("a", "gpu-count"),
        ("a", "gpu-count"),
        ("a", "price"),
        ("a", "price"),
        ("a", "price"),
        ("a", "stock"),
        ("b", "provider"),
    ]
    assert judged.may_free_up


def test_regions_pick_locations_with_stock_in_the_pods_order() -> None:
    request = PlacementRequest(gpu_count=1, regions=("US-KS-2", "EU-RO-1"), uses_catalog=True)
    everywhere = offer(
        A100,
        1.0,
        locations=(
            LocationAvailability("EU-RO-1", "high"),
            LocationAvailability("CA-MTL-1", "high"),
            LocationAvailability("US-KS-2", "low"),
        ),
    )
    sold_out_here = offer(
        A100,
        0.5,
        locations=(LocationAvailability("US-KS-2", "none"), LocationAvailability("CA-MTL-1", "high")),
    )
    elsewhere = offer(A100, 0.4, locations=(LocationAvailability("CA-MTL-1", "high"),))
    unsaid = offer(A100, 0.3)
    judged = choose(request, catalogs(a=[everywhere, sold_out_here, elsewhere, unsaid]))
    [candidate] = judged.candidates
    assert candidate.locations == ("US-KS-2", "EU-RO-1")
    assert [r.reason for r in judged.rejections] == ["stock", "region", "region"]
    assert candidate.placement() == Placement(
        provider="a", price_per_hour=1.0, gpu_type=A100, gpu_count=1, locations=("US-KS-2", "EU-RO-1")
    )


def test_without_regions_no_location_is_imposed() -> None:
    offers = catalogs(a=[offer(A100, 1.0, locations=(LocationAvailability("EU-RO-1", "high"),))])
    [candidate] = choose(CATALOG_REQUEST, offers).candidates
    assert candidate.locations == ()


def test_an_offer_at_exactly_the_cap_is_a_candidate() -> None:
    request = PlacementRequest(gpu_count=1, max_price_per_hour=0.34, uses_catalog=True)
    assert order(request, catalogs(a=[offer(RTX_4090, 0.34), offer(RTX_4090, 0.35)])) == [
        ("a", RTX_4090, 0.34)
    ]


def test_an_unmet_price_cap_is_explained_with_the_closest_offers() -> None:
    request = PlacementRequest(
        gpu_types=("H100-80GB",), gpu_count=1, max_price_per_hour=2.0, uses_catalog=True
    )
    judged = choose(
        request,
        catalogs(runpod=[offer(H100_PCIE, 2.39, tier="SECURE"), offer(H100_SXM, 2.99), offer(A100, 1.0)]),
    )
    assert not judged.candidates
    assert not judged.may_free_up
    assert judged.explain() == (
        "no offer matches 1 x H100-80GB, at most $2.00/h: "
        "runpod: 1 x NVIDIA H100 PCIe (SECURE) at $2.39/h is above the price cap; "
        "runpod: 1 x NVIDIA H100 80GB HBM3 at $2.99/h is above the price cap"
    )


def test_an_unoffered_type_is_explained_with_the_types_on_offer() -> None:
    request = PlacementRequest(gpu_types=("B200",), gpu_count=1, uses_catalog=True)
    judged = choose(request, catalogs(runpod=[offer(RTX_4090, 0.3), offer("Some Other GPU", 0.2)]))
    assert judged.explain() == (
        "no offer matches 1 x B200: the GPU types offered are "
        "NVIDIA GeForce RTX 4090 (RTX-4090), Some Other GPU"
    )
    assert choose(request, []).explain() == "no offer matches 1 x B200: the providers offer no GPUs for it"


def test_a_sold_out_match_may_free_up() -> None:
    judged = choose(CATALOG_REQUEST, catalogs(a=[offer(A100, 1.0, availability="none")]))
    assert judged.may_free_up
    assert (
        judged.explain()
        == "no offer matches 1 x any GPU: a: 1 x NVIDIA A100 80GB PCIe at $1.00/h is sold out"
    )


# -- properties --------------------------------------------------------------------------------

GPU_IDS = (H100_SXM, H100_PCIE, A100, RTX_4090, "NVIDIA L4")
NAMES = ("H100-80GB", "H100-SXM", "A100-80GB", "RTX-4090", "L4", "L40S", "nvidia l4")
PLACES = ("EU-RO-1", "US-KS-2", "CA-MTL-1")
PROVIDERS = ("a", "b", "c")
levels = st.sampled_from(["none", "low", "medium", "high"])
prices = st.one_of(
    st.floats(min_value=0, max_value=20, allow_nan=False),
    st.sampled_from([1.0, 2.0, 2.0, math.nan, -1.0, math.inf]),
)
locations = st.lists(st.sampled_from(PLACES), unique=True, max_size=3).flatmap(
    lambda places: st.tuples(*(st.builds(LocationAvailability, st.just(p), levels) for p in places))
)
offers = st.builds(
    GpuOffer,
    gpu_type=st.sampled_from(GPU_IDS),
    gpu_count=st.integers(1, 2),
    price_per_hour=prices,
    availability=st.one_of(st.none(), levels),
    locations=locations,
    max_count=st.one_of(st.none(), st.integers(1, 4)),
)
catalog_lists = st.lists(st.sampled_from(PROVIDERS), unique=True, min_size=1).flatmap(
    lambda names: st.tuples(
        *(st.builds(Catalog, st.just(n), st.lists(offers, min_size=1, max_size=8).map(tuple)) for n in names)
    )
)
# Mostly loose requests, so that most examples have several candidates to order.
requests = st.builds(
    PlacementRequest,
    gpu_types=st.one_of(st.just(()), st.lists(st.sampled_from(NAMES), unique=True, max_size=4).map(tuple)),
    gpu_count=st.integers(1, 2),
    max_price_per_hour=st.one_of(st.none(), st.floats(min_value=0.5, max_value=15)),
    regions=st.one_of(st.just(()), st.lists(st.sampled_from(PLACES), unique=True, max_size=2).map(tuple)),
    providers=st.one_of(
        st.just(()), st.lists(st.sampled_from(PROVIDERS), unique=True, max_size=3).map(tuple)
    ),
    uses_catalog=st.just(True),
)


def acceptable(request: PlacementRequest, provider: str, candidate: GpuOffer) -> bool:
    """The rules of `choice`, written out again plainly."""
    price = candidate.price_per_hour
    return all(
        [
            not request.providers or provider in request.providers,
            not request.gpu_types
            or any(gpu_type_matches(name, candidate.gpu_type) for name in request.gpu_types),
            candidate.gpu_count == request.gpu_count,
            candidate.max_count is None or candidate.max_count >= request.gpu_count,
            0 <= price < math.inf,
            request.max_price_per_hour is None or price <= request.max_price_per_hour,
            candidate.availability != "none",
            not request.regions
            or any(
                place.location in request.regions and place.availability != "none"
                for place in candidate.locations
            ),
        ]
    )


@PROPERTY
@given(requests, catalog_lists)
def test_exactly_the_acceptable_offers_are_candidates_with_their_limits_kept_in_order(
    request: PlacementRequest, given_catalogs: tuple[Catalog, ...]
) -> None:
    """Three properties of one draw: drawing the catalogs is most of the cost (about 40 ms an example),
    so each property sees the same 300 examples for a third of the time three tests took."""
    exactly_the_acceptable_offers_are_candidates(request, given_catalogs)
    candidates_keep_the_cap_the_types_and_the_regions(request, given_catalogs)
    candidates_are_ordered_by_price_then_type_preference_then_provider(request, given_catalogs)


def exactly_the_acceptable_offers_are_candidates(
    request: PlacementRequest, given_catalogs: tuple[Catalog, ...]
) -> None:
    judged = choose(request, given_catalogs)
    total = sum(len(catalog.offers) for catalog in given_catalogs)
    assert len(judged.candidates) + len(judged.rejections) == total
    expected = sorted(
        (catalog.provider, repr(item))
        for catalog in given_catalogs
        for item in catalog.offers
        if acceptable(request, catalog.provider, item)
    )
    assert sorted((c.provider, repr(c.offer)) for c in judged.candidates) == expected


def candidates_keep_the_cap_the_types_and_the_regions(
    request: PlacementRequest, given_catalogs: tuple[Catalog, ...]
) -> None:
    for candidate in choose(request, given_catalogs).candidates:
        price = candidate.offer.price_per_hour
        assert 0 <= price < math.inf
        assert request.max_price_per_hour is None or price <= request.max_price_per_hour
        if request.gpu_types:
            assert gpu_type_matches(request.gpu_types[candidate.gpu_type_rank], candidate.offer.gpu_type)
            assert not any(
                gpu_type_matches(name, candidate.offer.gpu_type)
                for name in request.gpu_types[: candidate.gpu_type_rank]
            )
        assert set(candidate.locations) <= set(request.regions)
        assert bool(candidate.locations) == bool(request.regions)
        assert list(candidate.locations) == sorted(candidate.locations, key=request.regions.index)


def candidates_are_ordered_by_price_then_type_preference_then_provider(
    request: PlacementRequest, given_catalogs: tuple[Catalog, ...]
) -> None:
    candidates = choose(request, given_catalogs).candidates
    keys = [(c.offer.price_per_hour, c.gpu_type_rank, c.provider_rank) for c in candidates]
    assert keys == sorted(keys)
    node_order = [catalog.provider for catalog in given_catalogs]
    for candidate in candidates:
        ranks = request.providers or tuple(node_order)
        assert ranks[candidate.provider_rank] == candidate.provider


@PROPERTY
@given(requests.filter(lambda request: bool(request.providers)), catalog_lists)
def test_with_the_pods_provider_order_the_order_catalogs_arrive_in_does_not_matter(
    request: PlacementRequest, given_catalogs: tuple[Catalog, ...]
) -> None:
    forward = choose(request, given_catalogs).candidates
    backward = choose(request, given_catalogs[::-1]).candidates
    assert [(c.provider, id(c.offer)) for c in forward] == [(c.provider, id(c.offer)) for c in backward]
