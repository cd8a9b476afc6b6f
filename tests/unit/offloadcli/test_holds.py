"""What a person's flip and `auto` write for the OffloadPolicies, and how the Offload's page shows it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from vk_provider.offloadcli import holds, rendering
from vk_provider.policy.names import (
    AUTO_ANNOTATION,
    FLIPPED_BY_ANNOTATION,
    HOLD_UNTIL_ANNOTATION,
    HOLD_UNTIL_NEXT_FLIP,
)

NOW = datetime(2026, 12, 3, 16, 0, 0, 500000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "value"),
    [
        (2 * 3600, "2026-12-03T18:00:00Z"),
        (90 * 60, "2026-12-03T17:30:00Z"),
        (5400, "2026-12-03T17:30:00Z"),
        (None, HOLD_UNTIL_NEXT_FLIP),
    ],
)
def test_the_hold_is_an_rfc3339_utc_time_from_now_or_next_flip(seconds: int | None, value: str) -> None:
    assert holds.hold_value(NOW, seconds) == value


def test_a_flip_by_a_person_writes_the_hold_and_who_flipped() -> None:
    assert holds.flip_annotations(NOW, 7200) == {
        HOLD_UNTIL_ANNOTATION: "2026-12-03T18:00:00Z",
        FLIPPED_BY_ANNOTATION: "person",
    }


def test_auto_on_also_removes_the_hold_and_auto_off_leaves_it() -> None:
    # In a merge patch, null deletes the key: the hold is gone, not set to an empty string.
    assert holds.auto_patch("on") == {
        "metadata": {"annotations": {AUTO_ANNOTATION: "on", HOLD_UNTIL_ANNOTATION: None}}
    }
    assert holds.auto_patch("off") == {"metadata": {"annotations": {AUTO_ANNOTATION: "off"}}}


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (HOLD_UNTIL_NEXT_FLIP, "until the next flip by a person"),
        ("2026-12-03T17:59:00Z", "until 2026-12-03T17:59:00Z (1h58m left)"),
        ("2026-12-03T16:00:40Z", "until 2026-12-03T16:00:40Z (39s left)"),
        ("2026-12-03T15:55:00Z", "ended 5m ago (was until 2026-12-03T15:55:00Z)"),
        ("tomorrow", "'tomorrow' (unreadable: neither an RFC 3339 time nor next-flip)"),
    ],
)
def test_a_hold_reads_as_until_when_and_how_long_is_left(value: str, shown: str) -> None:
    assert holds.describe_hold_value(value, NOW) == shown


def offload(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "chat", "namespace": "ml", "annotations": annotations or {}},
        "spec": {"placement": "away"},
        "status": {"phase": "Succeeded", "awayWeight": 100},
    }


def test_the_status_page_shows_hold_auto_and_flipper_only_when_set() -> None:
    plain = rendering.render_status(offload(), now=NOW)
    assert "Auto:" not in plain
    assert "Hold:" not in plain
    assert "Flipped by:" not in plain

    held = rendering.render_status(
        offload(
            {
                AUTO_ANNOTATION: "off",
                HOLD_UNTIL_ANNOTATION: "2026-12-03T18:00:00Z",
                FLIPPED_BY_ANNOTATION: "person",
            }
        ),
        now=NOW,
    ).splitlines()
    assert "Auto:         off (no OffloadPolicy moves it)" in held
    assert "Hold:         until 2026-12-03T18:00:00Z (1h59m left)" in held
    assert "Flipped by:   person" in held
    # Beside the other settings of the Offload, before its age.
    assert held.index("Paused:       no") < held.index("Auto:         off (no OffloadPolicy moves it)")

    by_policy = rendering.render_status(offload({FLIPPED_BY_ANNOTATION: "policy/training-first"}), now=NOW)
    assert "Flipped by:   policy/training-first" in by_policy
    assert "Hold:" not in by_policy


def test_an_unknown_auto_value_is_shown_as_such() -> None:
    page = rendering.render_status(offload({AUTO_ANNOTATION: "maybe"}), now=NOW)
    assert "Auto:         'maybe' (unknown: expected on or off)" in page
