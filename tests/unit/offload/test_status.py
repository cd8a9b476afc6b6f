"""An Offload's status read as a typed value and written back as a merge patch in the API's spelling."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from vk_provider.offload.status import (
    RUNNING_PHASES,
    TERMINAL_PHASES,
    InvalidStatus,
    OffloadStatus,
    Phase,
    status_patch,
    with_patch,
)

CRD = Path(__file__).parents[3] / "manifests" / "crds" / "offload.yaml"


def _crd_status_schema() -> dict[str, dict[str, object]]:
    crd = yaml.safe_load(CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    properties: dict[str, dict[str, object]] = schema["properties"]["status"]["properties"]
    return properties


def test_every_status_key_of_the_crd_is_a_field_and_nothing_else() -> None:
    patch = status_patch(**{field.name: None for field in dataclasses.fields(OffloadStatus)})
    assert set(patch) == set(_crd_status_schema())


def test_phases_match_the_crd_enum_and_split_into_running_and_terminal() -> None:
    crd = yaml.safe_load(CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert {phase.value for phase in Phase} == set(
        schema["properties"]["status"]["properties"]["phase"]["enum"]
    )
    assert not RUNNING_PHASES & TERMINAL_PHASES
    assert set(Phase) - RUNNING_PHASES - TERMINAL_PHASES == {Phase.IDLE}


def test_a_status_reads_back_what_its_patch_wrote() -> None:
    started = datetime(2026, 12, 3, 9, 30, 5, tzinfo=UTC)
    patch = status_patch(
        phase=Phase.SHIFTING,
        away_weight=50,
        steps=(50, 100),
        step_interval_seconds=5,
        handled_flip_strategy='{"placement":"away"}',
        migration_started_at=started,
        last_check={"verdict": "Healthy"},
    )
    assert patch == {
        "phase": "Shifting",
        "awayWeight": 50,
        "steps": [50, 100],
        "stepIntervalSeconds": 5,
        "handledFlipStrategy": '{"placement":"away"}',
        "migrationStartedAt": "2026-12-03T09:30:05Z",
        "lastCheck": {"verdict": "Healthy"},
    }
    status = OffloadStatus.from_raw(patch)
    assert status.phase is Phase.SHIFTING
    assert status.running
    assert status.away_weight == 50
    assert status.steps == (50, 100)
    assert (status.step_interval_seconds, status.handled_flip_strategy) == (5, '{"placement":"away"}')
    assert status.migration_started_at == started


def test_a_patch_applies_over_the_status_and_none_removes_a_field() -> None:
    raw = {"phase": "Shifting", "awayWeight": 50, "outcome": "Succeeded"}
    merged = with_patch(raw, status_patch(away_weight=100, outcome=None))
    assert merged.away_weight == 100
    assert merged.outcome is None
    assert merged.phase is Phase.SHIFTING


def test_an_unknown_field_is_a_type_error_not_a_silent_key() -> None:
    with pytest.raises(TypeError, match="awayweight"):
        status_patch(awayweight=5)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"awayWeight": "50"}, "status.awayWeight must be an integer"),
        ({"awayWeight": True}, "status.awayWeight must be an integer"),
        ({"phase": "Running"}, "status.phase 'Running' is not a phase"),
        ({"progressAt": "yesterday"}, "status.progressAt must be an RFC 3339 time"),
        ({"steps": "50,100"}, "status.steps must be a list"),
    ],
)
def test_a_value_of_the_wrong_type_names_its_field(raw: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidStatus, match=words):
        OffloadStatus.from_raw(raw)


def test_an_absent_status_is_empty() -> None:
    assert OffloadStatus.from_raw(None) == OffloadStatus()
    assert OffloadStatus.from_raw({}).phase is None
