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
    assert "Step:         2/3 (toward away: 25,50,100; 30s per step)" in text
    assert "Paused:       no" in text
    assert "Message:      step 2 of 3: 50% away" in text
    conditions = text.split("Conditions:\n", 1)[1].splitlines()
    assert conditions[0].split() == ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"]
    assert conditions[1].split() == ["Progressing", "True", "StepApplied", "30s", "away", "weight", "50"]
    assert conditions[2].split()[:4] == ["Degraded", "False", "GatesHealthy", "4m"]


def test_status_says_what_the_offload_routes_who_may_share_it_and_where_it_is_kept() -> None:
    text = rendering.render_status(SHIFTING, now=NOW)
    assert "Route:        chat.example.test, path prefix /\n" in text
    assert "kept for Service chat once this Offload is deleted, until KeptRoute chat is deleted" in text
    assert "other namespaces" not in text
    shared = sample()
    shared["spec"]["route"] = {"pathPrefix": "/v1", "allowedNamespaces": ["team-a", "team-b"]}
    text = rendering.render_status(shared, now=NOW)
    assert "Route:        every host, path prefix /v1" in text
    assert "other namespaces may claim paths of its hosts: team-a, team-b" in text


def test_status_without_a_status_yet() -> None:
    offload = sample()
    offload.pop("status")
    text = rendering.render_status(offload, now=NOW)
    assert "Phase:        -" in text
    assert "Away weight:  -" in text
    assert "Step:         - (toward away: 25,50,100; 30s per step)" in text
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


# -- the Gates section ---------------------------------------------------------------------------


def section(text: str, title: str) -> list[str]:
    """The lines of one section of the status page: its title line and the indented lines after it."""
    lines = text.splitlines()
    start = lines.index(title)
    body = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        body.append(line)
    return body


def test_gates_show_the_crd_defaults_and_no_check_before_the_first_interval() -> None:
    text = rendering.render_status(SHIFTING, now=NOW)
    assert section(text, "Gates:") == [
        "Gates:",
        "  Limits:      error rate <= 1%, p99 <= 2000 ms, at least 10 requests per interval",
        "  Last check:  none yet",
    ]


def test_gates_show_the_configured_limits_the_last_check_and_the_failures() -> None:
    offload = sample(
        phase="Shifting",
        targetPlacement="away",
        awayWeight=50,
        stepIndex=2,
        consecutiveFailures=2,
        lastCheck={
            "verdict": "Unhealthy",
            "side": "away",
            "requests": 312,
            "errorRatePercent": 2.564,
            "p99Milliseconds": 184.2,
            "message": "away side: 312 requests, 2.56% errors, p99 184 ms: error rate above 0.5%",
            "at": "2026-12-02T11:59:48Z",
        },
    )
    offload["spec"]["strategy"].update(
        gates={"maxErrorRatePercent": 0.5, "maxP99LatencyMilliseconds": 800, "minRequestsPerInterval": 0},
        failuresBeforeRollback=4,
    )
    assert section(rendering.render_status(offload, now=NOW), "Gates:") == [
        "Gates:",
        "  Limits:      error rate <= 0.5%, p99 <= 800 ms, at least 0 requests per interval",
        "  Last check:  Unhealthy on the away side, 12s ago",
        "  Measured:    312 requests, error rate 2.564%, p99 184.2 ms",
        "  Message:     away side: 312 requests, 2.56% errors, p99 184 ms: error rate above 0.5%",
        "  Failures:    2/4 failed checks in a row (rolls back at 4)",
    ]


def test_a_last_check_without_a_p99_and_without_failures() -> None:
    offload = sample(
        phase="Shifting",
        consecutiveFailures=0,
        lastCheck={
            "verdict": "NotEnoughData",
            "side": "home",
            "requests": 3,
            "errorRatePercent": 0.0,
            "p99Milliseconds": None,
            "message": "3 requests on the home side, fewer than the 10 needed",
            "at": "2026-12-02T11:50:00Z",
        },
    )
    lines = section(rendering.render_status(offload, now=NOW), "Gates:")
    assert lines[2:] == [
        "  Last check:  NotEnoughData on the home side, 10m ago",
        "  Measured:    3 requests, error rate 0%, p99 -",
        "  Message:     3 requests on the home side, fewer than the 10 needed",
    ]


def test_a_last_check_compared_with_the_other_side_shows_its_rate() -> None:
    offload = sample(
        phase="Shifting",
        lastCheck={
            "verdict": "Healthy",
            "side": "away",
            "requests": 300,
            "errorRatePercent": 64.4,
            "baselineErrorRatePercent": 69.2,
            "p99Milliseconds": 8.4,
            "message": "away side: 300 requests, 64.40% errors (home side 69.20% over 290), p99 8 ms",
            "at": "2026-12-02T11:59:48Z",
        },
    )
    lines = section(rendering.render_status(offload, now=NOW), "Gates:")
    assert lines[3] == "  Measured:    300 requests, error rate 64.4% (the other side 69.2%), p99 8.4 ms"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1, "1"),
        (1.0, "1"),
        (0.5, "0.5"),
        (2.5641, "2.564"),
        (184.25, "184.25"),
        (1e7, "10000000"),
        (None, "-"),
    ],
)
def test_number_text(value: float | None, text: str) -> None:
    assert rendering.number_text(value) == text


# -- the steps of the running migration ------------------------------------------------------------


def test_the_steps_and_interval_snapshot_in_status_wins_over_the_edited_spec() -> None:
    offload = sample(
        phase="Shifting",
        targetPlacement="away",
        awayWeight=50,
        stepIndex=2,
        steps=[10, 50, 100],
        stepIntervalSeconds=5,
    )
    offload["spec"]["strategy"]["toAwaySteps"] = [100]  # edited after the migration started
    offload["spec"]["strategy"]["stepIntervalSeconds"] = 60
    text = rendering.render_status(offload, now=NOW)
    assert "Step:         2/3 (toward away: 10,50,100; 5s per step)" in text
    assert rendering.step_text(offload) == "2/3"
    assert rendering.progress_line(offload) == "offload chat: Shifting, away weight 50%, step 2/3"
    assert rendering.render_list([offload], all_namespaces=False, now=NOW).splitlines()[1].split()[4] == "2/3"


def test_without_a_snapshot_the_spec_steps_toward_the_target_are_shown() -> None:
    offload = sample(phase="Idle", targetPlacement="home", awayWeight=0, stepIndex=0)
    assert rendering.migration_steps(offload) == (10, 25, 50, 75, 100)
    assert "Step:         0/5 (toward home: 10,25,50,75,100; 30s per step)" in rendering.render_status(
        offload, now=NOW
    )
    offload["spec"]["strategy"]["stepIntervalSeconds"] = 60
    assert "; 60s per step)" in rendering.render_status(offload, now=NOW)


# -- the Recent events section -----------------------------------------------------------------------


def event(
    reason: str,
    at: str,
    message: str = "",
    *,
    version: int,
    type_: str = "Normal",
    uid: str | None = "offload-uid",
    **extra: Any,
) -> dict[str, Any]:
    involved: dict[str, Any] = {
        "apiVersion": "offload.vk-provider.dev/v1alpha1",
        "kind": "Offload",
        "name": "chat",
        "namespace": "ml",
    }
    if uid is not None:
        involved["uid"] = uid
    return {
        "metadata": {"name": f"chat.{version:04d}", "namespace": "ml", "resourceVersion": str(version)},
        "involvedObject": involved,
        "type": type_,
        "reason": reason,
        "message": message or reason,
        "count": 1,
        "firstTimestamp": at,
        "lastTimestamp": at,
        **extra,
    }


MINE = {**SHIFTING, "metadata": {**SHIFTING["metadata"], "uid": "offload-uid"}}


def test_recent_events_are_the_last_five_of_this_offload_newest_last() -> None:
    events = [
        event("StepApplied", "2026-12-02T11:59:00Z", version=20),
        event("Older", "2026-12-02T11:50:00Z", version=30),  # listed late, happened early
        event("SameSecondFirst", "2026-12-02T11:58:00Z", version=15),
        event("SameSecondSecond", "2026-12-02T11:58:00Z", version=16),
        event("FromBefore", "2026-12-02T11:59:30Z", version=40, uid="an-old-offload-of-that-name"),
        event("WithoutUid", "2026-12-02T11:57:00Z", version=12, uid=None),
        event("Oldest", "2026-12-02T11:00:00Z", version=5),
        {
            "metadata": {"name": "chat.new", "resourceVersion": "50"},
            "involvedObject": {"kind": "Offload", "name": "chat", "uid": "offload-uid"},
            "reason": "MicroTime",
            "type": "Normal",
            "eventTime": "2026-12-02T11:59:45.123456Z",
        },
    ]
    shown = rendering.recent_events(events, MINE)
    assert [item["reason"] for item in shown] == [
        "WithoutUid",
        "SameSecondFirst",
        "SameSecondSecond",
        "StepApplied",
        "MicroTime",
    ]
    # An Offload without a uid (a hand-written sample) keeps every Event.
    assert len(rendering.recent_events(events, SHIFTING, limit=100)) == len(events)


def test_the_events_section_is_a_table_cut_to_the_page_width() -> None:
    long_message = "away weight 50 failed its gates (1 of 3); holding: " + "x" * 200
    events = [
        event(
            "MigrationStarted", "2026-12-02T11:57:00Z", "moving away: away weight 0 -> 25 -> 50", version=1
        ),
        event("GateFailed", "2026-12-02T11:59:48Z", long_message, version=2, type_="Warning"),
    ]
    lines = section(rendering.render_status(MINE, rendering.EventList(events), now=NOW), "Recent events:")
    assert lines[1].split() == ["AGE", "TYPE", "REASON", "MESSAGE"]
    assert lines[2].split(maxsplit=3) == [
        "3m",
        "Normal",
        "MigrationStarted",
        "moving away: away weight 0 -> 25 -> 50",
    ]
    assert lines[3].split()[:3] == ["12s", "Warning", "GateFailed"]
    assert lines[3].endswith("...")
    assert len(lines[3]) == rendering.PAGE_WIDTH
    assert lines[3].index("GateFailed") == lines[2].index("MigrationStarted")  # aligned columns
    assert lines[1].index("MESSAGE") == lines[2].index("moving")


def test_repeated_events_show_their_count_and_a_message_on_one_line() -> None:
    repeated = event(
        "GateFailed", "2026-12-02T11:59:30Z", "error rate\nabove 1%", version=3, type_="Warning", count=4
    )
    repeated["firstTimestamp"] = "2026-12-02T11:50:00Z"
    lines = rendering.event_lines(rendering.EventList([repeated]), MINE, NOW)
    assert lines[2].split() == [
        "30s",
        "(x4",
        "over",
        "10m)",
        "Warning",
        "GateFailed",
        "error",
        "rate",
        "above",
        "1%",
    ]


def test_no_events_and_events_that_could_not_be_listed() -> None:
    assert rendering.event_lines(rendering.EventList(), MINE, NOW) == ["Recent events:", "  (none)"]
    note = rendering.EventList(note="not shown: listing events is forbidden (403)")
    text = rendering.render_status(MINE, note, now=NOW)
    assert text.splitlines()[-2:] == ["Recent events:", "  (not shown: listing events is forbidden (403))"]
    # Without events at all (as before), the page has no such section.
    assert "Recent events:" not in rendering.render_status(MINE, now=NOW)


@pytest.mark.parametrize(("text", "width", "cut"), [("a  b\tc", 10, "a b c"), ("abcdefghij", 8, "abcde...")])
def test_shorten(text: str, width: int, cut: str) -> None:
    assert rendering.shorten(text, width) == cut


def test_status_shows_a_spill_over_offloads_sides_split_and_cost() -> None:
    spilling = sample()
    spilling["spec"].update(replicas=5, spillOver={"maxHomeReplicas": 2, "maxAwayReplicas": 6})
    spilling["status"]["spillOver"] = {
        "homeReplicas": 2,
        "homeReadyReplicas": 2,
        "awayReplicas": 3,
        "awayReadyReplicas": 2,
        "capacityWeight": 50,
        "awayCostPerHour": 1.02,
    }
    lines = rendering.render_status(spilling, now=NOW).splitlines()
    at = lines.index("Spill-over:   5 replicas wanted; home holds 2, away 0..6")
    assert " ".join(lines[at + 1].split()) == "home 2/2 ready, away 2/3 ready; capacity split 50% away"
    assert lines[at + 2].split() == ["away", "cost:", "$1.02/hour"]
    assert "Spill-over" not in rendering.render_status(SHIFTING, now=NOW)


def test_status_shows_the_away_replicas_kept_warm_in_one_line() -> None:
    warming = sample()
    warming["metadata"]["annotations"] = {"offload.vk-provider.dev/warmed-by": "policy/train"}
    warming["status"]["warm"] = {
        "replicas": 2,
        "ready": 1,
        "until": "2026-12-07T03:00:00Z",
        "reason": "WarmUp",
    }
    lines = rendering.render_status(warming, now=NOW).splitlines()
    assert "Away warm:    1/2 ready (warm-up until 2026-12-07T03:00:00Z, for policy/train)" in lines
    warming["status"]["warm"] = {"replicas": 1, "ready": 1, "reason": "PilotLight"}
    lines = rendering.render_status(warming, now=NOW).splitlines()
    assert "Away warm:    1/1 ready (pilot light, spec.away.warmReplicas)" in lines
    warming["status"]["warm"] = {"replicas": 0, "ready": 0, "reason": "Cold"}
    assert "Away warm" not in rendering.render_status(warming, now=NOW)
