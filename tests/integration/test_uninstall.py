"""`kubectl offload uninstall` on the real plane: a service served away is brought home under load, its
Offload and away Deployment go, nothing is left on the burst node or at its provider, and the namespace
deletes; without a controller the command refuses and names what waits, and `--force` lets go.

The CLI runs as a user runs it (the venv's `kubectl-offload`, in a subprocess). Each test scopes it to
its own namespace (`-n`), its rig's controller Lease and its burst node's label, so tests running at
once on the shared plane never see each other's Offloads or pods: no serial xdist group is needed.

The burst node is a `local` node: its provider's workloads are processes on this host, each tagged
`--name <node>/<pod>` (the rig's token servers), so "0 workloads at the provider" is checked in /proc.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from tests.integration.migration_rig import NAME, SYSTEM_NAMESPACE, Rig, RigFor
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings, failures
from vk_devtools.devcluster import cluster
from vk_provider.kit.kube import KubeApiError

pytestmark = pytest.mark.usefixtures("traffic_rbac")

STRATEGY = {
    "stepIntervalSeconds": 3,
    "toAwaySteps": [100],
    "toHomeSteps": [50, 100],
    "gates": {"minRequestsPerInterval": 10, "maxErrorRatePercent": 5},
}
QUIET_STRATEGY = {**STRATEGY, "gates": {"minRequestsPerInterval": 0}}
"""For a rig without load: the gates need no requests to judge a step."""
UNINSTALL_TIMEOUT_SECONDS = 240


def uninstall(
    control_plane: cluster.ClusterState, rig: Rig, *arguments: str
) -> subprocess.CompletedProcess[str]:
    """`kubectl-offload uninstall` scoped to the rig: its namespace, its controller's Lease and its
    burst node (the rig's home node is a virtual node too, whose pods stay)."""
    away_role = rig.away.config["labels"]["vk-provider.dev/role"]
    command = [
        str(Path(sys.executable).parent / "kubectl-offload"),
        "uninstall",
        "-n",
        rig.namespace,
        "--controller-lease",
        f"{SYSTEM_NAMESPACE}/{rig.lease_name}",
        "--virtual-nodes",
        f"vk-provider.dev/role={away_role}",
        "--kubeconfig",
        str(control_plane.kubeconfig),
        *arguments,
    ]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=UNINSTALL_TIMEOUT_SECONDS + 60, check=False
    )


def provider_workloads(node_name: str) -> list[str]:
    """The command lines of live processes tagged as workloads of `node_name`'s provider."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X") and any(argument.startswith(f"{node_name}/") for argument in arguments):
            found.append(" ".join(arguments))
    return found


async def pods_on(rig: Rig, node_name: str) -> list[str]:
    listing = await rig.api.get("/api/v1/pods", query={"fieldSelector": f"spec.nodeName={node_name}"})
    return [f"{pod['metadata']['namespace']}/{pod['metadata']['name']}" for pod in listing["items"]]


async def flip_away(rig: Rig) -> None:
    await rig.patch_offload({"spec": {"placement": "away"}})
    offload = await rig.wait_for_phase("Succeeded", "RolledBack", "Failed")
    assert offload["status"]["phase"] == "Succeeded", offload["status"]
    assert offload["status"]["awayWeight"] == 100
    assert await pods_on(rig, rig.away.node_name)
    assert provider_workloads(rig.away.node_name)


async def assert_offload_gone(rig: Rig) -> None:
    with pytest.raises(KubeApiError) as missing:
        await rig.offload()
    assert missing.value.not_found
    with pytest.raises(KubeApiError) as no_away:
        await rig.deployment(f"{NAME}-away")
    assert no_away.value.not_found


async def delete_namespace(kube_api: client.ApiClient, namespace: str) -> float:
    """Delete the namespace and wait until it is gone (nothing may hold it); the seconds that took."""
    core = client.CoreV1Api(kube_api)
    started = time.monotonic()
    await core.delete_namespace(namespace)

    async def gone() -> bool:
        try:
            await core.read_namespace(namespace)
        except client.ApiException as error:
            return error.status == 404
        return False

    await wait_for(gone, timeout_seconds=120, what=f"namespace {namespace} to be deleted")
    return time.monotonic() - started


async def test_uninstall_brings_the_service_home_under_load_and_leaves_nothing(
    control_plane: cluster.ClusterState, kube_api: client.ApiClient, rig_for: RigFor
) -> None:
    async with rig_for(STRATEGY) as rig:
        generator = LoadGenerator(LoadSettings(url=rig.router_url, host_header=rig.host, rate=40))
        await generator.start()
        try:
            await flip_away(rig)

            planned = await asyncio.to_thread(uninstall, control_plane, rig, "--dry-run")
            assert planned.returncode == 0, planned.stdout + planned.stderr
            assert f"Offload {rig.namespace}/{NAME}: placement away" in planned.stdout
            assert "would: bring home (steps 50,100, 3s each)" in planned.stdout
            assert "nothing was changed (--dry-run=client)" in planned.stdout
            assert (await rig.offload())["spec"]["placement"] == "away"

            # Too short to finish: exits 1 and lists what is left (the Offload on its way home).
            short = await asyncio.to_thread(uninstall, control_plane, rig, "--timeout", "2s")
            assert short.returncode == 1, short.stdout + short.stderr
            assert "uninstall did not finish within 2s; left:" in short.stderr
            assert f"Offload {rig.namespace}/{NAME}: placement home" in short.stderr

            started = time.monotonic()
            done = await asyncio.to_thread(uninstall, control_plane, rig)
            took = time.monotonic() - started
            assert done.returncode == 0, (done.stdout, done.stderr, rig.controller.log_tail())
            assert f"offload {rig.namespace}/{NAME}: home" in done.stdout
            assert f"offload {rig.namespace}/{NAME}: gone" in done.stdout
            assert "no Offload left, no pod on a virtual node" in done.stdout
            # Traffic after the Offload is gone goes home by its kept route: 40 more requests of it.
            after = len(generator.outcomes)

            async def more_requests() -> bool:
                return len(generator.outcomes) >= after + 40

            await wait_for(more_requests, timeout_seconds=60, what="40 requests after the uninstall")
        finally:
            await generator.stop()
        outcomes = generator.outcomes
        assert not failures(outcomes), failures(outcomes)[:5]
        await assert_offload_gone(rig)
        assert await pods_on(rig, rig.away.node_name) == []
        assert provider_workloads(rig.away.node_name) == []
        assert rig.controller.alive()  # uninstall never removes the controller
    seconds = await delete_namespace(kube_api, rig.namespace)
    # Shown with `pytest -rP`: the measured numbers, for the record.
    print(
        f"uninstall took {took:.1f}s; {len(outcomes)} requests, 0 failed; "
        f"the namespace deleted in {seconds:.1f}s"
    )


async def test_without_a_controller_uninstall_names_what_waits_and_force_lets_go(
    control_plane: cluster.ClusterState, kube_api: client.ApiClient, rig_for: RigFor
) -> None:
    async with rig_for(QUIET_STRATEGY) as rig:
        await flip_away(rig)
        rig.controller.stop()  # a clean stop gives the Lease up

        refused = await asyncio.to_thread(uninstall, control_plane, rig)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "the migration controller must run to bring Offloads home" in refused.stderr
        assert f"Offload {rig.namespace}/{NAME}: placement away" in refused.stderr
        assert (await rig.offload())["metadata"].get("deletionTimestamp") is None  # nothing was touched

        forced = await asyncio.to_thread(uninstall, control_plane, rig, "--force")
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert "WARNING: --force" in forced.stderr
        assert f"WARNING: deleted away Deployment {rig.namespace}/{NAME}-away" in forced.stderr
        await assert_offload_gone(rig)
        assert await pods_on(rig, rig.away.node_name) == []
        assert provider_workloads(rig.away.node_name) == []
    await delete_namespace(kube_api, rig.namespace)
