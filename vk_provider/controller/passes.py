"""One reconcile pass of an Offload: what it read and the status patch it builds up (`Pass`), the
status of an Offload the controller sees for the first time, and how soon a pass looks again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from vk_provider.kit.kube import RawObject
from vk_provider.offload.plan import Direction, MigrationState
from vk_provider.offload.spec import OffloadSpec
from vk_provider.offload.status import OffloadStatus, Phase, set_condition, status_patch, with_patch

POLL_SECONDS = 1.0
"""How soon to look again while waiting on replicas or routers (their changes do not wake us)."""
IDLE_RESYNC_SECONDS = 60.0


def receiving_side(direction: Direction) -> str:
    """The side a migration moves traffic to: the one its gates judge."""
    return direction.value


@dataclasses.dataclass
class Pass:
    """What one reconcile pass read, and the status patch it builds up."""

    spec: OffloadSpec
    offload: RawObject
    status: Mapping[str, Any]
    """`.status` as read, in the API's spelling."""
    home: RawObject
    service: RawObject
    now: datetime
    patch: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The merge patch of `.status` this pass writes, in the API's spelling."""
    gone: bool = False
    """The finalizer was removed: the Offload is about to disappear, nothing more is written."""
    _current: OffloadStatus | None = dataclasses.field(default=None, init=False, repr=False, compare=False)
    """`current`, until the patch changes: a pass reads it a dozen times, and at a thousand Offloads
    re-reading the status each time was a quarter of the controller's CPU at rest."""

    def changes(self) -> dict[str, Any]:
        """The patch less the fields it sets to what they already are: an idle pass of an Offload that
        is watched every few seconds (its serving side) then writes nothing."""
        return {key: value for key, value in self.patch.items() if self.status.get(key) != value}

    @property
    def current(self) -> OffloadStatus:
        """The status as it will be after this pass's patch."""
        if self._current is None:
            self._current = with_patch(self.status, self.patch)
        return self._current

    def set(self, **fields: Any) -> None:
        """Set status fields by their Python names (see OffloadStatus); None removes one."""
        self.patch.update(status_patch(**fields))
        self._current = None

    def condition(self, kind: str, status: str, reason: str, message: str) -> None:
        conditions = self.current.conditions
        updated = set_condition(
            conditions, kind, status, reason, message, now=self.now, generation=self.spec.generation
        )
        if updated != list(conditions):
            self.patch["conditions"] = updated
            self._current = None

    @property
    def weight(self) -> int:
        return self.current.away_weight or 0

    @property
    def direction(self) -> Direction:
        return Direction(self.current.target_placement or self.spec.placement.value)

    @property
    def step_interval_seconds(self) -> int:
        """The running migration's, recorded when it started (a flip's own, perhaps), else the spec's."""
        return self.current.step_interval_seconds or self.spec.strategy.step_interval_seconds

    def state(self) -> MigrationState:
        current = self.current
        return MigrationState(
            direction=self.direction,
            steps=current.steps or self.spec.strategy.steps_toward(self.direction),
            step_index=current.step_index or 0,
            weight=self.weight,
            last_good_weight=self.weight if current.last_good_weight is None else current.last_good_weight,
            consecutive_failures=current.consecutive_failures,
            failures_before_rollback=self.spec.strategy.failures_before_rollback,
            paused=self.spec.paused,
        )


def first_status(generation: int, promotion: str | None) -> dict[str, Any]:
    """The status fields of an Offload the controller sees for the first time: serving at home."""
    return {
        "phase": Phase.IDLE,
        "target_placement": "home",
        "away_weight": 0,
        "last_good_weight": 0,
        "step_index": 0,
        "consecutive_failures": 0,
        "observed_generation": generation,
        "handled_promotion": promotion,
        "message": "serving at home",
    }


def condition_of(status: OffloadStatus, kind: str) -> Mapping[str, Any] | None:
    return next((item for item in status.conditions if item.get("type") == kind), None)
