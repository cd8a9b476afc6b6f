"""The GPU catalog as offers for placement: types, clouds, prices for the count, stock, data centers."""

from __future__ import annotations

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.provider import GpuOffer, LocationAvailability, SupportsGpuCatalog
from vk_providers.runpod import RunPodProvider

from .support import GPU, ManualClock, requests_to


async def test_offers_per_type_and_cloud_priced_for_the_count(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    assert isinstance(provider, SupportsGpuCatalog)
    await fake.control.set_stock(GPU, "COMMUNITY", "LOW")
    offers = await provider.gpu_offers(gpu_count=2)
    by_key = {(offer.gpu_type, offer.tier): offer for offer in offers}
    # H100 is secure-only in the fake's catalog; every other type is offered in both clouds.
    assert set(by_key) == {
        (GPU, "SECURE"),
        (GPU, "COMMUNITY"),
        ("NVIDIA A100 80GB PCIe", "SECURE"),
        ("NVIDIA A100 80GB PCIe", "COMMUNITY"),
        ("NVIDIA H100 80GB HBM3", "SECURE"),
    }
    assert by_key[(GPU, "COMMUNITY")] == GpuOffer(
        gpu_type=GPU,
        gpu_count=2,
        price_per_hour=0.68,
        display_name="RTX 4090",
        memory_gb=24,
        tier="COMMUNITY",
        availability="low",
        locations=(
            LocationAvailability("US-KS-2", "low", "US Kansas 2"),
            LocationAvailability("EU-RO-1", "low", "EU Romania 1"),
        ),
        max_count=4,
    )
    assert by_key[(GPU, "SECURE")].availability == "high"
    queries = [request["query"] for request in await requests_to(fake, "GET", "/v2/catalog/gpus")]
    assert queries == [
        {"include": "AVAILABILITY", "product": "POD", "count": "2", "cloud": "SECURE"},
        {"include": "AVAILABILITY", "product": "POD", "count": "2", "cloud": "COMMUNITY"},
    ]


async def test_counts_beyond_a_machine_are_not_offered(fake: FakeRunPod, provider: RunPodProvider) -> None:
    offers = await provider.gpu_offers(gpu_count=6, clouds=("COMMUNITY",))
    assert [(offer.gpu_type, offer.max_count) for offer in offers] == [("NVIDIA A100 80GB PCIe", 8)]


async def test_sold_out_types_are_offered_with_no_stock(fake: FakeRunPod, provider: RunPodProvider) -> None:
    await fake.control.set_stock(GPU, "SECURE", "NONE")
    [offer] = [offer for offer in await provider.gpu_offers(clouds=("SECURE",)) if offer.gpu_type == GPU]
    assert (offer.availability, offer.locations) == ("none", ())


async def test_answers_are_reused_for_a_while(
    fake: FakeRunPod, provider: RunPodProvider, clock: ManualClock
) -> None:
    await provider.gpu_offers(clouds=("SECURE",))
    await provider.gpu_offers(clouds=("SECURE",))
    assert len(await requests_to(fake, "GET", "/v2/catalog/gpus")) == 1
    clock.advance(61)
    await provider.gpu_offers(clouds=("SECURE",))
    assert len(await requests_to(fake, "GET", "/v2/catalog/gpus")) == 2
