"""Capacity refusals that contradict the catalog: a create refused with 400 "no capacity" on a GPU
type the catalog just listed as available.

RunPod answers such a create with the same problem document as a broken rule, a 400 with only a
`detail` and no machine-readable code, and says "a create can still fail for capacity on a GPU the
catalog just reported as available": try the next candidate (docs.runpod.io/api-reference-v2/pods/
create-a-pod, "Which failures are worth retrying"). The detail is the text users of the older GraphQL
API quote (e.g. runpod/runpodctl #189, dstackai/dstack #1740). The catalog is not told: it still lists
the type, which is what makes a provider's retry on the next candidate necessary.

Refusals are scripted per GPU type, data center and cloud (each None: any), for the next `times`
creates that match (None: until cleared), or drawn at random for a reproducible share of all creates
(`Profile.capacity_refusal_fraction`, from `Profile.capacity_seed`). A create that names several data
centers goes to the first of them not refused, as RunPod places a pod in any of those it allows; it is
refused when every one of them is.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence

from vk_devtools.standins.runpod.profile import Profile

NO_CAPACITY_DETAIL = (
    "There are no longer any instances available with the requested specifications. "
    "Please refresh and try again."
)


@dataclasses.dataclass(slots=True)
class CapacityRefusal:
    """A scripted refusal; a None field matches any value."""

    id: int
    gpu: str | None
    data_center: str | None
    cloud: str | None
    remaining: int | None
    detail: str = NO_CAPACITY_DETAIL

    def matches(self, gpu: str, data_center: str, cloud: str) -> bool:
        return (
            self.remaining != 0
            and self.gpu in (None, gpu)
            and self.data_center in (None, data_center)
            and self.cloud in (None, cloud)
        )

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


class Capacity:
    """Where a create finds a machine: the scripted refusals, then the profile's random share."""

    def __init__(self, profile: Callable[[], Profile]) -> None:
        self._profile = profile
        self.refusals: list[CapacityRefusal] = []
        self._ids = 0
        self._random: random.Random | None = None
        self._random_for: tuple[float, int] | None = None
        self.refused = 0
        """Creates refused for capacity so far (scripted or random)."""

    def refuse(
        self,
        *,
        gpu: str | None = None,
        data_center: str | None = None,
        cloud: str | None = None,
        times: int | None = 1,
        detail: str = NO_CAPACITY_DETAIL,
    ) -> CapacityRefusal:
        if times is not None and times < 1:
            raise ValueError("times must be >= 1 (or None: until cleared)")
        self._ids += 1
        refusal = CapacityRefusal(self._ids, gpu, data_center, cloud, times, detail)
        self.refusals.append(refusal)
        return refusal

    def clear(self) -> None:
        self.refusals.clear()

    def place(self, gpu: str, cloud: str, data_centers: Sequence[str]) -> str | CapacityRefusal:
        """The first of `data_centers` no scripted refusal denies, unless the random share refuses this
        create there; or the refusal that denied it. A create refused everywhere counts once against
        each scripted refusal that matched it; one placed further down its list counts against none."""
        for center in data_centers:
            if not any(refusal.matches(gpu, center, cloud) for refusal in self.refusals):
                if self._draw_refusal():
                    self.refused += 1
                    return CapacityRefusal(0, gpu, center, cloud, None)
                return center
        matched = [
            refusal
            for refusal in self.refusals
            if any(refusal.matches(gpu, center, cloud) for center in data_centers)
        ]
        if not matched:
            raise ValueError("a create needs at least one data center")
        for refusal in matched:
            if refusal.remaining is not None:
                refusal.remaining -= 1
        self.refused += 1
        return matched[0]

    def _draw_refusal(self) -> bool:
        profile = self._profile()
        if profile.capacity_refusal_fraction <= 0:
            return False
        plan = (profile.capacity_refusal_fraction, profile.capacity_seed)
        if self._random is None or self._random_for != plan:
            self._random = random.Random(profile.capacity_seed)  # noqa: S311 - reproducible test faults
            self._random_for = plan
        return self._random.random() < profile.capacity_refusal_fraction
