"""Turn what the provider reports into a complete Kubernetes pod status. Pure, no I/O.

The status is written as a strategic-merge patch of pods/status: conditions merge by type, so the
conditions other controllers own (readiness gates, DisruptionTarget) survive; containerStatuses and
podIPs are replaced whole, so no stale entry lingers. How depends on the field's patch strategy in
core/v1: podIPs and hostIPs merge by `ip`, so they carry the `$patch: replace` directive;
containerStatuses and initContainerStatuses are atomic, so a plain list already replaces them, and a
directive there would be stored as a blank status whenever the pod had none yet. A transition time
moves only when a condition's status changes, as the kubelet does.

The traffic address, its auth marker and the node's seal over both ride in the same patch, as three
conditions of our own types (`vk_provider.offload.names`), value in `message`: the router takes only
what the pod's status says, sealed with the key only our nodes and routers hold
(`vk_provider.kit.traffic_signature`), so one write per transition reports the state and publishes
where its traffic goes. They are published only for the pods an
Offload routes to (those carrying `OFFLOAD_LABEL`, the only pods the router reads them from): every
other pod's status stays as small as a kubelet's. The placement a provider chose rides the same way,
as the `Chosen` condition (`vk_provider.kit.placement.record`). The apiserver accepts any qualified
name as a pod condition type.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from vk_provider.kit.placement.annotations import CHOSEN_ANNOTATION
from vk_provider.kit.placement.record import CHOSEN_CONDITION, PLACED_EVENT_REASON, chosen_annotation
from vk_provider.kit.traffic_signature import TrafficKey, seal
from vk_provider.offload.names import (
    OFFLOAD_LABEL,
    TRAFFIC_ADDRESS_CONDITION,
    TRAFFIC_AUTH_CONDITION,
    TRAFFIC_CONDITION_REASON,
    TRAFFIC_SIGNATURE_CONDITION,
)
from vk_provider.provider import ContainerState, ContainerStateKind, ContainerTermination, PodRef, PodState

OUR_CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")
TRAFFIC_CONDITIONS = (TRAFFIC_ADDRESS_CONDITION, TRAFFIC_AUTH_CONDITION, TRAFFIC_SIGNATURE_CONDITION)
VALUED_CONDITIONS = (*TRAFFIC_CONDITIONS, CHOSEN_CONDITION)
"""Our conditions whose value is their `message`."""
PROVIDER_FAILED = "ProviderFailed"
CREATING = {"reason": "ContainerCreating"}
TERMINAL = ("Succeeded", "Failed")


def _never_started(state: PodState) -> dict[str, str]:
    """What a container of a terminal pod waits for when the provider never ran it: nothing any more.

    Not `ContainerCreating`, which says it is on its way (and which `kubectl get pods` would show instead
    of the pod's reason): the pod's own reason and message (`OutOfnvidia.com/gpu`, `ProviderFailed`), as
    the kubelet shows a rejected pod's reason.
    """
    waiting = {"reason": state.reason or ("PodCompleted" if state.phase == "Succeeded" else "PodFailed")}
    if state.message:
        waiting["message"] = state.message
    return waiting


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _termination(termination: ContainerTermination) -> dict[str, Any]:
    return {
        "exitCode": termination.exit_code,
        "reason": termination.reason,
        "message": termination.message,
        "startedAt": iso(termination.started_at),
        "finishedAt": iso(termination.finished_at),
    }


def _container_status(
    spec: Mapping[str, Any],
    state: ContainerState | None,
    pod_uid: str,
    waiting: Mapping[str, str] = CREATING,
) -> dict[str, Any]:
    """`waiting`: the state shown for a container the provider says nothing of (or that waits without
    a reason): being created, while the pod may still run."""
    name = spec["name"]
    status: dict[str, Any] = {
        "name": name,
        "image": spec.get("image", ""),
        "imageID": "",
        "containerID": f"vk-provider://{pod_uid}/{name}",
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {"waiting": dict(waiting)},
        "lastState": {},
    }
    if state is None:
        return status
    if state.container_id:
        status["containerID"] = state.container_id
    status["ready"] = state.ready and state.state is ContainerStateKind.RUNNING
    status["restartCount"] = state.restart_count
    status["started"] = state.started and state.state is ContainerStateKind.RUNNING
    if state.state is ContainerStateKind.RUNNING:
        status["state"] = {"running": {"startedAt": iso(state.started_at)}}
    elif state.state is ContainerStateKind.TERMINATED:
        termination = state.termination or ContainerTermination(exit_code=0, reason=state.reason)
        status["state"] = {"terminated": _termination(termination)}
    elif state.reason:
        status["state"] = {
            "waiting": {"reason": state.reason, **({"message": state.message} if state.message else {})}
        }
    else:
        status["state"] = {"waiting": dict(waiting)}
    if state.last_termination is not None:
        status["lastState"] = {"terminated": _termination(state.last_termination)}
    return status


def _conditions(
    current: list[dict[str, Any]],
    wanted: dict[str, bool],
    now: datetime,
    reasons: Mapping[str, str],
    messages: Mapping[str, str],
) -> list[dict[str, Any]]:
    before = {condition.get("type"): condition for condition in current}
    result = []
    for kind in OUR_CONDITIONS:
        word = "True" if wanted[kind] else "False"
        earlier = before.get(kind)
        transition = (
            earlier.get("lastTransitionTime")
            if earlier is not None and earlier.get("status") == word and earlier.get("lastTransitionTime")
            else iso(now)
        )
        condition: dict[str, Any] = {
            "type": kind,
            "status": word,
            "lastProbeTime": None,
            "lastTransitionTime": transition,
        }
        if not wanted[kind] and kind in reasons:
            condition["reason"] = reasons[kind]
        elif earlier is not None and earlier.get("reason"):
            # The strategic merge merges a condition field by field: a reason the patch leaves out
            # stays (a Ready=True with reason ContainersNotReady, which `differs` then finds wrong on
            # every pass, a write each time). A null deletes it.
            condition["reason"] = None
        if not wanted[kind] and messages.get(kind):
            condition["message"] = messages[kind]
        elif earlier is not None and earlier.get("message"):
            condition["message"] = None  # as for the reason: a null deletes it
        result.append(condition)
    return result


def _valued_conditions(
    current: list[dict[str, Any]], values: list[tuple[str, str, str | None]], now: datetime
) -> list[dict[str, Any]]:
    """Conditions (type, reason, value) whose value is their message, always True; a value of None is
    left as it is (the merge by type keeps it)."""
    before = {condition.get("type"): condition for condition in current}
    result = []
    for kind, reason, value in values:
        if not value:
            continue
        earlier = before.get(kind)
        transition = (
            earlier.get("lastTransitionTime")
            if earlier is not None and earlier.get("status") == "True" and earlier.get("lastTransitionTime")
            else iso(now)
        )
        result.append(
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": value,
                "lastProbeTime": None,
                "lastTransitionTime": transition,
            }
        )
    return result


def _traffic_values(
    pod: Mapping[str, Any], state: PodState, traffic_key: TrafficKey | None
) -> list[tuple[str, str, str | None]]:
    """The traffic address, auth marker and seal to publish: only for a pod an Offload routes to; a
    value the provider does not give is left as it is, since the provider reports the address only
    while it runs.

    The seal covers the provider's own values only, never what the status holds: an address someone
    else wrote there while the provider gave none must stay unsealed. A marker the provider does not
    give is sealed as none, so a marker written beside the address by anyone else breaks the seal."""
    if OFFLOAD_LABEL not in (pod["metadata"].get("labels") or {}):
        return []
    signature = None
    if traffic_key is not None and state.traffic_address:
        signature = seal(
            traffic_key,
            uid=pod["metadata"]["uid"],
            address=state.traffic_address,
            marker=state.traffic_auth or "",
        )
    return [
        (TRAFFIC_ADDRESS_CONDITION, TRAFFIC_CONDITION_REASON, state.traffic_address),
        (TRAFFIC_AUTH_CONDITION, TRAFFIC_CONDITION_REASON, state.traffic_auth),
        (TRAFFIC_SIGNATURE_CONDITION, TRAFFIC_CONDITION_REASON, signature),
    ]


def _chosen_value(pod: Mapping[str, Any], state: PodState) -> list[tuple[str, str, str | None]]:
    """The placement to record, unless an older node's annotation records the same already (a node
    upgrade then costs no write)."""
    if state.placement is None:
        return []
    chosen = chosen_annotation(state.placement)
    if (pod["metadata"].get("annotations") or {}).get(CHOSEN_ANNOTATION) == chosen:
        return []
    return [(CHOSEN_CONDITION, PLACED_EVENT_REASON, chosen)]


def _unready_message(statuses: list[dict[str, Any]], states: Mapping[str, ContainerState]) -> str:
    """The kubelet's message for ContainersReady/Ready ("containers with unready status: [a b]"), with
    the stage a provider gives for a running container that is not ready yet (a model loading, say)."""
    unready = [status["name"] for status in statuses if not status["ready"]]
    if not unready:
        return ""
    message = f"containers with unready status: [{' '.join(unready)}]"
    stages = [
        f"{name}: {state.reason}" + (f": {state.message}" if state.message else "")
        for name in unready
        if (state := states.get(name)) is not None
        and state.state is ContainerStateKind.RUNNING
        and state.reason
    ]
    return f"{message} ({'; '.join(stages)})" if stages else message


def _readiness_gates_pass(pod: Mapping[str, Any]) -> bool:
    gates = [gate["conditionType"] for gate in pod["spec"].get("readinessGates", [])]
    conditions = {c.get("type"): c.get("status") for c in pod.get("status", {}).get("conditions", [])}
    return all(conditions.get(gate) == "True" for gate in gates)


def pod_status(
    pod: Mapping[str, Any],
    state: PodState,
    *,
    host_ip: str,
    now: datetime,
    traffic_key: TrafficKey | None = None,
) -> dict[str, Any]:
    """The status to write for `pod` given the provider's `state`; its traffic address sealed with
    `traffic_key` (none without one: the router then sends it nothing)."""
    spec = pod["spec"]
    current = pod.get("status", {})
    by_name = {container.name: container for container in state.containers}
    init_by_name = {container.name: container for container in state.init_containers}
    uid = pod["metadata"]["uid"]
    waiting = _never_started(state) if state.phase in TERMINAL else CREATING
    containers = [
        _container_status(c, by_name.get(c["name"]), uid, waiting) for c in spec.get("containers", [])
    ]
    init_containers = [
        _container_status(c, init_by_name.get(c["name"]), uid, waiting)
        for c in spec.get("initContainers", [])
    ]
    initialized = all(
        (state_ := init_by_name.get(c["name"])) is not None
        and state_.state is ContainerStateKind.TERMINATED
        and (state_.termination is None or state_.termination.exit_code == 0)
        for c in spec.get("initContainers", [])
    )
    containers_ready = bool(containers) and all(status["ready"] for status in containers)
    ready = containers_ready and state.phase == "Running" and _readiness_gates_pass(pod)
    reasons = {
        "Initialized": "ContainersNotInitialized",
        "ContainersReady": "ContainersNotReady",
        "Ready": "ContainersNotReady" if not containers_ready else "ReadinessGatesNotReady",
    }
    unready = "" if state.phase in TERMINAL else _unready_message(containers, by_name)
    messages = {"ContainersReady": unready, "Ready": unready if not containers_ready else ""}
    if state.phase in ("Succeeded", "Failed"):
        reasons["Ready"] = reasons["ContainersReady"] = "PodCompleted"
    status: dict[str, Any] = {
        "phase": state.phase,
        "conditions": _conditions(
            current.get("conditions", []),
            {
                "PodScheduled": True,
                "Initialized": initialized,
                "ContainersReady": containers_ready,
                "Ready": ready,
            },
            now,
            reasons,
            messages,
        )
        + _valued_conditions(
            current.get("conditions", []),
            _traffic_values(pod, state, traffic_key) + _chosen_value(pod, state),
            now,
        ),
        "containerStatuses": containers,
        "hostIP": host_ip,
        "hostIPs": [{"$patch": "replace"}, {"ip": host_ip}],
        "startTime": current.get("startTime") or iso(state.started_at or now),
        "reason": state.reason,
        "message": state.message,
    }
    if init_containers:
        status["initContainerStatuses"] = init_containers
    if state.pod_ip:
        status["podIP"] = state.pod_ip
        status["podIPs"] = [{"$patch": "replace"}, {"ip": state.pod_ip}]
    return status


def provider_failed_status(
    pod: Mapping[str, Any], message: str, *, host_ip: str, now: datetime, final: bool = True
) -> dict[str, Any]:
    """Pending with reason ProviderFailed and the provider's words; Failed when the pod must not restart
    and the failure is `final` (the provider refuses the pod for good). A temporary one (no capacity, a
    throttled or unavailable provider) leaves even such a pod Pending, as a kubelet leaves a pod whose
    image cannot be pulled yet: a Job's pod must not fail for a GPU that is short for a while."""
    never = final and pod["spec"].get("restartPolicy", "Always") == "Never"
    metadata = pod["metadata"]
    state = PodState(
        ref=PodRef(metadata["namespace"], metadata["name"], metadata["uid"]),
        phase="Failed" if never else "Pending",
        reason=PROVIDER_FAILED,
        message=message,
    )
    return pod_status(pod, state, host_ip=host_ip, now=now)


def differs(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Would writing `wanted` change the API's status? Compares without patch directives."""

    def plain(value: Any) -> Any:
        if isinstance(value, list):
            return [plain(item) for item in value if not (isinstance(item, dict) and "$patch" in item)]
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items() if item is not None and item != {}}
        return value

    def comparable_conditions(conditions: list[dict[str, Any]], types: tuple[str, ...]) -> dict[str, Any]:
        # A valued condition's value is its message; ours say all in status and reason.
        return {
            c["type"]: (
                c.get("status"),
                c.get("reason"),
                c.get("message") if c["type"] in VALUED_CONDITIONS else None,
            )
            for c in conditions
            if c.get("type") in types
        }

    for key, value in wanted.items():
        if key == "conditions":
            # Every condition we write, and only those: a valued condition the wanted status leaves
            # out is kept by the merge, so its absence there is no difference.
            types = tuple(c["type"] for c in value)
            if comparable_conditions(current.get("conditions", []), types) != comparable_conditions(
                value, types
            ):
                return True
        elif plain(current.get(key)) != plain(value):
            return True
    return False


def merged(current: Mapping[str, Any], written: Mapping[str, Any]) -> dict[str, Any]:
    """What the API holds after `written` was patched onto `current`, as the strategic merge does it for
    the fields `pod_status` writes: conditions merged by type and field by field (a null deletes the
    field), every other field replaced, directives dropped. For the node's memory of its own last write
    while its watch cache still lags it."""

    def plain(value: Any) -> Any:
        if isinstance(value, list):
            return [item for item in value if not (isinstance(item, dict) and "$patch" in item)]
        return value

    result = {**current, **{key: plain(value) for key, value in written.items()}}
    if "conditions" in written:
        by_type = {condition.get("type"): condition for condition in current.get("conditions") or []}
        for condition in written["conditions"]:
            fields = {**by_type.get(condition["type"], {}), **condition}
            by_type[condition["type"]] = {key: value for key, value in fields.items() if value is not None}
        result["conditions"] = list(by_type.values())
    return result
