"""Bringing an Offload home for `kubectl offload uninstall`: the patch, and when it has arrived.

The same as a person's `kubectl offload flip NAME --to home`, with three differences an uninstall needs:
a migration toward away is not refused but aborted (setting the placement back to home is what an
abort does, and its RolledBack ending at weight 0 is home all the same); a paused Offload is resumed
(a pause would hold it away for ever); and "done" means serving at home, whatever the phase is called.
Pure functions of the Offload, so every case is unit-tested without a cluster.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from vk_provider.kit.kube import RawObject
from vk_provider.offload.names import FLIP_STRATEGY_ANNOTATION, RETRY_ANNOTATION
from vk_provider.offload.status import Phase
from vk_provider.offloadcli import holds, rendering

HOME = "home"


def key_of(offload: RawObject) -> str:
    metadata = offload.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def is_deleting(offload: RawObject) -> bool:
    return bool((offload.get("metadata") or {}).get("deletionTimestamp"))


def is_home(offload: RawObject) -> bool:
    """Placed home, all traffic home, no migration running and none paused."""
    status = rendering.status_of(offload)
    spec = rendering.spec_of(offload)
    return (
        spec.get("placement", HOME) == HOME
        and not status.away_weight
        and not status.running
        and not spec.get("paused")
    )


def home_patch(current: RawObject, now: datetime, retry: str) -> dict[str, Any]:
    """The merge patch that sends `current` home: placement home, not paused, held against the
    OffloadPolicies until the next flip by a person (else a policy could send it away again while the
    uninstall waits), no one-off strategy of an earlier flip; and the retry annotation when the last
    migration home ended badly (only a new retry value starts it again)."""
    annotations: dict[str, Any] = holds.flip_annotations(now, None)
    annotations[FLIP_STRATEGY_ANNOTATION] = None
    status = rendering.status_of(current)
    if (
        status.phase in (Phase.ROLLED_BACK, Phase.FAILED)
        and status.away_weight
        and rendering.direction_placement(current) == HOME
        and rendering.spec_of(current).get("placement") == HOME
    ):
        annotations[RETRY_ANNOTATION] = retry
    return {"metadata": {"annotations": annotations}, "spec": {"placement": HOME, "paused": False}}


@dataclasses.dataclass(frozen=True)
class Sent:
    """What the home patch asked of one Offload: the generation it wrote, and its retry value if any."""

    generation: int
    retry: str | None


def sent_from(patched: RawObject, retry: str) -> Sent:
    annotations = (patched.get("metadata") or {}).get("annotations") or {}
    generation = int((patched.get("metadata") or {}).get("generation", 0))
    return Sent(generation, retry if annotations.get(RETRY_ANNOTATION) == retry else None)


def seen(offload: RawObject, sent: Sent) -> bool:
    """Whether the controller has acted on the patch: observed its generation (and echoed its retry)."""
    status = rendering.status_of(offload)
    if sent.retry is not None and status.handled_retry != sent.retry:
        return False
    observed = status.observed_generation
    return observed is not None and int(observed) >= sent.generation


def outcome(offload: RawObject, sent: Sent) -> str | None:
    """None while the way home is still going; "" once home; else why it will not get there alone."""
    if not seen(offload, sent):
        return None
    ready = rendering.condition_of(offload, "Ready")
    if ready is not None and ready.get("status") == "False":
        return f"not Ready ({ready.get('reason', 'NotReady')}: {ready.get('message', '')}); nothing moves"
    if is_home(offload):
        return ""
    status = rendering.status_of(offload)
    if status.running:
        return None
    if status.phase in (Phase.ROLLED_BACK, Phase.FAILED):
        return rendering.retry_hint(offload)
    return None  # an emergency or a return the controller has yet to start: it keeps going
