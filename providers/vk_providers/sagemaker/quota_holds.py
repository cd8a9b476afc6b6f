"""Quota refusals held per instance type: a quota of 0 for one type says nothing of the others.

SageMaker's quotas are per instance type ("ml.g5.xlarge for endpoint usage" is 0 Instances), and many GPU
types start at 0 in a new account while others do not. So a ResourceLimitExceeded naming a quota of 0
holds creates back for that type alone (one `WorkRefusal` per type: a trial after the wait, the wait
doubling at each new refusal); a pod that accepts several types moves on to one still open.

The provider as a whole refuses work (the node's ProviderAvailable=False, reason QuotaExceeded) only when
every instance type its pods have asked for (the annotation's, or the provider's default) is held.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from vk_provider.errors import ProviderRefusesWorkError
from vk_provider.kit.resilience.refusal import WorkRefusal

QUOTA_REASON = "QuotaExceeded"
"""The node's ProviderAvailable reason while every instance type asked for has a quota of 0."""


class QuotaHolds:
    def __init__(self, *, clock: Callable[[], float], first_wait_seconds: float) -> None:
        self._clock = clock
        self._first_wait = first_wait_seconds
        self._holds: dict[str, WorkRefusal] = {}
        self._known: dict[str, None] = {}
        """Every instance type pods asked for, in the order first asked (a dict keeps that order)."""

    def open(
        self, instance_types: Sequence[str]
    ) -> tuple[list[str], list[tuple[str, ProviderRefusesWorkError]]]:
        """Of a pod's instance types, those a create may try now (a held type whose wait is over is let
        through once as a trial), and the refusals of the others. Every type returned as open must get
        `accepted`, `refused` or `released`."""
        self._known.update(dict.fromkeys(instance_types))
        opened: list[str] = []
        held: list[tuple[str, ProviderRefusesWorkError]] = []
        for instance_type in instance_types:
            hold = self._holds.get(instance_type)
            try:
                if hold is not None:
                    hold.check()
            except ProviderRefusesWorkError as error:
                held.append((instance_type, error))
            else:
                opened.append(instance_type)
        return opened, held

    def refused(self, instance_type: str, message: str) -> ProviderRefusesWorkError:
        """SageMaker said the quota of `instance_type` is 0: hold it; the error telling how long."""
        hold = self._holds.get(instance_type)
        if hold is None:
            hold = WorkRefusal(
                f"SageMaker ({instance_type})", clock=self._clock, first_wait_seconds=self._first_wait
            )
            self._holds[instance_type] = hold
        return hold.refused(QUOTA_REASON, message)

    def accepted(self, instance_type: str) -> None:
        """SageMaker took an endpoint of `instance_type`: its quota is not 0 (any more)."""
        hold = self._holds.pop(instance_type, None)
        if hold is not None:
            hold.accepted()

    def released(self, instance_types: Iterable[str]) -> None:
        """Types opened but given no verdict (not reached, or a timeout): the next create may be the trial."""
        for instance_type in instance_types:
            hold = self._holds.get(instance_type)
            if hold is not None:
                hold.released()

    def health_error(self) -> ProviderRefusesWorkError | None:
        """The whole provider's refusal when every type asked for is held (each one's reason told);
        None while one of them is open or may be tried."""
        if not self._known:
            return None
        errors: list[tuple[str, ProviderRefusesWorkError]] = []
        for instance_type in self._known:
            hold = self._holds.get(instance_type)
            error = hold.health_error() if hold is not None else None
            if error is None:
                return None
            errors.append((instance_type, error))
        return ProviderRefusesWorkError(
            "SageMaker has a quota of 0 for every instance type asked for: "
            + "; ".join(f"{instance_type}: {error}" for instance_type, error in errors),
            reason=QUOTA_REASON,
            retry_after_seconds=min(error.retry_after_seconds for _, error in errors),
        )

    def all_held(self) -> bool:
        return self.health_error() is not None
