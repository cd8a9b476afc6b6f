"""A pass's view of the status it is writing: read once, read again only after it changes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from vk_provider.controller import passes
from vk_provider.controller.passes import Pass
from vk_provider.offload.spec import parse_offload

pytestmark = pytest.mark.unit

OFFLOAD = {
    "metadata": {"namespace": "team", "name": "chat", "generation": 3},
    "spec": {
        "home": {"deployment": "chat", "service": "chat"},
        "placement": "home",
        "route": {"hosts": ["c.test"]},
    },
    "status": {"phase": "Idle", "awayWeight": 0, "conditions": []},
}


def test_the_status_a_pass_will_write_is_read_once_until_the_pass_changes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[None] = []
    real = passes.with_patch

    def counted(*args: Any) -> Any:
        reads.append(None)
        return real(*args)

    monkeypatch.setattr(passes, "with_patch", counted)
    work = Pass(parse_offload(OFFLOAD), OFFLOAD, OFFLOAD["status"], {}, {}, datetime(2026, 12, 7, tzinfo=UTC))
    for _ in range(12):
        assert work.weight == 0
    assert len(reads) == 1
    work.set(away_weight=50)
    assert (work.weight, len(reads)) == (50, 2)
    work.condition("Ready", "True", "Resolved", "exists")
    assert work.current.conditions[0]["reason"] == "Resolved"
    work.condition("Ready", "True", "Resolved", "exists")  # the same again: nothing changed
    assert work.current.conditions[0]["reason"] == "Resolved"
    assert len(reads) == 3  # once more after the set, once after the condition that changed something
