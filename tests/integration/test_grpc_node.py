"""A `grpc` virtual node on the real plane, its provider a plugin in another process.

The plugin is `vk-provider plugin serve --provider local` (the Python SDK serving the `local` provider
over a unix socket); the node only knows the socket. Pods run, their logs come through the plugin,
deletion reaches it, and a plugin killed with SIGKILL makes the provider unavailable on the node
without evicting anything, until it is back and the node goes on.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from tests.integration.conftest import wait_for_node_ready
from tests.integration.daemons import ManagedProcess, processes_with_argument
from tests.integration.nodes import TOLERATE_ALL
from tests.integration.test_local_node import LOCAL_SETTINGS, StartNode, sleeper
from tests.integration.waiting import wait_for
from tests.unit.plugin.goexample import build_go_plugin
from vk_devtools.devcluster import cluster
from vk_providers.grpc.provider import GrpcSettings, plugin_info, provider_for


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short folder: a unix socket's path has at most 107 bytes, and pytest's folders are long."""
    folder = Path(tempfile.mkdtemp(prefix="vkp-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def plugin_process(folder: Path, node_name: str, address: str) -> ManagedProcess:
    config = folder / "local.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(LOCAL_SETTINGS["provider_config"]))
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
