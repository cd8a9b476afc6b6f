"""`policy list` and `policy status` pages, rendered from sample OffloadPolicy JSON (full, partial, empty
and malformed status): each section says what the policy sees and did, and nothing crashes on odd input."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from vk_provider.offloadcli import policy_rendering
from vk_provider.offloadcli.policy_rendering import render_policy_list, render_policy_status

NOW = datetime(2026, 12, 3, 16, 0, 0, tzinfo=UTC)


def policy(name: str = "training-first", status: Any = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "offload.vk-provider.dev/v1alpha1",
        "kind": "OffloadPolicy",
        "metadata": {"name": name, "generation": 2, "creationTimestamp": "2026-12-03T15:50:00Z"},
        "spec": {
            "offloads": {"selector": {"matchLabels": {"tier": "inference"}}},
            "homePool": {"nodeSelector": {"matchLabels": {"gpu-pool": "home"}}},
            **spec,
        },
    }
    if status is not None:
        body["status"] = status
    return body


FULL_STATUS: dict[str, Any] = {
    "observedGeneration": 2,
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Watching",
            "message": "2 Offloads, 8 home GPUs",
            "lastTransitionTime": "2026-12-03T15:50:00Z",
        },
        {
            "type": "TrainingDemand",
            "status": "True",
            "reason": "Shortfall",
            "message": "train/job-a is short 2 GPUs",
            "lastTransitionTime": "2026-12-03T15:59:15Z",
        },
    ],
    "demand": {
        "gpus": 6,
        "gangs": [
            {
                "kind": "Pods",
                "namespace": "train",
                "name": "job-a",
                "gpus": 6,
                "unplacedGpus": 2,
                "since": "2026-12-03T15:59:15Z",
            }
        ],
    },
    "pool": {
        "resource": "nvidia.com/gpu",
        "total": 8,
        "free": 2,
        "reserved": 4,
        "busy": 0,
        "unhealthy": 2,
        "tensorActive": 0.371,
        "nodes": [
            {
                "name": "gpu-a",
                "gpus": 4,
                "free": 0,
                "healthy": True,
                "reserved": 4,
                "temperatureCelsius": 65.5,
                "tensorActive": 0.82,
            },
            {
                "name": "gpu-b",
                "gpus": 4,
                "free": 2,
                "healthy": False,
                "reason": "Temperature",
                "since": "2026-12-03T15:58:00Z",
                "temperatureCelsius": 85,
                "tensorActive": 0.0,
            },
        ],
    },
    "offloads": [
        {
            "namespace": "ml",
            "name": "chat",
            "placement": "away",
            "phase": "Succeeded",
            "homeGpus": 4,
            "auto": "on",
            "holdUntil": "2026-12-03T17:59:00Z",
            "lastFlip": "2026-12-03T15:57:00Z",
            "lastTrigger": "person",
            "nextEligible": "2026-12-03T17:59:00Z",
        },
        {
            "namespace": "ml",
            "name": "embed",
            "placement": "home",
            "phase": "Idle",
            "homeGpus": 2,
            "auto": "off",
            "holdUntil": "next-flip",
            "nextEligible": "2026-12-03T15:00:00Z",
        },
    ],
    "decisions": [
        {
            "time": "2026-12-03T15:59:45Z",
            "action": "Skip",
            "offloads": ["ml/chat"],
            "reason": "ManualHold: held by a person until 2026-12-03T17:59:00Z",
        },
        {
            "time": "2026-12-03T15:30:00Z",
            "action": "FlipOut",
            "offloads": ["ml/chat", "ml/embed"],
            "reason": "gang train/job-a short 6 GPUs for 30s",
        },
    ],
}


def section(page: str, title: str) -> list[str]:
    """The lines of a section: its title line and the indented lines under it."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return lines[start:end]


def rows(lines: list[str]) -> dict[str, list[str]]:
    """Table rows under a section title by their first cell, cells split on runs of 3+ spaces."""
    table = [re.split(r"\s{3,}", line.strip()) for line in lines[1:] if re.search(r"\s{3,}", line.strip())]
    return {row[0]: row for row in table}


def test_list_has_one_row_per_policy_with_demand_pool_offloads_and_ready() -> None:
    listed = render_policy_list(
        [policy(status=FULL_STATUS), policy("fresh", paused=True)], now=NOW
    ).splitlines()
    assert listed[0].split() == [
        "NAME",
        "PAUSED",
        "DEMAND",
        "FREE",
        "RESERVED",
        "UNHEALTHY",
        "TOTAL",
        "OFFLOADS",
        "READY",
        "AGE",
    ]
    assert listed[1].split() == ["training-first", "no", "6", "2", "4", "2", "8", "2", "True", "10m"]
    # A policy nobody has reported on yet: its spec says paused, the rest is unknown, not zero.
    assert listed[2].split() == ["fresh", "yes", "-", "-", "-", "-", "-", "-", "-", "10m"]


def test_status_shows_the_spec_and_says_there_is_no_status_yet() -> None:
    page = render_policy_status(policy(), now=NOW)
    assert "Selects:      Offloads matching tier=inference, in every namespace" in page
    assert "Home pool:    nodes matching gpu-pool=home, resource nvidia.com/gpu" in page
    assert "out after 30s of demand, back after 600s without it" in page  # the CRD's defaults
    assert "at most 4 flips an hour per Offload" in page
    assert page.splitlines()[-1].startswith("Status:       no status yet")
    assert "Demand:" not in page


def test_status_shows_demand_per_gang() -> None:
    lines = section(render_policy_status(policy(status=FULL_STATUS), now=NOW), "Demand:")
    assert lines[0] == "Demand:       6 GPUs from 1 gang"
    assert rows(lines)["Pods"] == ["Pods", "train/job-a", "6", "2", "45s ago", "-", "-"]


def test_status_shows_how_long_a_gang_waits_and_for_what() -> None:
    gang = {
        **FULL_STATUS["demand"]["gangs"][0],
        "waitingSeconds": 130,
        "waitingFor": "WarmingAway",
        "waitingOn": ["serving/llm"],
    }
    status = {**FULL_STATUS, "demand": {"gpus": 6, "gangs": [gang]}}
    lines = section(render_policy_status(policy(status=status), now=NOW), "Demand:")
    assert lines[1].split() == ["KIND", "GANG", "GPUS", "UNPLACED", "SINCE", "WAITED", "WAITING", "FOR"]
    assert rows(lines)["Pods"][-2:] == ["2m", "WarmingAway serving/llm"]


def test_status_shows_the_pool_by_state_and_each_node_with_health_temperature_and_tensor_activity() -> None:
    page = render_policy_status(policy(status=FULL_STATUS), now=NOW)
    assert "Home GPUs:    8 nvidia.com/gpu: 2 free, 4 reserved, 0 busy, 2 unhealthy" in page
    assert "Tensor cores: 37% active on average" in page
    nodes = rows(section(page, "Tensor cores:"))
    assert nodes["gpu-a"] == ["gpu-a", "4", "0", "4", "healthy", "-", "65.5C", "82%"]
    assert nodes["gpu-b"] == ["gpu-b", "4", "2", "-", "unhealthy: Temperature", "2m ago", "85C", "0%"]
    assert "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" in page
    assert "GPU utilization alone says nothing" in page


def test_status_shows_each_offload_with_auto_hold_last_flip_and_next_eligible() -> None:
    offloads = rows(section(render_policy_status(policy(status=FULL_STATUS), now=NOW), "Offloads:"))
    assert offloads["OFFLOAD"][-1] == "NEXT ELIGIBLE"
    assert offloads["ml/chat"] == [
        "ml/chat",
        "away",
        "Succeeded",
        "4",
        "on",
        "1h59m left",
        "3m ago",
        "person",
        "in 1h59m",
    ]
    assert offloads["ml/embed"] == ["ml/embed", "home", "Idle", "2", "off", "next flip", "-", "-", "now"]


def test_status_shows_the_last_decisions_newest_first_with_their_reasons() -> None:
    page = render_policy_status(policy(status=FULL_STATUS), now=NOW)
    decisions = section(page, "Decisions (newest first):")
    assert decisions[1].split() == ["AGE", "ACTION", "ON"]
    assert decisions[2].split() == ["15s", "ago", "Skip", "ml/chat"]
    assert decisions[3] == "      ManualHold: held by a person until 2026-12-03T17:59:00Z"
    assert decisions[4].split() == ["30m", "ago", "FlipOut", "ml/chat,ml/embed"]
    assert decisions[5] == "      gang train/job-a short 6 GPUs for 30s"
    conditions = rows(section(page, "Conditions:"))
    assert conditions["TrainingDemand"][:3] == ["TrainingDemand", "True", "Shortfall"]


def test_a_decision_about_nodes_names_them_and_its_message_follows_the_reason() -> None:
    status = copy.deepcopy(FULL_STATUS)
    status["decisions"] = [
        {
            "time": "2026-12-03T15:59:50Z",
            "action": "Reserve",
            "nodes": ["gpu-a", "gpu-b"],
            "reason": "TrainingDemand",
            "message": "train/job-a needs 6 GPUs",
        }
    ]
    decisions = section(render_policy_status(policy(status=status), now=NOW), "Decisions")
    assert decisions[2].split() == ["10s", "ago", "Reserve", "node/gpu-a,node/gpu-b"]
    assert decisions[3] == "      TrainingDemand: train/job-a needs 6 GPUs"


def test_the_controllers_own_shapes_read_right() -> None:
    """The policy controller writes auto and reserved as booleans, a node that is healthy again but not
    for long enough as healthy=false without a reason, exporter errors, and when demand went away."""
    status = copy.deepcopy(FULL_STATUS)
    status["demand"] = {"gpus": 0, "gangs": [], "goneSince": "2026-12-03T15:57:00Z"}
    status["pool"]["nodes"] = [
        {
            "name": "gpu-a",
            "gpus": 4,
            "free": 4,
            "healthy": False,
            "reserved": False,
            "since": "2026-12-03T15:59:00Z",
        },
        {"name": "gpu-b", "gpus": 4, "free": 0, "healthy": True, "reserved": True},
    ]
    status["exporterErrors"] = {"dcgm/exporter-b": "unreachable: connection refused"}
    status["offloads"][0]["auto"] = False
    status["offloads"][1]["auto"] = True
    page = render_policy_status(policy(status=status), now=NOW)
    assert "Demand:       0 GPUs from 0 gangs (none since 3m ago)" in page
    nodes = rows(section(page, "Tensor cores:"))
    assert nodes["gpu-a"][3:5] == ["no", "settling"]
    assert nodes["gpu-b"][3:5] == ["yes", "healthy"]
    assert section(page, "Exporter errors:")[1] == "  dcgm/exporter-b: unreachable: connection refused"
    offloads = rows(section(page, "Offloads:"))
    assert (offloads["ml/chat"][4], offloads["ml/embed"][4]) == ("off", "on")


def test_decisions_are_capped_and_long_reasons_wrapped_to_the_page_whatever_the_names() -> None:
    status = copy.deepcopy(FULL_STATUS)
    status["decisions"] = [
        {
            "time": "2026-12-03T15:59:00Z",
            "action": "Skip",
            "offloads": [f"a-very-long-namespace-name-of-a-test-run-0123456789/chat-{i:02d}"],
            "reason": f"reason{i}: " + "word " * (60 if i == 0 else 300),
        }
        for i in range(20)
    ]
    decisions = section(render_policy_status(policy(status=status), now=NOW), "Decisions")
    rows_shown = [line for line in decisions[2:] if not line.startswith(policy_rendering.REASON_INDENT)]
    assert len(rows_shown) == policy_rendering.RECENT_DECISIONS
    assert all(len(line) <= policy_rendering.PAGE_WIDTH for line in decisions)
    first_reason = decisions[3 : decisions.index(rows_shown[1])]
    assert " ".join(line.strip() for line in first_reason) == "reason0: " + " ".join(["word"] * 60)
    second_reason = decisions[decisions.index(rows_shown[1]) + 1 : decisions.index(rows_shown[2])]
    assert len(second_reason) == policy_rendering.REASON_LINES
    assert second_reason[-1].endswith(" ...")


def test_a_partial_status_shows_what_is_there_and_names_what_is_not() -> None:
    partial = {"pool": {"total": 8, "free": 8, "reserved": 0, "busy": 0, "unhealthy": 0}}
    page = render_policy_status(policy(status=partial), now=NOW)
    assert "Home GPUs:    8 nvidia.com/gpu: 8 free, 0 reserved, 0 busy, 0 unhealthy" in page
    assert "Tensor cores: not reported" in page
    assert "Demand:       - (not reported)" in page
    assert "Offloads:     - (not reported)" in page
    assert "Decisions:    none yet" in page
    assert "no status yet" not in page


def test_no_offloads_selected_is_said_plainly() -> None:
    page = render_policy_status(policy(status={"offloads": [], "demand": {"gpus": 0, "gangs": []}}), now=NOW)
    assert "Offloads:     none selected" in page
    assert "Demand:       0 GPUs from 0 gangs" in page


@pytest.mark.parametrize(
    "status",
    [
        "junk",
        {"demand": "junk", "pool": [1, 2], "offloads": {"a": 1}, "decisions": "x", "conditions": "y"},
        {"pool": {"nodes": ["gpu-a", None, {"name": 3, "temperatureCelsius": "hot", "tensorActive": True}]}},
        {
            "demand": {"gangs": [None, {"kind": "PodGroup"}]},
            "offloads": [{"holdUntil": "soon", "lastFlip": {}}],
        },
    ],
)
def test_a_malformed_status_still_renders(status: Any) -> None:
    page = render_policy_status(policy(status=status), now=NOW)
    assert page.startswith("Name:         training-first")
    assert "Selects:" in page
    render_policy_list([policy(status=status)], now=NOW)


def test_selectors_read_as_kubectl_writes_them() -> None:
    selector = {
        "matchLabels": {"tier": "inference"},
        "matchExpressions": [
            {"key": "team", "operator": "In", "values": ["ml", "search"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "gpu", "operator": "Exists"},
        ],
    }
    assert policy_rendering.describe_selector(selector) == "tier=inference,team in (ml,search),!canary,gpu"
    assert policy_rendering.describe_selector({}) == "everything"
    assert policy_rendering.describe_selector(None) == "(not set)"


def test_a_last_flip_given_as_an_object_shows_where_and_when() -> None:
    value = {"time": "2026-12-03T15:57:00Z", "placement": "away", "trigger": "policy"}
    assert policy_rendering._last_flip(value, NOW) == "away 3m ago"


def test_status_shows_the_warm_up_asked_for() -> None:
    page = render_policy_status(policy(), now=NOW)
    assert "Warm-up:      on foreseen demand, for 600s after its last sign" in page  # the CRD's defaults
    nightly = {"holdSeconds": 300, "schedule": [{"cron": "0 2 * * *", "gpus": 8}]}
    page = render_policy_status(policy(warmUp=nightly), now=NOW)
    assert (
        "Warm-up:      on foreseen demand, for 300s after its last sign; scheduled: 0 2 * * * UTC (8 GPUs)"
        in page
    )
    assert "Warm-up:      off" in render_policy_status(policy(warmUp={"enabled": False}), now=NOW)


def test_status_says_which_rule_judged_each_node_and_what_the_cap_held_back() -> None:
    status = copy.deepcopy(FULL_STATUS)
    xid = {
        "signal": "Xid",
        "severity": "Fatal",
        "detail": "GPU 1 raised Xid 79 (fatal: GPU fallen off the bus)",
    }
    pending = {
        "signal": "RowRemapPending",
        "severity": "Informational",
        "detail": "GPU 0 has a row remap pending until its next reset (informational)",
        "since": "2026-12-03T15:50:00Z",
    }
    hot = {
        "signal": "Temperature",
        "severity": "Degrading",
        "detail": "GPU 2 at 85 °C > 78 °C (degrading)",
        "since": "2026-12-03T15:58:00Z",
    }
    status["pool"]["nodes"][0] |= {
        "rule": {**xid, "since": "2026-12-03T15:59:00Z", "action": "tainted"},
        "findings": [{**xid, "since": "2026-12-03T15:59:00Z"}, pending],
    }
    status["pool"]["nodes"][1] |= {
        "rule": {**hot, "action": "held back"},
        "findings": [hot],
        "heldBack": True,
    }
    status["pool"]["nodes"].append(
        {
            "name": "gpu-c",
            "healthy": True,
            "rule": {**hot, "action": "pending", "due": "2026-12-03T16:08:00Z"},
        }
    )
    status["pool"]["healthCap"] = {
        "maxNonFatalShare": 0.25,
        "poolNodes": 4,
        "slots": 1,
        "held": ["gpu-d"],
        "heldBack": ["gpu-b"],
    }
    page = render_policy_status(policy(status=status), now=NOW)
    assert (
        "Health rules: at most 1 of 4 nodes tainted for non-fatal reasons (maxNonFatalShare 0.25); "
        "cap reached, held back: gpu-b"
    ) in page
    lines = page.splitlines()
    row = next(line for line in lines if line.strip().startswith("gpu-a") and "Xid" in line)
    assert re.search(
        r"gpu-a\s+Xid\s+Fatal\s+60s ago\s+tainted\s+GPU 1 raised Xid 79 \(fatal: GPU fallen", row
    )
    also = lines[lines.index(row) + 1]
    assert re.search(r"^\s+RowRemapPending\s+Informational\s+10m ago\s+also\s+GPU 0 has a row remap", also)
    assert re.search(r"gpu-b\s+Temperature\s+Degrading\s+2m ago\s+held back\s+GPU 2 at 85 °C", page)
    assert re.search(r"gpu-c\s+Temperature\s+Degrading\s+2m ago\s+taints in 8m", page)


def test_a_pool_with_no_signal_says_so_or_nothing() -> None:
    status = copy.deepcopy(FULL_STATUS)
    assert "Health rules" not in render_policy_status(policy(status=status), now=NOW)
    status["pool"]["healthCap"] = {
        "maxNonFatalShare": 0.2,
        "poolNodes": 2,
        "slots": 0,
        "held": [],
        "heldBack": [],
    }
    assert (
        "Health rules: at most 0 of 2 nodes tainted for non-fatal reasons (maxNonFatalShare 0.2); "
        "no node shows a signal"
    ) in render_policy_status(policy(status=status), now=NOW)
