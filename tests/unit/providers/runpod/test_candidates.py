"""Which 400s are about capacity, and what the freshly read catalog leaves of a candidate."""

from __future__ import annotations

import pytest

from vk_providers.runpod.api import RunPodGpuType
from vk_providers.runpod.candidates import Candidate, candidates, in_stock, is_capacity_refusal

A100 = "NVIDIA A100 80GB PCIe"


@pytest.mark.parametrize(
    ("detail", "capacity"),
    [
        ("There are no instances currently available for 1 x NVIDIA A100 80GB PCIe (SECURE)", True),
        ("There are no longer any instances available with the requested specifications.", True),
        ("no capacity for this GPU type in EU-RO-1", True),
        ("Insufficient capacity", True),
        ("This machine does not have the resources to deploy your pod.", True),
        ("exactly one of gpu or cpu must be set", False),
        ("unknown data centers: MARS-1", False),
        ("at most one of mounts.persistent and mounts.network may be set", False),
        ("", False),
    ],
)
def test_capacity_is_told_by_runpods_words(detail: str, capacity: bool) -> None:
    assert is_capacity_refusal(detail) is capacity


def gpu(availability: str, centers: tuple[tuple[str, str], ...], price: float = 1.64) -> RunPodGpuType:
    return RunPodGpuType(
        id=A100,
        name="A100 PCIe",
        memory_gb=80,
        price_per_gpu={"SECURE": price},
        max_count={"SECURE": 8},
        offered={"SECURE": True},
        availability=availability,
        data_centers=tuple((center, center, level) for center, level in centers),
    )


def stocked(candidate: Candidate, entry: RunPodGpuType, cap: float | None = None) -> Candidate | None:
    return in_stock(candidate, [entry], gpu_count=2, cloud="SECURE", max_price_per_hour=cap)


def test_the_catalog_narrows_a_candidates_data_centres_to_those_in_stock() -> None:
    [candidate] = candidates([A100], ["EU-RO-1", "US-KS-2", "CA-MTL-1"])
    entry = gpu("LOW", (("EU-RO-1", "NONE"), ("US-KS-2", "LOW"), ("CA-MTL-1", "HIGH")))
    assert stocked(candidate, entry) == Candidate(A100, ("US-KS-2", "CA-MTL-1"))
    assert stocked(candidate, gpu("LOW", (("EU-RO-1", "NONE"),))) is None
    assert stocked(candidate, gpu("NONE", ())) is None
    assert stocked(Candidate(A100, ()), entry) == Candidate(A100, ())  # RunPod picks the centre
    assert stocked(candidate, entry, cap=3.0) is None  # 2 x $1.64 is above $3.00
    assert stocked(candidate, entry, cap=3.5) is not None


def test_a_candidates_body_is_the_pods_with_its_gpu_type_and_centres() -> None:
    body = {"name": "vk-1", "gpu": {"id": "other", "count": 2}, "dataCenterIds": ["EU-RO-1"]}
    assert Candidate(A100, ()).body(body) == {"name": "vk-1", "gpu": {"id": A100, "count": 2}}
    assert Candidate(A100, ("US-KS-2",)).body(body)["dataCenterIds"] == ["US-KS-2"]
    assert body["gpu"] == {"id": "other", "count": 2}  # the pod's own body is left as it was
