"""Provider states become complete pod statuses; others' conditions and stable transition times survive."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from vk_provider.node import podstatus
from vk_provider.provider import (
    ContainerState,
    ContainerStateKind,
    ContainerTermination,
    PodRef,
    PodState,
)

NOW = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)
REF = PodRef("ns", "web-0", "uid-1")


def api_pod(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "web-0", "uid": "uid-1"},
        "spec": {
            "containers": [{"name": "app", "image": "img:1"}, {"name": "sidecar", "image": "side:2"}],
            **spec,
        },
        "status": status or {},
    }


def running(name: str, *, ready: bool = True) -> ContainerState:
    return ContainerState(name, "img", ContainerStateKind.RUNNING, ready=ready, started=True, started_at=NOW)


def conditions_of(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_a_running_pod_gets_every_condition_and_a_status_per_container() -> None:
    state = PodState(REF, "Running", (running("app"), running("sidecar")), pod_ip="10.0.0.5", started_at=NOW)
    status = podstatus.pod_status(api_pod(), state, host_ip="127.0.0.1", now=NOW)
    assert status["phase"] == "Running"
    assert conditions_of(status) == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }
    names = [c["name"] for c in status["containerStatuses"]]
    assert names == ["app", "sidecar"]
    app = status["containerStatuses"][0]
    assert app["ready"] is True
    assert app["started"] is True
    assert app["restartCount"] == 0
    assert app["state"] == {"running": {"startedAt": "2026-12-02T10:00:00Z"}}
    assert app["image"] == "img:1"
    assert status["podIP"] == "10.0.0.5"
    assert status["podIPs"][1:] == [{"ip": "10.0.0.5"}]
    assert status["hostIP"] == "127.0.0.1"
    assert status["startTime"] == "2026-12-02T10:00:00Z"


def test_a_container_the_provider_does_not_report_yet_is_waiting_in_container_creating() -> None:
    state = PodState(REF, "Pending", (running("app"),))
    status = podstatus.pod_status(api_pod(), state, host_ip="127.0.0.1", now=NOW)
    sidecar = status["containerStatuses"][1]
    assert sidecar["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert sidecar["ready"] is False
    assert conditions_of(status)["Ready"] == "False"
    ready = next(c for c in status["conditions"] if c["type"] == "ContainersReady")
    assert ready["reason"] == "ContainersNotReady"


def test_a_terminated_container_reports_exit_code_reason_and_last_state() -> None:
    crashed = ContainerState(
        "app",
        "img",
        ContainerStateKind.WAITING,
        restart_count=2,
        reason="CrashLoopBackOff",
        message="back-off 20s",
        last_termination=ContainerTermination(exit_code=3, reason="Error", finished_at=NOW),
    )
    done = ContainerState(
        "sidecar", "img", ContainerStateKind.TERMINATED, termination=ContainerTermination(0, "Completed")
    )
    status = podstatus.pod_status(api_pod(), PodState(REF, "Running", (crashed, done)), host_ip="h", now=NOW)
    app, sidecar = status["containerStatuses"]
    assert app["state"] == {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}}
    assert app["restartCount"] == 2
    assert app["lastState"]["terminated"]["exitCode"] == 3
    assert sidecar["state"]["terminated"]["exitCode"] == 0
    assert sidecar["state"]["terminated"]["reason"] == "Completed"


def test_transition_times_move_only_when_the_status_changes() -> None:
    earlier = (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    current = {
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": earlier},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": earlier},
        ]
    }
    state = PodState(REF, "Running", (running("app"), running("sidecar", ready=False)))
    status = podstatus.pod_status(api_pod(current), state, host_ip="h", now=NOW)
    times = {c["type"]: c["lastTransitionTime"] for c in status["conditions"]}
    assert times["PodScheduled"] == earlier  # unchanged status keeps its time
    assert times["Ready"] == "2026-12-02T10:00:00Z"  # True -> False moves it


def test_a_readiness_gate_holds_ready_until_its_condition_is_true() -> None:
    state = PodState(REF, "Running", (running("app"), running("sidecar")))
    gated = api_pod(readinessGates=[{"conditionType": "example.com/warm"}])
    assert conditions_of(podstatus.pod_status(gated, state, host_ip="h", now=NOW))["Ready"] == "False"
    gated["status"] = {"conditions": [{"type": "example.com/warm", "status": "True"}]}
    assert conditions_of(podstatus.pod_status(gated, state, host_ip="h", now=NOW))["Ready"] == "True"


def test_conditions_owned_by_others_are_not_in_the_patch_so_they_survive_the_merge() -> None:
    current = {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}
    status = podstatus.pod_status(api_pod(current), PodState(REF, "Running"), host_ip="h", now=NOW)
    assert {c["type"] for c in status["conditions"]} == set(podstatus.OUR_CONDITIONS)


def test_lists_we_own_are_replaced_whole_by_the_strategic_merge() -> None:
    status = podstatus.pod_status(
        api_pod(), PodState(REF, "Running", pod_ip="10.0.0.9"), host_ip="h", now=NOW
    )
    # podIPs and hostIPs merge by ip in core/v1: only the directive replaces them.
    for key in ("podIPs", "hostIPs"):
        assert status[key][0] == {"$patch": "replace"}
    # containerStatuses is atomic: a plain list replaces it, and a directive would be stored as a
    # blank container status when the pod had none yet (seen on the real apiserver).
    assert all("$patch" not in item for item in status["containerStatuses"])


def test_provider_failure_is_pending_with_the_message_or_failed_when_the_pod_never_restarts() -> None:
    pending = podstatus.provider_failed_status(api_pod(), "quota exceeded", host_ip="h", now=NOW)
    assert (pending["phase"], pending["reason"], pending["message"]) == (
        "Pending",
        "ProviderFailed",
        "quota exceeded",
    )
    failed = podstatus.provider_failed_status(
        api_pod(restartPolicy="Never"), "bad image", host_ip="h", now=NOW
    )
    assert (failed["phase"], failed["reason"]) == ("Failed", "ProviderFailed")


def test_an_unchanged_status_is_not_written_again() -> None:
    state = PodState(REF, "Running", (running("app"), running("sidecar")), pod_ip="10.0.0.5", started_at=NOW)
    pod = api_pod()
    first = podstatus.pod_status(pod, state, host_ip="h", now=NOW)
    assert podstatus.differs(pod["status"], first)
    # What the API would hold after the patch (directives applied, nulls dropped).
    stored = {
        key: [item for item in value if "$patch" not in item] if isinstance(value, list) else value
        for key, value in first.items()
        if value is not None
    }
    later = podstatus.pod_status(
        {**pod, "status": stored}, state, host_ip="h", now=NOW + timedelta(minutes=5)
    )
    assert not podstatus.differs(stored, later)
