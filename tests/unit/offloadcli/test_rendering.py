"""The list table, the status page and progress lines, rendered from sample Offload JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from vk_provider.offloadcli import rendering

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


def sample(name: str = "chat", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "offload.vk-provider.dev/v1alpha1",
        "kind": "Offload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2026-12-02T11:55:00Z"},
        "spec": {
            "home": {"deployment": name, "service": name},
            "placement": "away",
            "route": {"hosts": [f"{name}.example.test"]},
            "strategy": {"toAwaySteps": [25, 50, 100], "toHomeSteps": [10, 25, 50, 75, 100]},
            "paused": False,
        },
        "status": status,
    }


SHIFTING = sample(
    phase="Shifting",
    targetPlacement="away",
    awayWeight=50,
    stepIndex=2,
    message="step 2 of 3: 50% away",
    conditions=[
        {
            "type": "Progressing",
            "status": "True",
            "reason": "StepApplied",
            "message": "away weight 50",
            "lastTransitionTime": "2026-12-02T11:59:30Z",
        },
        {
            "type": "Degraded",
            "status": "False",
            "reason": "GatesHealthy",
            "message": "error rate 0%",
            "lastTransitionTime": "2026-12-02T11:56:00Z",
        },
    ],
)


def test_list_renders_aligned_columns() -> None:
    fresh = sample("embed")
    fresh["spec"]["placement"] = "home"
    text = rendering.render_list([SHIFTING, fresh], all_namespaces=False, now=NOW)
    assert text.splitlines() == [
        "NAME    PLACEMENT   PHASE      AWAY WEIGHT   STEP   AGE",
        "chat    away        Shifting   50%           2/3    5m",
        "embed   home        -          -             -      5m",
    ]


def test_list_across_namespaces_adds_the_namespace_column() -> None:
    header, row = rendering.render_list([SHIFTING], all_namespaces=True, now=NOW).splitlines()
    assert header.split()[:2] == ["NAMESPACE", "NAME"]
    assert row.split()[:2] == ["ml", "chat"]


def test_status_shows_placement_phase_bar_step_conditions_and_message() -> None:
    text = rendering.render_status(SHIFTING, now=NOW)
    assert "Placement:    away (migrating to away)" in text
    assert "Phase:        Shifting" in text
    assert "Away weight:  [##########----------]  50% away" in text
    assert "Step:         2/3 (toward away: 25,50,100)" in text
    assert "Paused:       no" in text
    assert "Message:      step 2 of 3: 50% away" in text
    conditions = text.split("Conditions:\n", 1)[1].splitlines()
    assert conditions[0].split() == ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"]
    assert conditions[1].split() == ["Progressing", "True", "StepApplied", "30s", "away", "weight", "50"]
    assert conditions[2].split()[:4] == ["Degraded", "False", "GatesHealthy", "4m"]


def test_status_without_a_status_yet() -> None:
    offload = sample()
    offload.pop("status")
    text = rendering.render_status(offload, now=NOW)
    assert "Phase:        -" in text
    assert "Away weight:  -" in text
    assert "Step:         - (toward away: 25,50,100)" in text
    assert "  (none)" in text


def test_steps_default_to_the_crd_defaults_toward_home() -> None:
    offload = sample(phase="Shifting", targetPlacement="home", stepIndex=1)
    offload["spec"].pop("strategy")
    assert rendering.step_text(offload) == "1/5"


@pytest.mark.parametrize(
    ("weight", "bar"),
    [
        (0, "[--------------------]   0% away"),
        (25, "[#####---------------]  25% away"),
        (100, "[####################] 100% away"),
        (140, "[####################] 100% away"),
    ],
)
def test_progress_bar(weight: int, bar: str) -> None:
    assert rendering.progress_bar(weight) == bar


@pytest.mark.parametrize(
    ("seconds", "age"), [(5, "5s"), (119, "119s"), (600, "10m"), (4 * 3600, "4h"), (3 * 86400, "3d")]
)
def test_human_age(seconds: int, age: str) -> None:
    since = datetime.fromtimestamp(NOW.timestamp() - seconds, tz=UTC)
    assert rendering.human_age(since, NOW) == age
    assert rendering.human_age(None, NOW) == "-"


@pytest.mark.parametrize(
    ("phase", "code"),
    [
        ("Succeeded", 0),
        ("RolledBack", 1),
        ("Failed", 1),
        ("Idle", None),
        ("Preparing", None),
        ("Shifting", None),
        ("Paused", None),
        ("Finalizing", None),
        (None, None),
    ],
)
def test_exit_code_of_phase(phase: str | None, code: int | None) -> None:
    assert rendering.exit_code_of_phase(phase) == code


def test_progress_line() -> None:
    assert rendering.progress_line(SHIFTING) == (
        "offload chat: Shifting, away weight 50%, step 2/3: step 2 of 3: 50% away"
    )


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_documents_round_trip(output: str) -> None:
    text = rendering.render_document(SHIFTING, output)
    parsed = json.loads(text) if output == "json" else yaml.safe_load(text)
    assert parsed == SHIFTING
