"""vk-provider installed from `dist/` as a new user would, on the development cluster.

`make release` (the session's `release` fixture) writes the packaged chart and install.yaml. One plane
for the module, its home node running vk-provider's own Pods, and the RunPod stand-in; then, in order
(each test starts from where the one before left the plane):

1. `helm install` of the packaged chart with the package's RunPod example (`dev up --in-cluster
   --release`): the example service flipped out to RunPod and back under load, 0 failed;
2. `helm upgrade` that changes the image of all three components while the service is served away
   under load: every Deployment rolls, 0 failed, nothing created twice at the provider;
3. `helm uninstall`: its pre-delete hook brings the Offload home and removes it, 0 pods left at the
   provider, then Helm removes the rest; the namespace deletes without sticking;
4. `kubectl apply -k` of an overlay on `dist/install.yaml`: the same flip out and back, 0 failed;
5. `helm install` with no values at all: everything Ready, no node registered, NOTES printed.

The Pods run this Python, not the image (`local` nodes run no images); `test_release.py` checks that
the image archive holds the same Python packages.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import pytest
import yaml

from tests.integration.conftest import IMAGE_GROUP
from vk_devtools.demo.load import LoadGenerator, LoadSettings, failures
from vk_devtools.devcluster import cluster, incluster, localnode, releaseinstall, runpodstandin, traffic
from vk_devtools.release import Release
from vk_devtools.standins.runpod.control import FakeRunPodControl
from vk_provider import __version__

pytestmark = IMAGE_GROUP

NAMESPACE = releaseinstall.NAMESPACE
BURST = localnode.AWAY.name
TIMEOUT_SECONDS = 300
LOAD_RATE = 20


def run(*command: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, check=False)


def vk_provider(*arguments: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, "-m", "vk_provider", *arguments, timeout=timeout)


@pytest.fixture(scope="module")
def plane(release: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterState]:
    directory = tmp_path_factory.mktemp("release-install") / "plane"
    up = vk_provider(
        "dev",
        "up",
        "--in-cluster",
        "--release",
        str(release.folder),
        "--burst-provider",
        runpodstandin.PROVIDER_CHOICE,
        "--any-free-ports",
        "--dir",
        str(directory),
    )
    state = cluster.ClusterState.load(directory)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert state is not None
        print(up.stderr)
        yield state
    finally:
        down = vk_provider("dev", "down", "--dir", str(directory))
        assert down.returncode == 0, down.stderr


def kubectl(state: cluster.ClusterState, *arguments: str, check: bool = True) -> str:
    done = run(str(state.bin_dir / "kubectl"), f"--kubeconfig={state.kubeconfig}", *arguments, timeout=180)
    if check:
        assert done.returncode == 0, f"kubectl {' '.join(arguments)}: {done.stderr}"
    return done.stdout


def get(state: cluster.ClusterState, *arguments: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(kubectl(state, "get", *arguments, "-o", "json"))
    return loaded


def helm(state: cluster.ClusterState, *arguments: str) -> str:
    return releaseinstall.helm(state.kubeconfig, *arguments)


def flip(state: cluster.ClusterState, side: str) -> None:
    done = vk_provider(
        "migrate", "flip", traffic.EXAMPLE_NAME, "--to", side, "--wait", "--kubeconfig", str(state.kubeconfig)
    )
    assert done.returncode == 0, done.stdout + done.stderr


def load_on(state: cluster.ClusterState) -> LoadGenerator:
    urls = state.traffic_urls()
    assert urls, "no router Pod is Ready"
    return LoadGenerator(
        LoadSettings(url=urls[0], more_urls=tuple(urls[1:]), host_header=traffic.EXAMPLE_HOST, rate=LOAD_RATE)
    )


async def standin_pods(state: cluster.ClusterState) -> list[dict[str, Any]]:
    addresses = runpodstandin.read_addresses(state.directory)
    assert addresses is not None
    async with aiohttp.ClientSession() as session:
        return await FakeRunPodControl(addresses.control_url, session=session).pods()


async def standin_creations(state: cluster.ClusterState) -> int:
    """How many pods the node asked RunPod to create, over the stand-in's life."""
    addresses = runpodstandin.read_addresses(state.directory)
    assert addresses is not None
    async with aiohttp.ClientSession() as session:
        requests = await FakeRunPodControl(addresses.control_url, session=session).requests()
    return sum(1 for request in requests if request["method"] == "POST" and request["path"].endswith("/pods"))


def live_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [pod for pod in pods if pod.get("desiredStatus") != "TERMINATED"]


def deployment_images(state: cluster.ClusterState) -> dict[str, str]:
    return {
        name: get(state, "deployment", name, "-n", NAMESPACE)["spec"]["template"]["spec"]["containers"][0][
            "image"
        ]
        for name in releaseinstall.DEPLOYMENTS
    }


ENDPOINTS_PERIOD_SECONDS = 0.5
"""How often the load reads the router Pods' endpoints, as kube-proxy follows a Service's (nothing
routes a Service's cluster IP on this plane): a replica being replaced leaves the rotation when it is
deleted, and a new one joins once Ready."""


async def under_load(state: cluster.ClusterState, work: Callable[[], None]) -> int:
    """Run `work` (blocking) in a thread under load through the router Pods, following their
    endpoints; assert that no request failed; the number of requests."""
    load = load_on(state)
    following = True

    async def follow_endpoints() -> None:
        while following:
            selector = f"app.kubernetes.io/name={incluster.ROUTER_DEPLOYMENT}"
            pods = await asyncio.to_thread(get, state, "pods", "-n", NAMESPACE, "-l", selector)
            urls = incluster.router_urls(pods["items"])
            if urls:
                load.set_urls(urls)
            await asyncio.sleep(ENDPOINTS_PERIOD_SECONDS)  # the endpoints' polling period (noqa: sleep-ok)

    await load.start()
    follower = asyncio.create_task(follow_endpoints())
    try:
        await asyncio.to_thread(work)
    finally:
        following = False
        await follower
        await load.stop()
    assert load.outcomes
    assert failures(load.outcomes) == [], failures(load.outcomes)[:5]
    return len(load.outcomes)


async def test_1_helm_install_of_the_packaged_chart_flips_out_and_back(
    plane: cluster.ClusterState, release: Release
) -> None:
    listed = json.loads(helm(plane, "list", "--namespace", NAMESPACE, "--output", "json"))
    assert [(item["name"], item["chart"], item["status"]) for item in listed] == [
        (releaseinstall.RELEASE_NAME, f"vk-provider-{__version__}", "deployed")
    ]
    digest = releaseinstall.ReleaseArtifacts.load(release.folder).digest
    for image in deployment_images(plane).values():
        assert image.endswith(f"@{digest}"), image

    def out_and_back() -> None:
        flip(plane, "away")
        assert {pod["spec"].get("nodeName") for pod in away_pods(plane)} == {BURST}
        flip(plane, "home")

    requests = await under_load(plane, out_and_back)
    print(f"helm install: {requests} requests through a flip out to the RunPod stand-in and back, 0 failed")


def away_pods(state: cluster.ClusterState) -> list[dict[str, Any]]:
    listed = get(
        state, "pods", "-n", "default", "-l", f"offload.vk-provider.dev/offload={traffic.EXAMPLE_NAME}"
    )
    return [
        pod
        for pod in listed["items"]
        if pod["spec"].get("nodeName") == BURST and pod["metadata"].get("deletionTimestamp") is None
    ]


async def test_2_helm_upgrade_rolls_every_component_while_served_away(
    plane: cluster.ClusterState, release: Release
) -> None:
    flip(plane, "away")
    before_uids = sorted(pod["metadata"]["uid"] for pod in away_pods(plane))
    assert before_uids
    created_before = await standin_creations(plane)
    images_before = deployment_images(plane)

    def upgrade() -> None:
        # From the digest to the tag of the same version: a new image reference for every component,
        # so each Deployment rolls its Pods.
        helm(
            plane,
            "upgrade",
            releaseinstall.RELEASE_NAME,
            str(releaseinstall.ReleaseArtifacts.load(release.folder).chart),
            "--namespace",
            NAMESPACE,
            "--reuse-values",
            "--set",
            "image.digest=",
            "--set",
            f"image.tag={__version__}",
            "--wait",
            f"--timeout={TIMEOUT_SECONDS}s",
        )
        for name in releaseinstall.DEPLOYMENTS:
            kubectl(
                plane,
                "rollout",
                "status",
                f"deployment/{name}",
                "-n",
                NAMESPACE,
                f"--timeout={TIMEOUT_SECONDS}s",
            )
        kubectl(plane, "wait", "--for=condition=Ready", f"node/{BURST}", f"--timeout={TIMEOUT_SECONDS}s")

    requests = await under_load(plane, upgrade)
    images_after = deployment_images(plane)
    assert all(images_after[name] != images_before[name] for name in images_before), images_after
    assert all(image.endswith(f":{__version__}") for image in images_after.values()), images_after
    assert sorted(pod["metadata"]["uid"] for pod in away_pods(plane)) == before_uids
    created_after = await standin_creations(plane)
    assert created_after == created_before, "the upgrade created pods at the provider again"
    print(
        f"helm upgrade under load: {requests} requests, 0 failed; 3 Deployments rolled; "
        f"provider creations {created_before} before, {created_after} after"
    )


async def test_3_helm_uninstall_brings_everything_home_and_leaves_nothing(
    plane: cluster.ClusterState,
) -> None:
    assert live_pods(await standin_pods(plane)), "the service should still be away from the test before"
    helm(
        plane,
        "uninstall",
        releaseinstall.RELEASE_NAME,
        "--namespace",
        NAMESPACE,
        "--wait",
        f"--timeout={TIMEOUT_SECONDS}s",
    )
    left = live_pods(await standin_pods(plane))
    assert left == [], left
    offloads = get(plane, "offloads", "--all-namespaces")["items"]
    assert offloads == [], [item["metadata"]["name"] for item in offloads]
    assert get(plane, "deployments", "-n", NAMESPACE)["items"] == []
    # The example served from home all along: its Deployment is the user's, untouched.
    home = get(plane, "deployment", traffic.EXAMPLE_NAME, "-n", "default")
    assert home["status"].get("readyReplicas", 0) >= 1
    kubectl(plane, "delete", "namespace", NAMESPACE, f"--timeout={TIMEOUT_SECONDS}s")
    print(f"helm uninstall: 0 pods left at the provider, 0 Offloads, {NAMESPACE} deleted")


async def test_4_install_yaml_with_an_overlay_flips_out_and_back(
    plane: cluster.ClusterState, release: Release
) -> None:
    artifacts = releaseinstall.ReleaseArtifacts.load(release.folder)
    # What `dev up --in-cluster` changes in the source tree's manifests for this one-host cluster (its
    # Pods listen on their own addresses; the node is the demo's burst node), on install.yaml instead.
    overlay = incluster.write_overlay(
        plane.directory, plane.address_group, install_manifest=artifacts.install_manifest
    )
    kubectl(plane, "apply", "--server-side", "-k", str(overlay))
    for name in incluster.DEPLOYMENTS:
        kubectl(
            plane, "rollout", "status", f"deployment/{name}", "-n", NAMESPACE, f"--timeout={TIMEOUT_SECONDS}s"
        )
    kubectl(plane, "wait", "--for=condition=Ready", f"node/{BURST}", f"--timeout={TIMEOUT_SECONDS}s")
    # The uninstall removed the example's Offload; the user applies it again.
    kubectl(plane, "apply", "-f", str(traffic.EXAMPLE))

    def out_and_back() -> None:
        flip(plane, "away")
        flip(plane, "home")

    requests = await under_load(plane, out_and_back)
    print(f"install.yaml: {requests} requests through a flip out and back, 0 failed")
    # The README's order for kustomize users: Offloads home and gone first, then the rest.
    # This plane's home node is a virtual-kubelet too (a `local` node plays the GPU servers): the
    # pods to wait for are the burst node's.
    done = vk_provider(
        "migrate",
        "uninstall",
        "--kubeconfig",
        str(plane.kubeconfig),
        f"--timeout={TIMEOUT_SECONDS}",
        f"--virtual-nodes=kubernetes.io/hostname={BURST}",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kubectl(plane, "delete", "-k", str(overlay), "--ignore-not-found", f"--timeout={TIMEOUT_SECONDS}s")
    shutil.rmtree(overlay)


async def test_5_helm_install_with_no_values_registers_no_node(
    plane: cluster.ClusterState, release: Release
) -> None:
    nodes_before = sorted(item["metadata"]["name"] for item in get(plane, "nodes")["items"])
    artifacts = releaseinstall.ReleaseArtifacts.load(release.folder)
    printed = helm(
        plane,
        "install",
        "bare",
        str(artifacts.chart),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        # All this cluster's Pods share the host's network: the two replicas of the router and of the
        # controller each listen on their own Pod's address, not 0.0.0.0. Nothing else is set.
        "--values",
        str(releaseinstall.write_values(plane.directory, releaseinstall.host_network_values())),
        "--wait",
        f"--timeout={TIMEOUT_SECONDS}s",
    )
    assert "NOTES:" in printed, printed
    pods = get(plane, "pods", "-n", NAMESPACE)["items"]
    assert pods
    stuck = [
        pod["metadata"]["name"]
        for pod in pods
        if not any(
            c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or []
        )
    ]
    assert stuck == []
    assert sorted(item["metadata"]["name"] for item in get(plane, "nodes")["items"]) == nodes_before
    helm(plane, "uninstall", "bare", "--namespace", NAMESPACE, "--wait", f"--timeout={TIMEOUT_SECONDS}s")
    print(yaml.safe_dump({"notes": printed.split("NOTES:", 1)[1][:400]}))
