"""A node's GPUs per type, as extended resources built from a provider's catalog. Pure, no I/O.

The virtual node stands for whatever its providers can start, so `nvidia.com/gpu` alone says too little:
an A100 and an RTX 4090 are not interchangeable. Each GPU type a provider's catalog lists becomes one
extended resource, `gpu.vk-provider.dev/<type>`, with the type's provider id turned into a resource name
("NVIDIA A100 80GB PCIe" -> `gpu.vk-provider.dev/nvidia-a100-80gb-pcie`). Its quantity is the most GPUs
of that type one pod can get there now (the largest pod on offer in any tier that has stock), and 0 when
no tier has stock: providers publish stock as coarse levels, not counts, so this is the size of pod the
node can take of that type, not a pool to be divided. A pod that must have a type can request one of it
(`gpu.vk-provider.dev/nvidia-a100-80gb-pcie: 1` in its limits) and is then only scheduled onto nodes whose
providers have it in stock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from vk_provider.provider import GpuOffer

GPU_TYPE_RESOURCE_PREFIX = "gpu.vk-provider.dev/"
_NAME_LIMIT = 63  # the name part of a qualified resource name
_NOT_NAME = re.compile(r"[^a-z0-9]+")


def gpu_type_resource(gpu_type: str) -> str:
    """The extended resource standing for one GPU type: lower case, runs of other characters as `-`."""
    slug = _NOT_NAME.sub("-", gpu_type.lower()).strip("-")[:_NAME_LIMIT].rstrip("-")
    return GPU_TYPE_RESOURCE_PREFIX + (slug or "unknown")


def gpu_type_capacity(offers: Iterable[GpuOffer]) -> dict[str, str]:
    """Per GPU type, the largest pod in stock in any tier (0 when the type is out of stock everywhere).

    An offer without an availability level counts as in stock: the provider did not say otherwise.
    """
    largest: dict[str, int] = {}
    for offer in offers:
        resource = gpu_type_resource(offer.gpu_type)
        in_stock = offer.availability != "none"
        size = (offer.max_count if offer.max_count is not None else offer.gpu_count) if in_stock else 0
        largest[resource] = max(largest.get(resource, 0), size)
    return {resource: str(count) for resource, count in sorted(largest.items())}
