"""Which Offloads go ahead in the controller's queue: those with work to do now."""

from __future__ import annotations

from typing import Any

import pytest

from vk_provider.controller.running import has_work

pytestmark = pytest.mark.unit


def offload(
    *, generation: int = 2, observed: int | None = 2, phase: str = "Idle", **metadata: Any
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if observed is not None:
        status["observedGeneration"] = observed
    return {"metadata": {"name": "chat", "generation": generation, **metadata}, "status": status}


@pytest.mark.parametrize(
    ("case", "urgent"),
    [
        (offload(), False),  # at rest, its spec acted on: only watched
        (offload(phase="Succeeded"), False),
        (offload(generation=3), True),  # a flip not yet acted on
        (offload(observed=None), True),  # never reconciled
        (offload(phase="Shifting"), True),
        (offload(phase="Preparing"), True),
        (offload(phase="Paused"), True),
        (offload(phase="Finalizing"), True),
        (offload(deletionTimestamp="2026-12-07T10:00:00Z"), True),
    ],
)
def test_an_offload_has_work_when_a_migration_runs_its_spec_moved_or_it_is_deleted(
    case: dict[str, Any], urgent: bool
) -> None:
    assert has_work(case) is urgent
