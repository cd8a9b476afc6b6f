"""A pod's placement annotations, read into a `PlacementRequest`. Pure, no I/O.

A value that cannot be read is a `PlacementError`, an `InvalidPodError`: the pod fails with the reason,
as retrying the same pod cannot help. See the package docstring for what each annotation means.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping

from vk_provider.errors import InvalidPodError
from vk_provider.kit.placement.gpus import gpu_key
from vk_provider.provider import ContainerSpec, PodRequest

PREFIX = "placement.vk-provider.dev/"
GPU_TYPES_ANNOTATION = PREFIX + "gpu-types"
GPU_COUNT_ANNOTATION = PREFIX + "gpu-count"
MAX_PRICE_ANNOTATION = PREFIX + "max-price-per-hour"
REGIONS_ANNOTATION = PREFIX + "regions"
PROVIDERS_ANNOTATION = PREFIX + "providers"
CHOSEN_ANNOTATION = PREFIX + "chosen"
"""Where older nodes recorded `PodState.placement` (now the `record.CHOSEN_CONDITION` of the pod's status);
still read back for the pods they placed, never read as a request (see `record`)."""
CATALOG_ANNOTATIONS = (GPU_TYPES_ANNOTATION, GPU_COUNT_ANNOTATION, MAX_PRICE_ANNOTATION, REGIONS_ANNOTATION)
"""Any of these turns on placement by price from the providers' GPU catalogs."""
REQUEST_ANNOTATIONS = (*CATALOG_ANNOTATIONS, PROVIDERS_ANNOTATION)
"""What a pod may set under `PREFIX`; `CHOSEN_ANNOTATION` is the node's own."""

GPU_RESOURCE = "nvidia.com/gpu"
MAX_GPU_COUNT = 64
MAX_NAME_CHARS = 100
_WHOLE = re.compile(r"[0-9]+")
_PRICE = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class PlacementError(InvalidPodError):
    """A placement annotation, or the pod's GPU resource, has a value that cannot be read."""


@dataclasses.dataclass(frozen=True, slots=True)
class PlacementRequest:
    """What a pod asks of placement."""

    gpu_types: tuple[str, ...] = ()
    """Accepted GPU type names, most preferred first; empty: any type."""
    gpu_count: int = 0
    """GPUs for the whole pod; 0: the pod asks for none (and sets no catalog annotation)."""
    max_price_per_hour: float | None = None
    """USD per hour for the whole pod at list price; None: no cap."""
    regions: tuple[str, ...] = ()
    """Accepted locations (a provider's data center, region or zone ids), most preferred first."""
    providers: tuple[str, ...] = ()
    """The providers that may be tried, in this order; empty: all of them, in the node's order."""
    uses_catalog: bool = False
    """True when the pod set any of `CATALOG_ANNOTATIONS`: it is placed on the cheapest matching offer of
    the providers' GPU catalogs. False: the providers are tried in order, each with its own defaults."""

    def describe(self) -> str:
        """The request in words, for messages: "2 x H100-80GB or A100-80GB, at most $4.00/h, in EU-RO-1"."""
        what = " or ".join(self.gpu_types) if self.gpu_types else "any GPU"
        parts = [f"{self.gpu_count} x {what}"]
        if self.max_price_per_hour is not None:
            parts.append(f"at most ${self.max_price_per_hour:.2f}/h")
        if self.regions:
            parts.append("in " + " or ".join(self.regions))
        if self.providers:
            parts.append("on " + " or ".join(self.providers))
        return ", ".join(parts)


def parse_placement(pod: PodRequest) -> PlacementRequest:
    """The pod's placement request; PlacementError naming the annotation for a value that cannot be read."""
    annotations = pod.annotations
    uses_catalog = any(name in annotations for name in CATALOG_ANNOTATIONS)
    gpu_types = _names(annotations, GPU_TYPES_ANNOTATION, key=gpu_key)
    gpu_count = _gpu_count_annotation(annotations)
    if gpu_count is None:
        gpu_count = gpus_of(pod)
        if gpu_count == 0 and uses_catalog:
            gpu_count = 1
    return PlacementRequest(
        gpu_types=gpu_types,
        gpu_count=gpu_count,
        max_price_per_hour=_price(annotations),
        regions=_names(annotations, REGIONS_ANNOTATION, key=str.casefold),
        providers=_names(annotations, PROVIDERS_ANNOTATION, key=str.casefold),
        uses_catalog=uses_catalog,
    )


def check_annotations(annotations: Mapping[str, str]) -> None:
    """PlacementError naming the first placement annotation that cannot be read, or that no one reads.

    For the node, before anything is created: the annotations alone, on any provider. A node whose
    provider has no GPU catalog never parses them, so without this a typo or a bad value would be
    ignored silently. A name under `PREFIX` that is not a request annotation (a misspelt key) is an
    error too: it would be ignored all the same.
    """
    for name in sorted(annotations):
        if name.startswith(PREFIX) and name not in REQUEST_ANNOTATIONS and name != CHOSEN_ANNOTATION:
            raise PlacementError(
                f"{name} is not a placement annotation; the pod may set {', '.join(REQUEST_ANNOTATIONS)}"
            )
    _names(annotations, GPU_TYPES_ANNOTATION, key=gpu_key)
    _gpu_count_annotation(annotations)
    _price(annotations)
    _names(annotations, REGIONS_ANNOTATION, key=str.casefold)
    _names(annotations, PROVIDERS_ANNOTATION, key=str.casefold)


def price_cap(annotations: Mapping[str, str]) -> float | None:
    """The pod's `max-price-per-hour`, None when it sets none; PlacementError when it cannot be read."""
    return _price(annotations)


def gpus_of(pod: PodRequest) -> int:
    """The pod's `nvidia.com/gpu`, as the scheduler counts it: the larger of the containers' sum and the
    largest init container (each container's limit, else its request; 0 when it has neither)."""
    regular = sum(_container_gpus(container) for container in pod.containers)
    init = max((_container_gpus(container) for container in pod.init_containers), default=0)
    return max(regular, init)


def _container_gpus(container: ContainerSpec) -> int:
    quantity = container.limits.get(GPU_RESOURCE) or container.requests.get(GPU_RESOURCE)
    if quantity is None:
        return 0
    text = quantity.strip()
    if not _WHOLE.fullmatch(text):
        raise PlacementError(
            f"container {container.name!r}: {GPU_RESOURCE} must be a whole number of GPUs, not {quantity!r}"
        )
    return int(text)


def _gpu_count_annotation(annotations: Mapping[str, str]) -> int | None:
    text = annotations.get(GPU_COUNT_ANNOTATION)
    if text is None:
        return None
    value = text.strip()
    if not _WHOLE.fullmatch(value) or not 1 <= int(value) <= MAX_GPU_COUNT:
        raise PlacementError(
            f"{GPU_COUNT_ANNOTATION} must be a whole number of GPUs from 1 to {MAX_GPU_COUNT}, not {text!r}"
        )
    return int(value)


def _price(annotations: Mapping[str, str]) -> float | None:
    text = annotations.get(MAX_PRICE_ANNOTATION)
    if text is None:
        return None
    value = text.strip()
    price = float(value) if _PRICE.fullmatch(value) else math.nan
    if not (math.isfinite(price) and price > 0):
        raise PlacementError(
            f"{MAX_PRICE_ANNOTATION} must be a positive number of US dollars per hour for the whole pod, "
            f"like 2.50, not {text!r}"
        )
    return price


def _names(annotations: Mapping[str, str], annotation: str, *, key: Callable[[str], str]) -> tuple[str, ...]:
    """A comma-separated list, in order, without blanks or repeats (as `key` compares them)."""
    text = annotations.get(annotation)
    if text is None:
        return ()
    names = _unique((name.strip() for name in text.split(",")), key=key)
    if not names:
        raise PlacementError(f"{annotation} must list at least one name (comma-separated), not {text!r}")
    for name in names:
        if len(name) > MAX_NAME_CHARS or _CONTROL.search(name) or not key(name):
            raise PlacementError(f"{annotation}: {name!r} is not a name")
    return names


def _unique(names: Iterable[str], *, key: Callable[[str], str]) -> tuple[str, ...]:
    seen: set[str] = set()
    kept: list[str] = []
    for name in names:
        if not name or key(name) in seen:
            continue
        seen.add(key(name))
        kept.append(name)
    return tuple(kept)
