"""The core tests again, on the oldest supported Kubernetes (1.35, `kit.kubeversions.OLDEST_SUPPORTED`).

The module starts its own plane from the pinned 1.35 modules (`building.CONTROL_PLANE_1_35`) and
overrides `control_plane` and the session fixtures that set the plane up (`kubectl`, the CRDs, the
traffic RBAC), so the shared fixtures (`api`, `namespace`, `start_node`, `rig_for`, `rig_args`) and the
other modules' test bodies, called here unchanged, run against it. A small representative set, to keep
`make test` short: a node's lifecycle with logs and exec, a migration out and back under load, the
policy moving a service out for a training Job and back, Kueue's check (Kueue v0.17 runs its own e2e
tests on 1.33 to 1.35: its Makefile-test.mk, E2E_K8S_VERSIONS), and what degrades on 1.35 and how it
says so.

Its own xdist group: one worker, one extra plane for the run.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.integration import test_exec as exec_tests
from tests.integration import test_kubelet_api as kubelet_api_tests
from tests.integration import test_kueue as kueue_tests
from tests.integration import test_local_node as local_node_tests
from tests.integration import test_migration as migration_tests
from tests.integration import test_policy as policy_tests
from tests.integration.conftest import (
    OLDER_KUBERNETES_GROUP,
    Kubectl,
    apply_offload_crds,
    apply_policy_crd,
    apply_traffic_rbac,
    kubectl_for,
    start_test_plane,
)
from tests.integration.daemons import NodeDaemon
from tests.integration.migration_rig import RigFor
from vk_devtools.devcluster import cluster, helm
from vk_devtools.devcluster.building import BinaryCache
from vk_provider.kit.kube import KubeApi
from vk_provider.kit.kubeversions import (
    NATIVE_POD_GROUPS,
    OLDEST_SUPPORTED,
    WEBSOCKET_PASSTHROUGH,
    cluster_version,
    minor_text,
)
from vk_provider.policy.signals import NativePodGroups
from vk_provider.policy.spec import parse_policy
from vk_provider.policy.status import POD_GROUPS_UNAVAILABLE

pytestmark = [OLDER_KUBERNETES_GROUP, pytest.mark.integration]

OLDEST = minor_text(OLDEST_SUPPORTED)
CHART = Path(__file__).parents[2] / "charts" / "vk-provider"
StartNode = Callable[..., Awaitable[NodeDaemon]]

# The fixtures of other modules that their test bodies below take (pytest finds fixtures by name here).
talker = kubelet_api_tests.talker
kueue_process = kueue_tests.kueue_process


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterState]:
    """This module's plane: the pinned control plane of the oldest supported minor."""
    directory = tmp_path_factory.mktemp(f"control-plane-{OLDEST}")
    state = start_test_plane(directory, kubernetes_version=OLDEST)
    try:
        yield state
    finally:
        cluster.down(directory)


@pytest.fixture(scope="module")
def kubectl(control_plane: cluster.ClusterState) -> Kubectl:
    return kubectl_for(control_plane)


@pytest.fixture(scope="module")
def offload_crd(kubectl: Kubectl) -> None:
    apply_offload_crds(kubectl, contextlib.nullcontext)  # the plane is this module's alone


@pytest.fixture(scope="module")
def traffic_rbac(kubectl: Kubectl, offload_crd: None) -> None:
    apply_traffic_rbac(kubectl, contextlib.nullcontext)


@pytest.fixture(scope="module")
def policy_crd(kubectl: Kubectl, traffic_rbac: None) -> None:
    apply_policy_crd(kubectl)


async def test_the_plane_runs_the_oldest_minor_and_the_node_says_what_it_lacks(
    control_plane: cluster.ClusterState, api: KubeApi, start_node: StartNode
) -> None:
    version = await cluster_version(api)
    assert version.minor_version == OLDEST_SUPPORTED, version
    assert control_plane.kubernetes_version == str(version)
    daemon = await start_node("mock")
    gap = WEBSOCKET_PASSTHROUGH.unavailable(version)
    assert gap is not None
    log = daemon.log_path.read_text(errors="replace")
    assert gap in log, daemon.log_tail()
    assert log.count(gap) == 1, "said once, at start"
    # The node still declares WebSocket streaming (a 1.35 apiserver keeps the field), so the day the
    # cluster is upgraded the passthrough starts; 1.35 has no ExtendWebSocketsToKubelet to act on it
    # (the test of exec below sees SPDY arrive).
    node = await api.get(f"/api/v1/nodes/{daemon.node_name}")
    assert node["status"].get("declaredFeatures") == ["ExtendWebSocketsToKubelet"]


async def test_native_pod_groups_are_reported_unavailable_with_the_version_they_need(api: KubeApi) -> None:
    source = NativePodGroups(api)
    policy = parse_policy(
        {
            "metadata": {"name": "p"},
            "spec": {
                "homePool": {"nodeSelector": {"matchLabels": {"gpu": "true"}}},
                "offloads": {"selector": {"matchLabels": {"app": "chat"}}},
            },
        }
    )
    assert await source.demand(policy) == []
    version = await cluster_version(api)
    assert source.unavailable() == NATIVE_POD_GROUPS.unavailable(version)
    assert f"needs {minor_text(NATIVE_POD_GROUPS.needs)}+" in (source.unavailable() or "")


async def test_a_deployment_runs_on_a_local_node(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    await local_node_tests.test_a_deployment_runs_on_the_local_provider_and_answers_on_the_pod_address(
        start_node, kube_api, namespace
    )


def test_kubectl_logs(talker: tuple[NodeDaemon, str], kubectl: Kubectl) -> None:
    kubelet_api_tests.test_kubectl_logs_shows_the_processes_real_output(talker, kubectl)


async def test_exec_though_the_node_declares_websocket(
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    control_plane: cluster.ClusterState,
) -> None:
    started: list[NodeDaemon] = []

    async def recording_start(*arguments: Any, **settings: Any) -> NodeDaemon:
        daemon = await start_node(*arguments, **settings)
        started.append(daemon)
        return daemon

    await exec_tests.test_exec_separates_outputs_returns_the_exit_code_and_pipes_stdin(
        recording_start, kube_api, namespace, control_plane, websocket=True
    )
    # What 1.36+ would pass through as WebSocket arrives translated to SPDY (the node logs each stream).
    log = started[0].log_path.read_text(errors="replace")
    assert "/exec/" in log
    assert "over SPDY/3.1" in log
    assert "over WebSocket" not in log


@pytest.mark.usefixtures("traffic_rbac")
async def test_a_migration_out_and_back_under_load(rig_for: RigFor) -> None:
    await migration_tests.test_a_flip_out_and_back_loses_no_request_and_follows_every_weight(rig_for)


@pytest.mark.usefixtures("policy_crd")
async def test_the_policy_moves_the_service_out_for_a_training_job_and_back(
    rig_args: dict[str, Any], api: KubeApi
) -> None:
    await policy_tests.test_a_training_job_moves_the_service_out_and_it_comes_home_when_the_job_ends(rig_args)
    # The gang was the Job's pods; the policy said (an Event; its PodGroupsReadable condition meanwhile)
    # that native PodGroups could not be read, and why. The policy is deleted by now, its Events are not.
    gap = NATIVE_POD_GROUPS.unavailable(await cluster_version(api))
    events = await api.get("/api/v1/events", query={"fieldSelector": f"reason={POD_GROUPS_UNAVAILABLE}"})
    said = {(event["involvedObject"]["kind"], event["message"]) for event in events.get("items") or ()}
    assert ("OffloadPolicy", gap) in said, said


@pytest.mark.usefixtures("policy_crd")
async def test_kueue_s_check_holds_a_queued_job_while_inference_moves_out(
    rig_args: dict[str, Any], kueue_process: kueue_tests.KueueProcess
) -> None:
    await kueue_tests.test_a_queued_job_waits_on_our_check_while_inference_moves_out_then_starts_whole(
        rig_args, kueue_process
    )


def test_the_chart_refuses_a_cluster_older_than_the_oldest_supported_minor(tmp_path: Path) -> None:
    helm_binary = BinaryCache.for_build(helm.HELM).ensure(wait=True, out=sys.stderr) / "helm"
    major, minor = OLDEST_SUPPORTED

    def template(kube_version: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(helm_binary), "template", "vk", str(CHART), "--kube-version", kube_version],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )

    older = template(f"{major}.{minor - 1}.9")
    assert older.returncode != 0
    assert "kubeVersion" in older.stderr, older.stderr
    assert f">={major}.{minor}.0-0" in older.stderr, older.stderr
    assert template(f"{major}.{minor}.0").returncode == 0
