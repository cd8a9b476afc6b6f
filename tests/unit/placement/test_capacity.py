"""GPUs per type as extended resources, from catalog offers."""

from __future__ import annotations

from vk_provider.kit.placement.capacity import gpu_type_capacity, gpu_type_resource
from vk_provider.provider import GpuOffer


def offer(gpu_type: str, **fields: object) -> GpuOffer:
    values: dict[str, object] = {"gpu_count": 1, "price_per_hour": 1.0, **fields}
    return GpuOffer(gpu_type=gpu_type, **values)  # type: ignore[arg-type]


def test_a_provider_id_becomes_a_valid_resource_name() -> None:
    assert gpu_type_resource("NVIDIA A100 80GB PCIe") == "gpu.vk-provider.dev/nvidia-a100-80gb-pcie"
    assert gpu_type_resource("NVIDIA A100-SXM4-80GB") == "gpu.vk-provider.dev/nvidia-a100-sxm4-80gb"
    assert gpu_type_resource("  --  ") == "gpu.vk-provider.dev/unknown"
    long = gpu_type_resource("x" * 70 + " y")
    assert len(long.split("/", 1)[1]) == 63
    assert not long.endswith("-")


def test_each_type_gets_its_largest_pod_in_stock_over_the_tiers() -> None:
    capacity = gpu_type_capacity(
        [
            offer("NVIDIA L4", tier="SECURE", availability="low", max_count=4),
            offer("NVIDIA L4", tier="COMMUNITY", availability="high", max_count=8),
            offer("NVIDIA H100 80GB HBM3", tier="SECURE", availability="none", max_count=8),
            offer("NVIDIA A40", availability=None, max_count=None, gpu_count=2),
        ]
    )
    assert capacity == {
        "gpu.vk-provider.dev/nvidia-a40": "2",  # no stock level and no ceiling: the offer's own size
        "gpu.vk-provider.dev/nvidia-h100-80gb-hbm3": "0",  # listed, out of stock
        "gpu.vk-provider.dev/nvidia-l4": "8",
    }


def test_a_tier_without_stock_does_not_hide_one_with_stock() -> None:
    capacity = gpu_type_capacity(
        [
            offer("NVIDIA L4", tier="SECURE", availability="medium", max_count=2),
            offer("NVIDIA L4", tier="COMMUNITY", availability="none", max_count=8),
        ]
    )
    assert capacity == {"gpu.vk-provider.dev/nvidia-l4": "2"}


def test_no_offers_no_resources() -> None:
    assert gpu_type_capacity([]) == {}
