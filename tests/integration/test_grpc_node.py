"""A `grpc` virtual node on the real plane, its provider a plugin in another process.

The plugin is `vk-provider plugin serve --provider local` (the Python SDK serving the `local` provider
over a unix socket); the node only knows the socket. Pods run, their logs come through the plugin,
deletion reaches it, and a plugin killed with SIGKILL makes the provider unavailable on the node
without evicting anything, until it is back and the node goes on.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client

from tests.integration.conftest import wait_for_node_ready
from tests.integration.daemons import ManagedProcess, processes_with_argument
from tests.integration.migration_rig import pod_range
from tests.integration.nodes import TOLERATE_ALL
from tests.integration.test_exec import BIG_FILE_BYTES, box_pod, kubectl_bytes, kubectl_process, sha256_in_pod
from tests.integration.test_local_node import LOCAL_SETTINGS, StartNode, sleeper
from tests.integration.test_port_forward import forwarded_port
from tests.integration.waiting import wait_for
from tests.unit.plugin.goexample import build_go_plugin
from tests.unit.providers.grpc.support import RawPlugin, serving_raw
from vk_devtools.devcluster import cluster
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_providers.grpc.provider import GrpcSettings, plugin_info, provider_for


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short folder: a unix socket's path has at most 107 bytes, and pytest's folders are long."""
    folder = Path(tempfile.mkdtemp(prefix="vkp-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def plugin_process(
    folder: Path, node_name: str, address: str, config_values: dict[str, Any] | None = None
) -> ManagedProcess:
    config = folder / "local.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({**LOCAL_SETTINGS["provider_config"], **(config_values or {})}))
    return ManagedProcess(
        folder=folder,
        log_name="plugin.log",
        arguments=[
            "plugin",
            "serve",
            "--provider",
            "local",
            "--provider-config",
            str(config),
            "--node-name",
            node_name,
            "--address",
            address,
            "--state-dir",
            str(folder / "state"),
            "--log-level",
            "DEBUG",
        ],
    )


async def provider_available(core: client.CoreV1Api, node_name: str) -> str | None:
    node = await core.read_node(node_name)
    condition = next((c for c in node.status.conditions or () if c.type == "ProviderAvailable"), None)
    return None if condition is None else str(condition.status)


async def test_a_grpc_node_runs_pods_through_a_plugin_and_rides_out_the_plugins_death(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, tmp_path: Path, socket_dir: Path
) -> None:
    node_name = f"vk-grpc-{random.randrange(16**6):06x}"  # noqa: S311 - a name, not a secret
    address = f"unix://{socket_dir / 'plugin.sock'}"
    plugin = plugin_process(tmp_path / "plugin", node_name, address)
    plugin.start()
    try:
        daemon = await start_node(
            "grpc",
            node_name=node_name,
            provider_config={"address": address, "call_timeout_seconds": 10},
            health_check_interval_seconds=1,
        )
        core = client.CoreV1Api(kube_api)
        tag = f"41{random.randrange(10**6):06d}.5"  # noqa: S311 - a tag, not a secret
        pod = sleeper("through-plugin", daemon.node_name, tag)
        pod["spec"]["containers"][0]["command"] = [
            "sh",
            "-c",
            f"echo hello from the plugin; exec sleep {tag}",
        ]
        await core.create_namespaced_pod(namespace, pod)

        async def running() -> bool:
            phase = (await core.read_namespaced_pod("through-plugin", namespace)).status.phase
            return phase == "Running" and len(processes_with_argument(tag)) == 1

        await wait_for(running, timeout_seconds=60, what=f"the pod to run:\n{plugin.log_tail()}")
        log = await core.read_namespaced_pod_log("through-plugin", namespace)
        assert log == "hello from the plugin\n"

        plugin.kill()  # SIGKILL: no goodbye; the local provider's processes outlive it

        async def unavailable() -> bool:
            return await provider_available(core, daemon.node_name) == "False"

        await wait_for(unavailable, timeout_seconds=60, what="ProviderAvailable=False")
        assert (await core.read_namespaced_pod("through-plugin", namespace)).status.phase == "Running"
        assert len(processes_with_argument(tag)) == 1  # nothing evicted, nothing stopped
        assert daemon.alive()

        plugin.start()  # the same state folder: it adopts the running process

        async def available_again() -> bool:
            return await provider_available(core, daemon.node_name) == "True"

        await wait_for(
            available_again, timeout_seconds=90, what=f"ProviderAvailable=True:\n{plugin.log_tail()}"
        )
        assert len(processes_with_argument(tag)) == 1  # adopted, not started twice
        assert await core.read_namespaced_pod_log("through-plugin", namespace) == "hello from the plugin\n"

        await core.delete_namespaced_pod("through-plugin", namespace)

        async def gone() -> bool:
            listing = await core.list_namespaced_pod(namespace, field_selector="metadata.name=through-plugin")
            return not listing.items and not processes_with_argument(tag)

        await wait_for(gone, timeout_seconds=60, what="the pod and its process to be gone")
    finally:
        plugin.close()


async def test_kubectl_exec_and_port_forward_reach_a_pod_through_the_plugin(  # noqa: PLR0917 (fixtures)
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    control_plane: cluster.ClusterState,
    tmp_path: Path,
    socket_dir: Path,
) -> None:
    """The plugin's Exec and PortForward calls, end to end: kubectl -> apiserver -> node -> plugin."""
    node_name = f"vk-grpc-{random.randrange(16**6):06x}"  # noqa: S311 - a name, not a secret
    address = f"unix://{socket_dir / 'plugin.sock'}"
    plugin = plugin_process(tmp_path / "plugin", node_name, address, {"address_range": pod_range()})
    plugin.start()
    forwarder = None
    try:
        await start_node("grpc", node_name=node_name, provider_config={"address": address})
        core = client.CoreV1Api(kube_api)
        await core.create_namespaced_pod(namespace, box_pod(node_name))

        async def ready() -> bool:
            pod = await core.read_namespaced_pod("box", namespace)
            return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())

        await wait_for(ready, timeout_seconds=90, what=f"the box pod Ready:\n{plugin.log_tail()}")

        script = "cat; echo to-stderr >&2; exit 3"
        done = await asyncio.to_thread(
            kubectl_bytes,
            control_plane,
            "exec",
            "-i",
            "-n",
            namespace,
            "box",
            "--",
            "sh",
            "-c",
            script,
            stdin=b"piped through the plugin\n",
        )
        assert done.stdout == b"piped through the plugin\n"
        assert done.stderr == b"to-stderr\ncommand terminated with exit code 3\n"
        assert done.returncode == 3

        forwarder = kubectl_process(
            control_plane, "port-forward", "-n", namespace, "pod/box", "0:8000", stdout=subprocess.PIPE
        )
        port = await asyncio.to_thread(forwarded_port, forwarder)
        digest, size = hashlib.sha256(), 0
        timeout = aiohttp.ClientTimeout(total=120)
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.get(f"http://127.0.0.1:{port}/big.bin") as response,
        ):
            assert response.status == 200
            async for chunk in response.content.iter_chunked(1024 * 1024):
                digest.update(chunk)
                size += len(chunk)
        assert size == BIG_FILE_BYTES
        assert digest.hexdigest() == await asyncio.to_thread(
            sha256_in_pod, control_plane, namespace, "big.bin"
        )

        await core.delete_namespaced_pod("box", namespace)  # while the plugin is there to stop it

        async def gone() -> bool:
            listing = await core.list_namespaced_pod(namespace, field_selector="metadata.name=box")
            return not listing.items

        await wait_for(gone, timeout_seconds=60, what="the box pod to be gone")
    finally:
        if forwarder is not None:
            forwarder.terminate()
            forwarder.wait(10)
            if forwarder.stdout is not None:
                forwarder.stdout.close()
        plugin.close()


async def test_a_node_on_a_plugin_that_hangs_lies_or_answers_garbage_says_so_and_keeps_running(
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    control_plane: cluster.ClusterState,
    socket_dir: Path,
) -> None:
    """The plugin is served by this test: it declares logs and has none, offers no CreatePod, hangs on
    CheckHealth, then answers it with bytes that are no message. Each shows on the node, in words."""
    plugin = RawPlugin(
        answers={
            "GetPodState": pb.GetPodStateResponse(),
            "ListPods": pb.ListPodsResponse(),
            "DeletePod": pb.DeletePodResponse(),
        },
        hangs={"CheckHealth"},
    )
    core = client.CoreV1Api(kube_api)
    async with serving_raw(plugin, socket_dir / "liar.sock") as address:
        daemon = await start_node(
            "grpc",
            provider_config={"address": address, "call_timeout_seconds": 2},
            health_check_interval_seconds=1,
        )

        async def provider_condition(words: str) -> bool:
            node = await core.read_node(daemon.node_name)
            condition = next(c for c in node.status.conditions or () if c.type == "ProviderAvailable")
            return condition.status == "False" and words in (condition.message or "")

        async def node_event(reason: str, words: str) -> bool:
            selector = f"involvedObject.name={daemon.node_name},reason={reason}"
            listing = await core.list_event_for_all_namespaces(field_selector=selector)
            return any(words in (event.message or "") for event in listing.items)

        hanging = "the plugin did not answer CheckHealth in time"
        await wait_for(
            lambda: provider_condition(hanging), timeout_seconds=60, what=f"ProviderAvailable: {hanging}"
        )
        await wait_for(
            lambda: node_event("ProviderUnavailable", hanging), timeout_seconds=30, what="its Event"
        )

        plugin.hangs.clear()
        plugin.garbage.add("CheckHealth")
        garbage = "liar answered CheckHealth with a message the node cannot read: bytes that are not a"
        await wait_for(
            lambda: provider_condition(garbage), timeout_seconds=60, what=f"ProviderAvailable: {garbage}"
        )

        plugin.garbage.clear()
        plugin.answers["CheckHealth"] = pb.CheckHealthResponse()
        await wait_for(
            lambda: node_event("ProviderAvailable", "the provider recovered"),
            timeout_seconds=60,
            what="the node's ProviderAvailable Event",
        )

        await core.create_namespaced_pod(namespace, sleeper("refused", daemon.node_name, "600"))

        async def refused() -> bool:
            listing = await core.list_namespaced_event(
                namespace, field_selector="involvedObject.name=refused,reason=ProviderCreateFailed"
            )
            return any("does not implement CreatePod" in (event.message or "") for event in listing.items)

        await wait_for(refused, timeout_seconds=60, what="the pod's ProviderCreateFailed Event")
        logs = await asyncio.to_thread(
            kubectl_bytes, control_plane, "logs", "-n", namespace, "refused", timeout=60
        )
        assert logs.returncode != 0
        assert b"does not implement StreamLogs" in logs.stderr, logs.stderr
        assert daemon.alive()
        await core.delete_namespaced_pod("refused", namespace)

        async def gone() -> bool:
            listing = await core.list_namespaced_pod(namespace, field_selector="metadata.name=refused")
            return not listing.items

        await wait_for(gone, timeout_seconds=60, what="the refused pod to be gone")


@pytest.fixture(scope="module")
def go_plugin_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_go_plugin(tmp_path_factory.mktemp("go-plugin"))


async def pods_at_the_plugin(address: str) -> list[str]:
    """The UIDs the plugin holds, asked as a second node process would ask."""
    settings = GrpcSettings(address, call_timeout_seconds=5, connect_timeout_seconds=5)
    client = provider_for(settings, await asyncio.to_thread(plugin_info, settings, "test"))
    try:
        return [state.ref.uid for state in await client.list_pods()]
    finally:
        await client.aclose()


async def test_a_grpc_node_on_the_go_plugin_streams_logs_and_converges_after_either_side_is_killed(  # noqa: PLR0917
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    socket_dir: Path,
    go_plugin_binary: Path,
    control_plane: cluster.ClusterState,
) -> None:
    node_name = f"vk-go-{random.randrange(16**6):06x}"  # noqa: S311 - a name, not a secret
    address = f"unix://{socket_dir / 'go.sock'}"
    plugin = ManagedProcess(
        folder=tmp_path / "plugin",
        arguments=["--address", address],
        program=(str(go_plugin_binary),),
        log_name="plugin.log",
    )
    plugin.start()
    try:
        daemon = await start_node(
            "grpc",
            node_name=node_name,
            provider_config={"address": address, "call_timeout_seconds": 10},
            health_check_interval_seconds=1,
        )
        core = client.CoreV1Api(kube_api)
        pod = {
            "metadata": {"name": "go-pod"},
            "spec": {
                "nodeName": node_name,
                "tolerations": TOLERATE_ALL,
                "containers": [
                    {"name": "server", "image": "example/server:1", "ports": [{"containerPort": 8080}]}
                ],
            },
        }
        uid = (await core.create_namespaced_pod(namespace, pod)).metadata.uid

        async def running() -> bool:
            return str((await core.read_namespaced_pod("go-pod", namespace)).status.phase) == "Running"

        await wait_for(running, timeout_seconds=60, what=f"the pod to run:\n{daemon.log_tail()}")
        assert await pods_at_the_plugin(address) == [uid]

        # kubectl logs -f: the ten lines at once, then one a second, through the node and the plugin.
        follow = await asyncio.create_subprocess_exec(
            str(control_plane.bin_dir / "kubectl"),
            f"--kubeconfig={control_plane.kubeconfig}",
            "logs",
            "-f",
            "go-pod",
            "-n",
            namespace,
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert follow.stdout is not None
            async with asyncio.timeout(60):
                lines = [await follow.stdout.readline() for _ in range(12)]
            assert lines[0] == b"line 1 of server\n"
            assert lines[11] == b"line 12 of server\n"  # followed: written after the call began
        finally:
            follow.kill()
            await follow.wait()

        daemon.kill()  # kill -9 of the node: its successor adopts, and creates nothing twice
        daemon.start()

        async def taken_over_again() -> bool:
            return daemon.log_path.read_text().count("took over in") == 2

        await wait_for(taken_over_again, timeout_seconds=60, what=f"the node back:\n{daemon.log_tail()}")
        await wait_for_node_ready(kube_api, daemon)
        assert await pods_at_the_plugin(address) == [uid]
        assert await running()

        plugin.kill()  # kill -9 of the plugin: its pods were in its memory

        async def provider_is(wanted: str) -> bool:
            return await provider_available(core, node_name) == wanted

        await wait_for(lambda: provider_is("False"), timeout_seconds=60, what="ProviderAvailable=False")
        assert (await core.read_namespaced_pod("go-pod", namespace)).metadata.uid == uid  # not evicted
        plugin.start()
        await wait_for(lambda: provider_is("True"), timeout_seconds=90, what="ProviderAvailable=True")

        async def recreated() -> bool:
            return await pods_at_the_plugin(address) == [uid] and await running()

        await wait_for(
            recreated, timeout_seconds=90, what=f"the pod back at the plugin:\n{daemon.log_tail()}"
        )

        await core.delete_namespaced_pod("go-pod", namespace)

        async def gone() -> bool:
            listing = await core.list_namespaced_pod(namespace, field_selector="metadata.name=go-pod")
            return not listing.items and await pods_at_the_plugin(address) == []

        await wait_for(gone, timeout_seconds=60, what="the pod gone from the cluster and the plugin")
    finally:
        plugin.close()
