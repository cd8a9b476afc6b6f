"""`vk-provider dev ...` against a real plane: reporting, refusing to double-start or to wipe a live plane,
restarting a component, failing loudly."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.integration import top
from tests.integration.conftest import DEV_CLUSTER_GROUP
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster, kueue, processes, runpodstandin, traffic
from vk_devtools.devcluster.building import BinaryCache
from vk_devtools.devcluster.processes import ComponentFailedError
from vk_provider.kit import procfs
from vk_provider.kit.timestamps import parse_timestamp

pytestmark = DEV_CLUSTER_GROUP


def vk_provider(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vk_provider", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_dev_up_on_a_running_plane_reports_it_and_starts_nothing(control_plane: cluster.ClusterState) -> None:
    loaded = cluster.ClusterState.load(control_plane.directory)  # now: other tests add Kueue to this plane
    assert loaded is not None
    before = {record.name: record for record in loaded.processes}
    result = vk_provider("dev", "up", "--dir", str(control_plane.directory))
    assert result.returncode == 0, result.stderr
    assert "already running" in result.stdout
    assert control_plane.server in result.stdout
    after = cluster.ClusterState.load(control_plane.directory)
    assert after is not None
    running = {record.name: record for record in after.processes}
    # Every process it found is the same process (pid and start time), none restarted; the only one that
    # may have appeared meanwhile is Kueue, which `dev up` starts only when asked (`--with-kueue`).
    assert before.items() <= running.items()
    assert set(running) - set(before) <= {kueue.COMPONENT}
    assert all(processes.is_running(record) for record in after.processes)


def test_dev_status_and_kubeconfig_describe_the_running_plane(control_plane: cluster.ClusterState) -> None:
    status = vk_provider("dev", "status", "--dir", str(control_plane.directory))
    assert status.returncode == 0, status.stdout + status.stderr
    assert "readyz: ok" in status.stdout
    for name in cluster.START_ORDER:
        assert f"{name}" in status.stdout
    kubeconfig = vk_provider("dev", "kubeconfig", "--dir", str(control_plane.directory))
    assert kubeconfig.returncode == 0
    assert Path(kubeconfig.stdout.strip()) == control_plane.kubeconfig


def test_kubectl_with_the_printed_kubeconfig_reads_readyz(control_plane: cluster.ClusterState) -> None:
    kubeconfig = vk_provider("dev", "kubeconfig", "--dir", str(control_plane.directory)).stdout.strip()
    result = subprocess.run(
        [str(control_plane.bin_dir / "kubectl"), "--kubeconfig", kubeconfig, "get", "--raw", "/readyz"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "ok"


def test_a_component_that_exits_during_start_is_named_with_its_log_and_the_others_are_stopped(
    tmp_path: Path,
) -> None:
    cache = BinaryCache.default()
    settings = cluster.ClusterSettings(
        directory=tmp_path / "broken",
        use_preferred_ports=False,
        local_node=False,
        extra_args={"kube-controller-manager": ("--no-such-flag-for-this-test",)},
    )
    with pytest.raises(ComponentFailedError) as failure:
        cluster.up(
            settings,
            bin_dir=cache.ensure(wait=True),
            kubernetes_version=cache.pins.kubernetes_version,
            out=io.StringIO(),
        )
    assert failure.value.component == "kube-controller-manager"
    assert "exited with code" in str(failure.value)
    assert "no-such-flag-for-this-test" in str(failure.value)  # the end of its log is in the message
    state = cluster.ClusterState.load(settings.directory)
    assert state is not None
    assert [record.name for record in state.processes] == [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
    ]
    assert not any(processes.is_running(record) for record in state.processes)
    assert vk_provider("dev", "down", "--dir", str(settings.directory)).stdout.startswith(
        "no control plane is running"
    )


def test_dev_up_starts_the_demo_a_dead_controller_is_restarted_and_dev_down_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    """Two stories on one plain plane, one after the other: each `dev up` costs half a minute, and the
    second story needs only a plane whose demo ran (what it checks holds after the demo as before it)."""
    directory = tmp_path / "with node"  # a space: the hints must quote the folder
    up = vk_provider("dev", "up", "--any-free-ports", "--dir", str(directory))
    started = cluster.ClusterState.load(directory)
    try:
        assert up.returncode == 0, up.stderr
        assert started is not None
        _the_demo_runs(directory, up)
        asyncio.run(_a_dead_controller_leaves_the_tools_working_and_restarts(directory, up))
    finally:
        down = vk_provider("dev", "down", "--dir", str(directory))
    for component in ("node/local-gpu", "node/burst-gpu", "metrics-server", "router", "controller"):
        assert component in down.stdout
    final = cluster.ClusterState.load(directory)
    assert final is not None
    # Neither the processes `up` started (the killed controller, the restarted node among them) nor
    # their replacements run.
    assert not any(processes.is_running(record) for record in (*started.processes, *final.processes))
    # The example service's workloads went with the nodes.
    assert procfs.processes_with_environment(cluster.DEV_CLUSTER_MARK, str(directory)) == []


def _the_demo_runs(directory: Path, up: subprocess.CompletedProcess[str]) -> None:
    """`dev up` reports the demo's parts, which serve: metrics, nodes, the router's route, two flips."""
    assert "virtual node local-gpu (local provider, home-gpu) is Ready" in up.stderr
    assert "virtual node burst-gpu (local provider, burst-gpu) is Ready" in up.stderr
    assert (
        f"traffic goes through the router on http://127.0.0.1:{state_port(directory, 'router')}" in up.stderr
    )
    assert "the migration controller is running" in up.stderr
    assert "metrics-server serves v1beta1.metrics.k8s.io" in up.stderr
    assert "kubectl offload flip tokens --to away --wait" in up.stdout
    state = cluster.ClusterState.load(directory)
    assert state is not None
    # `kubectl top` through metrics-server, which scrapes the nodes' /metrics/resource.
    pods, took = asyncio.run(top.wait_for_top_pods(state, namespace="default", timeout_seconds=60))
    print(f"`kubectl top pods` had figures for every demo pod {took:.1f}s after `dev up`")
    assert len([name for name in pods if name.startswith(f"{traffic.EXAMPLE_NAME}-")]) == 2, pods
    assert top.has_figures(*top.top(state, "nodes")["local-gpu"])
    nodes = subprocess.run(
        [str(state.bin_dir / "kubectl"), f"--kubeconfig={state.kubeconfig}", "get", "nodes", "--no-headers"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert sorted(line.split()[:2] for line in nodes) == [["burst-gpu", "Ready"], ["local-gpu", "Ready"]]
    router = f"http://127.0.0.1:{state.ports['router-admin']}/-/status"
    with urllib.request.urlopen(router, timeout=10) as response:
        routes = json.load(response)["routes"]
    assert [(route["namespace"], route["name"]) for route in routes] == [("default", "tokens")]
    # By hand: the flips a person makes (the automatic story runs in the RunPod test below).
    demo = vk_provider("dev", "demo", "--manual", "--dir", str(directory))
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "kubectl offload flip tokens --to away --wait" in demo.stdout
    assert re.search(r"failed 0 \(none\)", demo.stdout), demo.stdout
    assert "training Job" not in demo.stdout


async def _a_dead_controller_leaves_the_tools_working_and_restarts(
    directory: Path, up: subprocess.CompletedProcess[str]
) -> None:
    """The dev tools work and warn while the controller is dead, `up` refuses to touch the plane, and
    `dev restart` brings the controller (and a running node) back up."""
    dir_option = f"--dir '{directory}'"  # as the hints print it (quoted: the folder has a space)
    hints = [line for line in up.stdout.splitlines() if "vk-provider dev" in line]
    assert len(hints) >= 3, up.stdout
    assert all(dir_option in line for line in hints), hints
    state = cluster.ClusterState.load(directory)
    assert state is not None
    first_leader = await wait_for(
        lambda: asyncio.to_thread(_lease_holder, directory),
        timeout_seconds=60,
        what="the controller to hold its Lease",
    )

    dead = state.record("controller")
    assert dead is not None
    os.kill(dead.pid, signal.SIGKILL)
    await wait_for(
        lambda: asyncio.to_thread(lambda: not processes.is_running(dead)),
        timeout_seconds=10,
        what="the controller to be gone",
    )

    # The apiserver is fine, so the tools that only need it work, and warn about the controller.
    restart_hint = f"vk-provider dev restart controller {dir_option}"
    kubeconfig = vk_provider("dev", "kubeconfig", "--dir", str(directory))
    assert kubeconfig.returncode == 0, kubeconfig.stderr
    assert Path(kubeconfig.stdout.strip()) == state.kubeconfig
    assert restart_hint in kubeconfig.stderr
    env = vk_provider("dev", "env", "--dir", str(directory))
    assert env.returncode == 0, env.stderr
    assert "export KUBECONFIG=" in env.stdout
    kubectl = vk_provider("dev", "kubectl", "--dir", str(directory), "--", "get", "nodes", "--no-headers")
    assert kubectl.returncode == 0, kubectl.stderr
    assert sorted(line.split()[0] for line in kubectl.stdout.splitlines()) == ["burst-gpu", "local-gpu"]
    assert restart_hint in kubectl.stderr

    # `up` starts nothing and deletes nothing while the rest of the plane runs.
    refused = vk_provider("dev", "up", "--any-free-ports", "--dir", str(directory))
    assert refused.returncode == 1
    assert "partly running" in refused.stderr
    assert restart_hint in refused.stderr
    assert (directory / "etcd-data").is_dir()
    assert (directory / "logs" / "controller.log").is_file()
    after_refusal = cluster.ClusterState.load(directory)
    assert after_refusal is not None
    assert after_refusal.processes == state.processes
    assert all(processes.is_running(r) for r in state.processes if r.name != "controller")

    restarted = vk_provider("dev", "restart", "controller", "--dir", str(directory))
    assert restarted.returncode == 0, restarted.stderr
    assert restarted.stdout.startswith("started again controller")
    status = vk_provider("dev", "status", "--dir", str(directory))
    assert status.returncode == 0, status.stdout
    # A running component restarts too: a node, waited for until its new process renews its Lease.
    node = vk_provider("dev", "restart", "local-gpu", "--dir", str(directory))
    assert node.returncode == 0, node.stderr
    assert node.stdout.startswith("restarted node/local-gpu: healthy")
    # The new controller really works: it takes the Lease over once the dead one's expires.
    await wait_for(
        lambda: asyncio.to_thread(lambda: _lease_holder(directory) not in ("", first_leader)),
        timeout_seconds=60,
        what="the restarted controller to take the Lease",
    )


def test_dev_demo_flips_to_a_runpod_node_on_the_stand_in_and_dev_down_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "on-runpod"
    up = vk_provider(
        "dev", "up", "--any-free-ports", "--dir", str(directory), "--burst-provider", "runpod-standin"
    )
    state = cluster.ClusterState.load(directory)
    try:
        assert up.returncode == 0, up.stderr
        # `up` returns once the stand-in answers and the runpod node is Ready: the example can go away.
        assert "RunPod stand-in is answering" in up.stderr
        assert "virtual node burst-gpu (runpod provider, burst-gpu) is Ready" in up.stderr
        assert "kubectl offload flip tokens --to away --wait" in up.stdout
        assert state is not None
        assert state.burst_provider == runpodstandin.PROVIDER_CHOICE
        assert runpodstandin.is_answering(directory)
        demo = vk_provider("dev", "demo", "--dir", str(directory))
        assert demo.returncode == 0, demo.stdout + demo.stderr
        # Nobody flips: the training gang makes the policy move the service out and, once done, home.
        for stage in (
            "the gang waits, 0 of 8 pods bound",
            "the policy moves the service away",
            "the scheduler admits the gang",
            "all 8 training pods are bound",
            "the Job finished: Complete",
            "the policy brings the service home",
            "the service is home again",
        ):
            assert stage in demo.stdout, demo.stdout
        assert "kubectl offload flip" not in demo.stdout
        assert "none failed" in demo.stdout
        assert re.search(r"failed 0 \(none\)", demo.stdout), demo.stdout
        # While away, RunPod pods served: their token servers name themselves <node>/<RunPod pod id>.
        assert re.search(r"burst-gpu/[a-z0-9]+ \d+", demo.stdout), demo.stdout
        assert_the_training_was_bound_as_one_gang(state)
    finally:
        down = vk_provider("dev", "down", "--dir", str(directory))
    for component in ("node/local-gpu", "node/burst-gpu", runpodstandin.COMPONENT, "router", "controller"):
        assert component in down.stdout
    assert state is not None
    assert not any(processes.is_running(record) for record in state.processes)
    assert procfs.processes_with_environment(cluster.DEV_CLUSTER_MARK, str(directory)) == []


def kubectl_json(state: cluster.ClusterState, *arguments: str) -> Any:
    command = [str(state.bin_dir / "kubectl"), f"--kubeconfig={state.kubeconfig}", *arguments, "-o", "json"]
    return json.loads(subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout)


def whole_seconds(value: Any) -> datetime | None:
    """A time the API wrote, to the second: metav1.Time is whole seconds already, an Event's eventTime
    (MicroTime) is truncated as metav1.Time would be, so that the two compare fairly."""
    moment = parse_timestamp(value)
    return moment.replace(microsecond=0) if moment is not None else None


def assert_the_training_was_bound_as_one_gang(state: cluster.ClusterState) -> None:
    """No pod of the demo's training gang was bound before the last of them could fit. The home node
    has 8 GPUs, the service holds 2 of them, the Job runs 8 pods of 1 GPU: its last pods fit only once
    the policy has scaled the service's home Deployment to 0. So every pod's binding time (PodScheduled,
    whole seconds) is no earlier than that scale-down, and all are one moment (0-1 s apart), where a
    Job that is no gang binds 6 pods on the free GPUs at once and the last 2 seconds after the move."""
    pods = kubectl_json(state, "get", "pods", "-n", "default", "-l", "job-name=pretrain")["items"]
    bound_at = {
        pod["metadata"]["name"]: whole_seconds(condition.get("lastTransitionTime"))
        for pod in pods
        for condition in pod["status"].get("conditions") or ()
        if condition["type"] == "PodScheduled" and condition["status"] == "True"
    }
    assert len(pods) == len(bound_at) == 8, pods
    times = [moment for moment in bound_at.values() if moment is not None]
    assert len(times) == 8, bound_at
    events = kubectl_json(
        state,
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        f"involvedObject.kind=Deployment,involvedObject.name={traffic.EXAMPLE_NAME},reason=ScalingReplicaSet",
    )["items"]
    scaled_to_zero = [
        whole_seconds(event.get("firstTimestamp") or event.get("eventTime"))
        for event in events
        if re.search(r"Scaled down replica set \S+ (from \d+ )?to 0", event.get("message", ""))
    ]
    assert len(scaled_to_zero) == 1, [event.get("message") for event in events]  # the flip out's, once
    [home_released] = scaled_to_zero
    assert home_released is not None
    first, last = min(times), max(times)
    assert first >= home_released, (
        f"training pods were bound from {first:%H:%M:%S}, before the home Deployment was scaled to 0 at "
        f"{home_released:%H:%M:%S}: {bound_at}"
    )
    assert last - first <= timedelta(seconds=1), f"the gang was bound piecemeal: {bound_at}"
    print(
        f"the 8 training pods were bound {(first - home_released).total_seconds():.0f} s after the home "
        f"Deployment was scaled to 0, within {(last - first).total_seconds():.0f} s of each other"
    )


def state_port(directory: Path, component: str) -> int:
    state = cluster.ClusterState.load(directory)
    assert state is not None
    return state.ports[component]


def test_dev_up_with_the_envoy_data_plane_serves_the_demo_through_two_envoys(tmp_path: Path) -> None:
    directory = tmp_path / "on-envoy"
    up = vk_provider("dev", "up", "--any-free-ports", "--dir", str(directory), "--data-plane", "envoy")
    state = cluster.ClusterState.load(directory)
    try:
        assert up.returncode == 0, up.stderr
        assert state is not None
        assert state.data_plane == "envoy"
        assert state.traffic_url == f"http://127.0.0.1:{state.ports['envoy']}"
        assert f"traffic goes through 2 Envoys on {state.traffic_url}" in up.stderr
        assert f"curl -H 'Host: {traffic.EXAMPLE_HOST}' {state.traffic_url}/v1/completions" in up.stdout
        offload = vk_provider(
            "dev",
            "kubectl",
            "--dir",
            str(directory),
            "--",
            "get",
            "offload",
            traffic.EXAMPLE_NAME,
            "--output=jsonpath={.spec.traffic.dataPlane}",
        )
        assert offload.stdout.strip() == "envoy"
        status_url = f"http://127.0.0.1:{state.ports['xds-status']}/-/status"
        with urllib.request.urlopen(status_url, timeout=10) as response:
            document = json.load(response)
        assert sorted(envoy["node"] for envoy in document["envoys"]) == list(cluster.ENVOY_REPLICAS)
        demo = vk_provider("dev", "demo", "--manual", "--dir", str(directory))
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert f"to {state.traffic_url} with Host {traffic.EXAMPLE_HOST}" in demo.stdout
        assert re.search(r"failed 0 \(none\)", demo.stdout), demo.stdout
    finally:
        down = vk_provider("dev", "down", "--dir", str(directory))
    for component in ("xds", *cluster.ENVOY_REPLICAS, "router", "controller"):
        assert component in down.stdout
    assert state is not None
    assert not any(processes.is_running(record) for record in state.processes)


def _lease_holder(directory: Path) -> str:
    result = vk_provider(
        "dev",
        "kubectl",
        "--dir",
        str(directory),
        "--",
        "get",
        "lease",
        "vk-provider-controller",
        "--namespace",
        traffic.LEASE_NAMESPACE,
        "--output=jsonpath={.spec.holderIdentity}",
    )
    return result.stdout.strip() if result.returncode == 0 else ""
