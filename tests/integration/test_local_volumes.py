"""A `local` pod's volumes mounted at their paths, its ServiceAccount token among them, on the real plane.

With `mount_volumes`, the node resolves the API server's `kube-api-access-*` volume whole (a bound
token from the TokenRequest API, `ca.crt`, `namespace`) and the local provider binds it at
/var/run/secrets/kubernetes.io/serviceaccount in the container's own mount namespace. The node replaces
the token after `token_refresh_fraction` of its lifetime: 0.005 of the 3607 s the admission plugin
asks for is 18 s, where the kubelet's 80% would be 48 minutes.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.integration.daemons import NodeDaemon
from tests.integration.test_exec import kubectl_bytes
from tests.integration.test_local_node import LOCAL_SETTINGS, StartNode, sleeper
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root (CAP_SYS_ADMIN)")

TOKEN_FOLDER = "/var/run/secrets/kubernetes.io/serviceaccount"


async def mounting_node(start_node: StartNode) -> NodeDaemon:
    return await start_node(
        "local",
        token_refresh_fraction=0.005,
        provider_config={**LOCAL_SETTINGS["provider_config"], "mount_volumes": True},
    )


def read_in_pod(plane: cluster.ClusterState, namespace: str, pod: str, path: str) -> bytes:
    done = kubectl_bytes(plane, "exec", "-n", namespace, pod, "--", "cat", path)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


async def review(kube_api: client.ApiClient, token: bytes) -> Any:
    answer = await client.AuthenticationV1Api(kube_api).create_token_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token.decode()}}
    )
    return answer.status


async def test_the_pod_reads_its_bound_token_ca_and_namespace_and_the_token_is_rotated_then_revoked(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, control_plane: cluster.ClusterState
) -> None:
    daemon = await mounting_node(start_node)
    core = client.CoreV1Api(kube_api)
    tag = f"41{random.randrange(10**6):06d}.5"  # noqa: S311 - a tag, not a secret
    await core.create_namespaced_pod(namespace, sleeper("reader", daemon.node_name, tag))

    async def running() -> bool:
        return (await core.read_namespaced_pod("reader", namespace)).status.phase == "Running"

    await wait_for(running, timeout_seconds=60, what="the pod to run")
    pod = await core.read_namespaced_pod("reader", namespace)
    assert any(volume.name.startswith("kube-api-access-") for volume in pod.spec.volumes)

    first = await asyncio.to_thread(read_in_pod, control_plane, namespace, "reader", f"{TOKEN_FOLDER}/token")
    seen = await review(kube_api, first)
    assert seen.authenticated, seen.error
    assert seen.user.username == f"system:serviceaccount:{namespace}:default"
    assert seen.user.extra["authentication.kubernetes.io/pod-name"] == ["reader"]
    assert seen.user.extra["authentication.kubernetes.io/pod-uid"] == [pod.metadata.uid]
    assert (
        await asyncio.to_thread(read_in_pod, control_plane, namespace, "reader", f"{TOKEN_FOLDER}/namespace")
        == namespace.encode()
    )
    ca = await asyncio.to_thread(read_in_pod, control_plane, namespace, "reader", f"{TOKEN_FOLDER}/ca.crt")
    assert ca == control_plane.ca_cert.read_bytes()
    # Only the pod sees the files: on the host the mount point is an empty folder.
    assert not await asyncio.to_thread(Path(TOKEN_FOLDER, "token").exists)

    rotated: list[bytes] = []

    async def replaced() -> bool:
        token = await asyncio.to_thread(
            read_in_pod, control_plane, namespace, "reader", f"{TOKEN_FOLDER}/token"
        )
        if token != first:
            rotated.append(token)
        return bool(rotated)

    await wait_for(replaced, timeout_seconds=90, what="the node to rotate the token")
    assert (await review(kube_api, rotated[0])).authenticated

    # Bound to the pod: once the pod is gone, neither token is accepted any more.
    await core.delete_namespaced_pod("reader", namespace, grace_period_seconds=0)

    async def revoked() -> bool:
        return not (await review(kube_api, rotated[0])).authenticated

    await wait_for(revoked, timeout_seconds=60, what="the tokens to be revoked with the pod")
    assert not (await review(kube_api, first)).authenticated


async def test_config_map_and_empty_dir_volumes_are_mounted_seen_by_exec_and_probes_and_a_subpath_is_refused(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, control_plane: cluster.ClusterState
) -> None:
    daemon = await mounting_node(start_node)
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"mode": "fast", "level": "3"}}
    )
    place = f"/tmp/vkp-volumes-{random.randrange(10**9)}"  # noqa: S108,S311 - a mount point, made by the provider
    volumes = [
        {"name": "settings", "configMap": {"name": "settings"}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "inner", "emptyDir": {}},
    ]
    mounts = [
        {"name": "settings", "mountPath": f"{place}/settings", "readOnly": True},
        {"name": "scratch", "mountPath": f"{place}/scratch"},
        # Inside a read-only mount, as credentials under a ConfigMap's folder: its point is made first.
        {"name": "inner", "mountPath": f"{place}/settings/inner"},
    ]
    box = sleeper("box", daemon.node_name, f"42{random.randrange(10**6):06d}.5", volumes=volumes)  # noqa: S311
    box["spec"]["containers"][0]["volumeMounts"] = mounts
    # An exec probe sees what the container sees: the file exists only in its mount namespace.
    box["spec"]["containers"][0]["readinessProbe"] = {
        "exec": {"command": ["cat", f"{place}/settings/mode"]},
        "periodSeconds": 1,
    }
    await core.create_namespaced_pod(namespace, box)
    bad = sleeper("bad", daemon.node_name, "600", volumes=volumes)
    bad["spec"]["containers"][0]["volumeMounts"] = [{**mounts[0], "subPath": "mode"}]
    await core.create_namespaced_pod(namespace, bad)

    async def ready() -> bool:
        conditions = (await core.read_namespaced_pod("box", namespace)).status.conditions or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    await wait_for(ready, timeout_seconds=60, what="the pod to be Ready by its exec probe")
    assert (
        await asyncio.to_thread(read_in_pod, control_plane, namespace, "box", f"{place}/settings/mode")
        == b"fast"
    )
    written = kubectl_bytes(
        control_plane,
        "exec",
        "-n",
        namespace,
        "box",
        "--",
        "sh",
        "-c",
        f"echo kept > {place}/scratch/note && cat {place}/scratch/note; echo in > {place}/settings/inner/x"
        f" && cat {place}/settings/inner/x; cat /proc/sys/kernel/hostname; touch {place}/settings/new",
    )
    # The pod's own host name, as in any pod: its name.
    assert written.stdout == b"kept\nin\nbox\n"
    assert b"Read-only file system" in written.stderr

    async def refused() -> str | None:
        events = await core.list_namespaced_event(namespace, field_selector="involvedObject.name=bad")
        found = [event.message for event in events.items if "subPath" in (event.message or "")]
        return found[0] if found else None

    message = await wait_for(refused, timeout_seconds=60, what="the subPath refusal")
    assert 'volume mount "settings"' in message


IN_CLUSTER_CLIENT = """
import asyncio
from vk_provider.kit.kube import KubeApi

async def main():
    api = await KubeApi.from_kubeconfig(None)  # in-cluster: KUBERNETES_SERVICE_HOST and the mounted token
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answer = await api.create("/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
    print("I am", answer["status"]["userInfo"]["username"], flush=True)
    await api.close()

asyncio.run(main())
"""


async def test_an_in_cluster_client_in_a_local_pod_reaches_the_apiserver_through_the_kubernetes_service(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str
) -> None:
    daemon = await mounting_node(start_node)
    core = client.CoreV1Api(kube_api)
    service = await core.read_namespaced_service("kubernetes", "default")
    assert service.spec.cluster_ip.startswith("198.19.")  # the dev pod network, routed to this host
    pod = sleeper("client", daemon.node_name, "600", restartPolicy="Never")
    pod["spec"]["containers"][0]["command"] = [sys.executable, "-c", IN_CLUSTER_CLIENT]
    await core.create_namespaced_pod(namespace, pod)

    async def finished() -> str | None:
        phase = (await core.read_namespaced_pod("client", namespace)).status.phase
        return phase if phase in ("Succeeded", "Failed") else None

    phase = await wait_for(finished, timeout_seconds=60, what="the client pod to finish")
    log = await core.read_namespaced_pod_log("client", namespace)
    assert phase == "Succeeded", log
    assert log.strip() == f"I am system:serviceaccount:{namespace}:default"


async def test_a_label_change_mounts_the_tokens_it_requested_so_rotation_stays_on_time(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, control_plane: cluster.ClusterState
) -> None:
    # Rotation due only after an hour: a token that changes sooner came with the update.
    daemon = await start_node(
        "local",
        token_refresh_fraction=1.0,
        provider_config={**LOCAL_SETTINGS["provider_config"], "mount_volumes": True},
    )
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod(namespace, sleeper("relabelled", daemon.node_name, "600"))

    async def running() -> bool:
        return (await core.read_namespaced_pod("relabelled", namespace)).status.phase == "Running"

    await wait_for(running, timeout_seconds=60, what="the pod to run")
    path = f"{TOKEN_FOLDER}/token"
    first = await asyncio.to_thread(read_in_pod, control_plane, namespace, "relabelled", path)
    await core.patch_namespaced_pod("relabelled", namespace, {"metadata": {"labels": {"tier": "gold"}}})

    async def replaced() -> bool:
        return await asyncio.to_thread(read_in_pod, control_plane, namespace, "relabelled", path) != first

    await wait_for(replaced, timeout_seconds=60, what="the update's token to be mounted")
