"""What the gates read at one moment: the judged side's counters, and the other side's beside them.

While a step's weight sends traffic to both sides, the other side is scraped at the same moment as
the judged one, so that both are counted over the same interval (and the same severe window) and
the judged side can be compared with it (`vk_provider.controller.baseline`).
"""

from __future__ import annotations

import dataclasses

from vk_provider.controller.gates import SideSample, total
from vk_provider.offload.plan import MAX_WEIGHT, MIN_WEIGHT


@dataclasses.dataclass(frozen=True)
class Scrape:
    judged: dict[str, SideSample]
    """Per replica (router URL, Envoy, Prometheus), the judged side's counters."""
    baseline: dict[str, SideSample] | None = None
    """The other side's, by replica; None in a one-sided step or where they cannot be read."""


def serves_both_sides(weight: int) -> bool:
    return MIN_WEIGHT < weight < MAX_WEIGHT


def _since(now: dict[str, SideSample], then: dict[str, SideSample]) -> SideSample | None:
    """What the same replicas counted in between; None when the replicas changed or one restarted."""
    if now.keys() != then.keys():
        return None
    return total(now.values()).minus(total(then.values()))


def counted_since(now: Scrape, then: Scrape) -> tuple[SideSample | None, SideSample | None]:
    """(judged side, baseline side) counted between two scrapes; a baseline only if both have one."""
    judged = _since(now.judged, then.judged)
    if now.baseline is None or then.baseline is None:
        return judged, None
    return judged, _since(now.baseline, then.baseline)
