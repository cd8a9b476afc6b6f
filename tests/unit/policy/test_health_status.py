"""Which rule judged each node, in the policy's status, and the cap's condition and Event message."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.unit.policy.fixtures import NOW, node, policy
from vk_provider.policy.controller import cap_message
from vk_provider.policy.health import Verdict
from vk_provider.policy.healthcap import apply_cap
from vk_provider.policy.model import NodeHealth, Observed
from vk_provider.policy.observe import Observation
from vk_provider.policy.severity import Finding, Severity
from vk_provider.policy.signals import HealthReport
from vk_provider.policy.status import conditions_for, health_cap_condition, pool_entry

pytestmark = pytest.mark.unit

XID_79 = Finding("Xid", Severity.FATAL, "GPU 1 raised Xid 79 (fatal: GPU fallen off the bus)", NOW)
HOT = Finding(
    "Temperature", Severity.DEGRADING, "GPU 2 at 85 °C > 78 °C (degrading)", NOW - timedelta(minutes=3)
)
PENDING = Finding(
    "RowRemapPending", Severity.INFORMATIONAL, "GPU 0 has a row remap pending (informational)", NOW
)


def observation(states: dict[str, NodeHealth], **report: object) -> Observation:
    nodes = tuple(node(name, health=health) for name, health in states.items())
    return Observation(Observed(nodes=nodes), [], {}, HealthReport(states, **report))  # type: ignore[arg-type]


def test_each_node_says_the_rule_that_judged_it_and_every_finding() -> None:
    states = {
        "gpu-a": NodeHealth(
            False, False, "Xid", XID_79.detail, NOW, (XID_79, PENDING), XID_79, Verdict.FATAL
        ),
        "gpu-b": NodeHealth(True, True, None, HOT.detail, NOW, (HOT,), HOT, Verdict.DUE, held_back=True),
        "gpu-c": NodeHealth(True, True, None, PENDING.detail, NOW, (PENDING,), PENDING, Verdict.CLEAR),
        "gpu-d": NodeHealth(True, True, None, HOT.detail, NOW, (HOT,), HOT, Verdict.PENDING),
        "gpu-e": NodeHealth(),
    }
    entries = {entry["name"]: entry for entry in pool_entry(observation(states), policy())["nodes"]}
    assert entries["gpu-a"]["rule"] == {
        "signal": "Xid",
        "severity": "Fatal",
        "detail": "GPU 1 raised Xid 79 (fatal: GPU fallen off the bus)",
        "since": "2026-12-03T12:00:00Z",
        "action": "tainted",
    }
    assert [f["signal"] for f in entries["gpu-a"]["findings"]] == ["Xid", "RowRemapPending"]
    assert (entries["gpu-b"]["rule"]["action"], entries["gpu-b"]["heldBack"]) == ("held back", True)
    assert entries["gpu-c"]["rule"]["action"] == "reported"
    # Pending: the moment it taints unless the signal stops (since + degradingForSeconds, 600 s).
    assert entries["gpu-d"]["rule"]["action"] == "pending"
    assert entries["gpu-d"]["rule"]["due"] == "2026-12-03T12:07:00Z"
    assert "rule" not in entries["gpu-e"]
    assert "findings" not in entries["gpu-e"]


def test_the_cap_is_in_the_pool_a_condition_and_an_event_naming_the_held_back() -> None:
    cap = apply_cap(
        {"gpu-a": NOW, "gpu-b": NOW, "gpu-c": NOW - timedelta(seconds=5)}, [], share=0.25, pool_nodes=4
    )
    states = {
        "gpu-a": NodeHealth(True, True, None, HOT.detail, NOW, (HOT,), HOT, Verdict.DUE, held_back=True),
        "gpu-b": NodeHealth(True, True, None, HOT.detail, NOW, (HOT,), HOT, Verdict.DUE, held_back=True),
        "gpu-c": NodeHealth(False, False, "Temperature", HOT.detail, NOW, (HOT,), HOT, Verdict.DUE),
        "gpu-d": NodeHealth(),
    }
    seen = observation(states, cap=cap)
    assert pool_entry(seen, policy())["healthCap"] == {
        "maxNonFatalShare": 0.25,
        "poolNodes": 4,
        "slots": 1,
        "held": [],
        "heldBack": ["gpu-a", "gpu-b"],
    }
    status, reason, message = health_cap_condition(cap)
    assert (status, reason) == ("True", "CapReached")
    assert message.endswith("not pulled: gpu-a, gpu-b")
    assert cap_message(seen) == (
        "would have pulled gpu-a (Temperature), gpu-b (Temperature): maxNonFatalShare 0.25 of 4 nodes "
        "allows 1 tainted for non-fatal reasons at once"
    )
    conditions = conditions_for(
        [], NOW, 1, problem=None, observed=seen.observed, policy=policy(), health_cap=cap
    )
    assert next(c for c in conditions if c["type"] == "HealthCapReached")["status"] == "True"
    within = apply_cap({}, [], share=0.25, pool_nodes=4)
    assert health_cap_condition(within)[:2] == ("False", "WithinCap")
