"""The stand-in's GPU catalog: the GPU types and data centers it offers, their stock, and its answers.

`GET /v2/catalog/gpus` lists the types with per-cloud prices and ceilings, and with availability when
asked for (`include=AVAILABILITY&product=POD`); a create is refused for a type the catalog lacks, more
GPUs than one of its machines has, or no stock. Stock is HIGH unless the control plane sets it per GPU
type and cloud. Plain data and rules: the HTTP side is `api`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

AVAILABILITY_LEVELS = ("NONE", "LOW", "MEDIUM", "HIGH")
CLOUDS = ("SECURE", "COMMUNITY")


@dataclasses.dataclass(frozen=True, slots=True)
class FakeGpuType:
    id: str
    name: str
    memory_gb: int
    price_secure: float
    price_community: float
    max_secure: int
    """The largest GPU count of one machine in the secure cloud; 0: not offered there."""
    max_community: int
    manufacturer: str = "NVIDIA"
    pool: str | None = None
    cuda_versions: tuple[str, ...] = ("12.8", "12.6")


@dataclasses.dataclass(frozen=True, slots=True)
class FakeDataCenter:
    id: str
    name: str


DEFAULT_GPU_TYPES = (
    FakeGpuType("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.69, 0.34, 8, 4, pool="ADA_24"),
    FakeGpuType("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, 1.64, 1.19, 8, 8, pool="AMPERE_80"),
    FakeGpuType("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.99, 0.0, 8, 0, pool="HOPPER_141"),
)
DEFAULT_DATA_CENTERS = (FakeDataCenter("US-KS-2", "US Kansas 2"), FakeDataCenter("EU-RO-1", "EU Romania 1"))


@dataclasses.dataclass(frozen=True, slots=True)
class CatalogQuery:
    availability: bool
    cloud: str
    count: int


def catalog_query(query: Mapping[str, str]) -> CatalogQuery:
    """The query of `GET /v2/catalog/gpus`; ValueError says what is wrong with it."""
    include = query.get("include")
    if include is not None and include != "AVAILABILITY":
        raise ValueError("include supports AVAILABILITY only")
    availability = include == "AVAILABILITY"
    if availability != ("product" in query):
        raise ValueError("product is required with include=AVAILABILITY and valid only with it")
    for name in ("count", "cloud", "countryCodes", "cudaVersions", "minCudaVersion"):
        if name in query and not availability:
            raise ValueError(f"{name} is valid only with include=AVAILABILITY")
    products = query.get("product", "POD").split(",")
    if any(product not in ("POD", "CLUSTER", "SERVERLESS") for product in products):
        raise ValueError("product must be POD, CLUSTER or SERVERLESS")
    count_text = query.get("count", "1")
    if not count_text.isdigit() or int(count_text) < 1:
        raise ValueError("count must be an integer >= 1")
    cloud = query.get("cloud", "SECURE")
    if cloud not in CLOUDS:
        raise ValueError("cloud must be SECURE or COMMUNITY")
    return CatalogQuery(availability, cloud, int(count_text))


class Catalog:
    """The GPU types and data centers of one stand-in, by id, and the stock set through the control plane."""

    def __init__(self, gpu_types: Sequence[FakeGpuType], data_centers: Sequence[FakeDataCenter]) -> None:
        self.gpu_types = {gpu.id: gpu for gpu in gpu_types}
        self.data_centers = {center.id: center for center in data_centers}
        self._stock: dict[tuple[str, str], str] = {}

    def set_stock(self, gpu_id: str, cloud: str, level: str) -> None:
        self._stock[(gpu_id, cloud)] = level

    def availability(self, gpu: FakeGpuType, cloud: str, count: int) -> str:
        ceiling = gpu.max_secure if cloud == "SECURE" else gpu.max_community
        if count > ceiling:
            return "NONE"
        return self._stock.get((gpu.id, cloud), "HIGH")

    def gpu_refusal(self, config: dict[str, Any], cloud: str) -> str | None:
        """Why a create's `gpu` cannot be had in this cloud (a 400), or None."""
        gpu = self.gpu_types.get(config["id"])
        if gpu is None:
            return f"GPU type {config['id']!r} does not exist"
        count = config.get("count", 1)
        ceiling = gpu.max_secure if cloud == "SECURE" else gpu.max_community
        if ceiling == 0:
            return f"{gpu.id} is not offered in the {cloud} cloud"
        if count > ceiling:
            return f"{gpu.id} machines in the {cloud} cloud have at most {ceiling} GPUs"
        if self.availability(gpu, cloud, count) == "NONE":
            return f"There are no instances currently available for {count} x {gpu.id} ({cloud})"
        return None

    def gpus(self, query: CatalogQuery) -> list[dict[str, Any]]:
        """The `gpus` of the catalog's answer to this query."""
        gpus = []
        for gpu in self.gpu_types.values():
            entry: dict[str, Any] = {
                "id": gpu.id,
                "name": gpu.name,
                "pool": gpu.pool,
                "manufacturer": gpu.manufacturer,
                "memory": gpu.memory_gb,
                "secure": gpu.max_secure > 0,
                "community": gpu.max_community > 0,
                "price": {"secure": gpu.price_secure, "community": gpu.price_community},
                "maxCount": {"secure": gpu.max_secure, "community": gpu.max_community},
            }
            if query.availability:
                level = self.availability(gpu, query.cloud, query.count)
                entry["availability"] = level
                if level != "NONE":
                    entry["dataCenters"] = [
                        {"id": center.id, "name": center.name, "availability": level}
                        for center in self.data_centers.values()
                    ]
                    entry["cudaVersions"] = [
                        {"version": version, "available": True} for version in gpu.cuda_versions
                    ]
            gpus.append(entry)
        return gpus
