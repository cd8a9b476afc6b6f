"""A flip's own steps and interval, for the one migration it starts.

`kubectl offload flip --steps ... --interval ...` must not change what every later flip (an
OffloadPolicy's too) does, and the person flipping may not be allowed to write the status. So the
CLI puts them in the annotation `FLIP_STRATEGY_ANNOTATION`, in the same patch as the placement, as
JSON naming the placement they are for and the moment of the flip (so two flips with the same steps
are still two requests). The controller handles each value once: the migration it starts toward that
placement by the strategy runs by them (and records them in its status), and a value no migration
takes (the Offload was already there) is dropped. `status.handledFlipStrategy` echoes the value
handled, so a restart never applies it again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from vk_provider.offload.plan import Direction, validate_steps

MAX_STEP_INTERVAL_SECONDS = 2**31 - 1
"""The CRD's int32 limit on `spec.strategy.stepIntervalSeconds`, and the status field's."""


@dataclasses.dataclass(frozen=True)
class OneOffStrategy:
    value: str
    """The annotation as written: what `status.handledFlipStrategy` echoes once it is handled."""
    placement: Direction
    """The flip's target: the strategy is for a migration toward it, and for no other."""
    steps: tuple[int, ...] | None = None
    step_interval_seconds: int | None = None

    def applies(self, direction: Direction, handled: str | None) -> bool:
        """Whether a migration toward `direction` started now runs by it: not handled yet, and the
        migration goes where the flip asked."""
        return self.value != handled and self.placement is direction


def one_off_value(
    placement: str, steps: tuple[int, ...] | None, step_interval_seconds: int | None, at: str
) -> str:
    """The annotation's value for a flip to `placement` at `at` (any text unique to the flip)."""
    body: dict[str, Any] = {"placement": placement, "at": at}
    if steps is not None:
        body["steps"] = list(steps)
    if step_interval_seconds is not None:
        body["stepIntervalSeconds"] = step_interval_seconds
    return json.dumps(body, separators=(",", ":"))


def parse_one_off(value: str) -> OneOffStrategy:
    """The annotation's value, or ValueError saying what is wrong with it."""
    try:
        body = json.loads(value)
    except json.JSONDecodeError:
        raise ValueError(f"must be a JSON object, not {value!r}") from None
    if not isinstance(body, Mapping):
        raise ValueError(f"must be a JSON object, not {value!r}")
    placement = body.get("placement")
    if placement not in ("home", "away"):
        raise ValueError(f"placement must be home or away, not {placement!r}")
    steps = body.get("steps")
    if steps is not None:
        if not isinstance(steps, list):
            raise ValueError(f"steps must be a list, not {steps!r}")
        steps = validate_steps(steps)
    interval = body.get("stepIntervalSeconds")
    if interval is not None and (
        isinstance(interval, bool)
        or not isinstance(interval, int)
        or not 1 <= interval <= MAX_STEP_INTERVAL_SECONDS
    ):
        raise ValueError(f"stepIntervalSeconds must be a whole number of seconds >= 1, not {interval!r}")
    return OneOffStrategy(value, Direction(placement), steps, interval)
