"""Where else a pod may go when RunPod has no capacity for it, and how to tell that refusal from others.

RunPod answers a create it cannot place with 400 and no machine-readable code, the same status as a
body that breaks a rule (RunPod's API reference, `api-reference-v2/openapi.json`; research notes,
`/work/shared/research/adoption-and-realism.md` section 1). Only its words tell them apart: "There are
no instances currently available" (the phrasing the stand-in copies) and "no capacity" (the notes');
"not enough / insufficient capacity" and "does not have the resources" are kept as variants of the same
news. A 400 with none of them is taken as a broken rule: the pod fails, its message quoting RunPod's
words, so a phrasing missed here shows at once instead of being retried for ever.

A capacity refusal is also the news that the catalog's availability was stale ("a create can still fail
for capacity on a GPU the catalog just reported as available"), so the catalog is read afresh before the
next candidate is chosen.

The candidates: the pod's GPU types in order of preference (`runpod.vk-provider.dev/gpu-type` may list
several, comma-separated, like `data-centers`), each with the pod's data centres. RunPod itself tries
every data centre of one create's `dataCenterIds`, so a refusal covers them all; the refreshed catalog
then narrows the next GPU type's data centres to those that report stock for it, and a GPU type in
stock in none of them is skipped without a create.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from vk_providers.runpod.api import RunPodGpuType

CAPACITY_WORDS = re.compile(
    r"no (?:instances?|machines?|gpus?)[\w ]*? (?:currently )?available"
    r"|no (?:longer any|more) (?:instances?|machines?|gpus?)"
    r"|(?:no|not enough|insufficient) capacity"
    r"|does not have the resources",
    re.IGNORECASE,
)


def is_capacity_refusal(detail: str) -> bool:
    """Whether a 400's words say "no capacity" rather than "this request breaks a rule"."""
    return CAPACITY_WORDS.search(detail) is not None


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    gpu_type: str
    data_center_ids: tuple[str, ...]

    def describe(self, gpu_count: int, cloud: str) -> str:
        where = f" in {', '.join(self.data_center_ids)}" if self.data_center_ids else ""
        return f"{gpu_count} x {self.gpu_type} ({cloud}){where}"

    def body(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A create body for this candidate, from the pod's first one."""
        placed = {**body, "gpu": {**body["gpu"], "id": self.gpu_type}}
        placed.pop("dataCenterIds", None)
        if self.data_center_ids:
            placed["dataCenterIds"] = list(self.data_center_ids)
        return placed


def candidates(gpu_types: Sequence[str], data_center_ids: Sequence[str]) -> list[Candidate]:
    return [Candidate(gpu_type, tuple(data_center_ids)) for gpu_type in gpu_types]


def in_stock(
    candidate: Candidate,
    catalog: Sequence[RunPodGpuType],
    *,
    gpu_count: int,
    cloud: str,
    max_price_per_hour: float | None,
) -> Candidate | None:
    """The candidate as the catalog allows it: its data centres that report stock; None when the catalog
    says it has none anywhere the pod may go, or its list price is above the pod's cap. A GPU type the
    catalog does not list is left as it is (the create's answer will say)."""
    gpu = next((gpu for gpu in catalog if gpu.id == candidate.gpu_type), None)
    if gpu is None:
        return candidate
    if gpu.availability == "NONE":
        return None
    price = gpu.price_per_gpu.get(cloud)
    if max_price_per_hour is not None and (price is None or price * gpu_count > max_price_per_hour):
        return None
    if not candidate.data_center_ids or not gpu.data_centers:
        return candidate
    stocked = {center for center, _, level in gpu.data_centers if level != "NONE"}
    kept = tuple(center for center in candidate.data_center_ids if center in stocked)
    return dataclasses.replace(candidate, data_center_ids=kept) if kept else None
