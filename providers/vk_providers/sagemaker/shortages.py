"""Capacity SageMaker reports late: an endpoint it accepted, then Failed for want of instances.

SageMaker takes a CreateEndpoint for an instance type it has no spare capacity of, and only minutes later
the endpoint goes Failed with a FailureReason naming InsufficientInstanceCapacity ("Unable to provision
requested ML compute capacity due to InsufficientInstanceCapacity error": AWS Knowledge Center,
sagemaker-endpoint-creation-fail). Nothing is wrong with the pod, so it must not fail: the provider
removes the failed endpoint (its name is the pod UID's, so a replacement has the same one) and the pod is
created again on its next instance type. `Shortages` remembers, per endpoint, which types came up short
and until when they are not tried again (the provider's `capacity_retry_seconds`); once every type of the
pod is short, the pod waits for the first of them to be worth a try again.

Kept in memory only: after a restart the failed endpoint is still found Failed for capacity, removed, and
the pod starts again from its first type, which costs one more try at most.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

INSUFFICIENT_CAPACITY = re.compile(r"InsufficientInstanceCapacity|insufficient capacity", re.IGNORECASE)
"""How a Failed endpoint's FailureReason says AWS had no instances to give it."""


def is_capacity_failure(failure_reason: str | None) -> bool:
    return failure_reason is not None and INSUFFICIENT_CAPACITY.search(failure_reason) is not None


@dataclasses.dataclass(slots=True)
class Shortage:
    instance_type: str
    failure_reason: str
    until: float
    told: bool = False
    """Whether the pod's Events already said the pod left this type."""


class Shortages:
    def __init__(self, *, clock: Callable[[], float], retry_seconds: float) -> None:
        self._clock = clock
        self._retry_seconds = retry_seconds
        self._by_endpoint: dict[str, dict[str, Shortage]] = {}

    def record(self, endpoint: str, instance_type: str, failure_reason: str) -> None:
        """The endpoint failed for want of `instance_type` instances: not tried again for a while."""
        self._by_endpoint.setdefault(endpoint, {})[instance_type] = Shortage(
            instance_type, failure_reason, self._clock() + self._retry_seconds
        )

    def short(self, endpoint: str, instance_types: Sequence[str]) -> list[Shortage]:
        """Those of `instance_types` still short for the endpoint, in the order given."""
        now = self._clock()
        known = self._by_endpoint.get(endpoint, {})
        for instance_type in [kind for kind, shortage in known.items() if shortage.until <= now]:
            del known[instance_type]
        return [known[kind] for kind in instance_types if kind in known]

    def seconds_until_one_frees(self, shortages: Sequence[Shortage]) -> float:
        return max(0.0, min(shortage.until for shortage in shortages) - self._clock())

    def forget(self, endpoint: str) -> None:
        """The pod is gone: nothing to remember for it."""
        self._by_endpoint.pop(endpoint, None)
