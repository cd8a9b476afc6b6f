"""The cluster-independent parts of `kubectl offload uninstall`: the patch home and when an Offload has
arrived, what counts as left behind and how it is said, the controller's Lease, and the flags."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from vk_provider.cli import build_offload_parser
from vk_provider.kit import kubeconfigs
from vk_provider.offload.names import FINALIZER, OFFLOAD_LABEL, RETRY_ANNOTATION
from vk_provider.offloadcli import connection, controllerlease, homing, leftovers

NOW = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)
STAMP = "2026-12-06T12:00:00.000000Z"


def offload(
    placement: str = "away", *, generation: int = 3, paused: bool = False, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ml", "name": "chat", "generation": generation, "finalizers": [FINALIZER]},
        "spec": {"placement": placement, "paused": paused},
        "status": status,
    }


def test_the_patch_home_holds_it_resumes_it_and_drops_a_one_off_strategy() -> None:
    patch = homing.home_patch(offload(phase="Succeeded", awayWeight=100), NOW, STAMP)
    assert patch["spec"] == {"placement": "home", "paused": False}
    annotations = patch["metadata"]["annotations"]
    assert annotations["offload.vk-provider.dev/hold-until"] == "next-flip"
    assert annotations["offload.vk-provider.dev/flip-strategy"] is None
    assert RETRY_ANNOTATION not in annotations


def test_a_migration_home_that_ended_badly_is_asked_again() -> None:
    current = offload("home", phase="RolledBack", awayWeight=50, targetPlacement="home")
    patch = homing.home_patch(current, NOW, STAMP)
    assert patch["metadata"]["annotations"][RETRY_ANNOTATION] == STAMP
    sent = homing.sent_from(
        {**current, **patch, "metadata": {**current["metadata"], **patch["metadata"]}}, STAMP
    )
    assert sent == homing.Sent(3, STAMP)
    # Its old ending does not count until the controller takes the retry up.
    assert homing.outcome(current | {"status": {**current["status"], "observedGeneration": 3}}, sent) is None


def test_home_means_placed_home_at_weight_0_with_nothing_running_or_paused() -> None:
    assert homing.is_home(offload("home", phase="Succeeded", awayWeight=0))
    assert homing.is_home(offload("home", phase="RolledBack", awayWeight=0))  # an aborted flip away
    assert not homing.is_home(offload("home", phase="Shifting", awayWeight=0))
    assert not homing.is_home(offload("home", phase="Succeeded", awayWeight=25))
    assert not homing.is_home(offload("home", paused=True, phase="Paused", awayWeight=0))
    assert not homing.is_home(offload("away", phase="Succeeded", awayWeight=0))


def test_the_outcome_waits_for_the_controller_then_says_home_or_why_not() -> None:
    sent = homing.Sent(4, None)
    assert (
        homing.outcome(offload("home", phase="Succeeded", awayWeight=100, observedGeneration=3), sent) is None
    )
    assert (
        homing.outcome(offload("home", phase="Shifting", awayWeight=50, observedGeneration=4), sent) is None
    )
    assert homing.outcome(offload("home", phase="Succeeded", awayWeight=0, observedGeneration=4), sent) == ""
    rolled_back = offload(
        "home", phase="RolledBack", awayWeight=100, observedGeneration=4, targetPlacement="home"
    )
    assert "kubectl offload flip chat --to home -n ml" in (homing.outcome(rolled_back, sent) or "")
    not_ready = offload(
        "home",
        phase="Succeeded",
        awayWeight=100,
        observedGeneration=4,
        conditions=[
            {"type": "Ready", "status": "False", "reason": "HomeMissing", "message": "no Deployment"}
        ],
    )
    assert homing.outcome(not_ready, sent) == "not Ready (HomeMissing: no Deployment); nothing moves"


def pod(name: str, node: str, *, offload_name: str | None = None, daemonset: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"namespace": "ml", "name": name, "labels": {}}
    if offload_name:
        metadata["labels"][OFFLOAD_LABEL] = offload_name
    if daemonset:
        metadata["ownerReferences"] = [{"kind": "DaemonSet", "name": "proxy"}]
    return {"metadata": metadata, "spec": {"nodeName": node}, "status": {"phase": "Running"}}


def test_provider_pods_are_those_on_virtual_nodes_but_daemonsets() -> None:
    pods = [
        pod("chat-away-1", "burst", offload_name="chat"),
        pod("proxy-x", "burst", daemonset=True),
        pod("chat-1", "gpu-0"),
        pod("batch", "burst"),
    ]
    found = leftovers.provider_pods(pods, {"burst"})
    assert [item["metadata"]["name"] for item in found] == ["chat-away-1", "batch"]
    assert (
        leftovers.describe_pod(found[0])
        == "pod ml/chat-away-1 on node burst (Running; away pod of Offload chat)"
    )
    assert "not an Offload's: uninstall does not delete it" in leftovers.describe_pod(found[1])


def test_a_left_offload_says_where_it_is_and_what_holds_it() -> None:
    item = offload(
        "home",
        phase="Succeeded",
        awayWeight=0,
        message="serving home",
        conditions=[{"type": "Deleting", "status": "True", "message": "waiting for 1 away pods"}],
    )
    item["metadata"]["deletionTimestamp"] = "2026-12-06T12:00:00Z"
    assert leftovers.describe_offload(item) == (
        f"Offload ml/chat: placement home, phase Succeeded, away weight 0%, deleted, held by finalizer "
        f"{FINALIZER}: waiting for 1 away pods"
    )


def test_only_offloads_at_home_without_the_finalizer_need_no_controller() -> None:
    home = offload("home", phase="Succeeded", awayWeight=0)
    assert leftovers.needs_controller(home)  # the finalizer: only the controller removes it
    home["metadata"]["finalizers"] = []
    assert not leftovers.needs_controller(home)
    away = offload("away", phase="Succeeded", awayWeight=100)
    away["metadata"]["finalizers"] = []
    assert leftovers.needs_controller(away)


def lease(holder: str | None, renewed_seconds_ago: float, duration: int = 15) -> dict[str, Any]:
    renewed = (NOW - timedelta(seconds=renewed_seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": duration}}


def test_the_lease_says_whether_a_controller_runs() -> None:
    where = "vk-provider-system/vk-provider-controller"
    assert controllerlease.judge(lease("c-0", 3), where, NOW).running is True
    assert controllerlease.judge(lease("c-0", 20), where, NOW).running is True  # within the clock margin
    expired = controllerlease.judge(lease("c-0", 60), where, NOW)
    assert expired.running is False
    assert expired.text == f"the Lease {where} of c-0 expired: last renewed 60s ago"
    assert "given up" in controllerlease.judge(lease(None, 1), where, NOW).text
    assert "does not exist" in controllerlease.judge(None, where, NOW).text


def test_the_lease_flag_needs_a_namespace_and_a_name() -> None:
    assert controllerlease.parse_lease("system/ctl") == ("system", "ctl")
    for bad in ("ctl", "/ctl", "system/", "a/b/c"):
        with pytest.raises(ValueError, match="is not NAMESPACE/NAME"):
            controllerlease.parse_lease(bad)


def test_uninstall_flags_and_their_defaults() -> None:
    parser = build_offload_parser()
    parsed = parser.parse_args(["uninstall"])
    assert parsed.migration_command == "uninstall"
    assert (parsed.namespace, parsed.timeout, parsed.dry_run, parsed.force) == (None, 600, None, False)
    assert parsed.controller_lease == ("vk-provider-system", "vk-provider-controller")
    assert parsed.virtual_nodes == "node-restriction.kubernetes.io/vk-provider=true"
    parsed = parser.parse_args(["uninstall", "-n", "ml", "--timeout", "2m", "--controller-lease", "x/y"])
    assert (parsed.namespace, parsed.timeout, parsed.controller_lease) == ("ml", 120, ("x", "y"))


@pytest.mark.parametrize(("flag", "value"), [("--timeout", "soon"), ("--controller-lease", "nope")])
def test_bad_uninstall_flags_exit_2_with_the_reason(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_offload_parser().parse_args(["uninstall", flag, value])
    assert exited.value.code == 2
    assert repr(value) in capsys.readouterr().err


def test_in_a_pod_with_no_kubeconfig_the_service_account_is_used(tmp_path: Path) -> None:
    pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    assert kubeconfigs.in_cluster(None, None, pod, tmp_path)
    assert not kubeconfigs.in_cluster("/k", None, pod, tmp_path)
    assert not kubeconfigs.in_cluster(None, "lab", pod, tmp_path)
    assert not kubeconfigs.in_cluster(None, None, {**pod, "KUBECONFIG": "/k"}, tmp_path)
    assert not kubeconfigs.in_cluster(None, None, {}, tmp_path)
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("{}")
    assert not kubeconfigs.in_cluster(None, None, pod, tmp_path)
    (tmp_path / "namespace").write_text("vk-provider-system\n")
    assert connection.pod_namespace(tmp_path) == "vk-provider-system"
    assert connection.pod_namespace(tmp_path / "missing") is None
