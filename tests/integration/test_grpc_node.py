"""A `grpc` virtual node on the real plane, its provider a plugin in another process.

The plugin is `vk-provider plugin serve --provider local` (the Python SDK serving the `local` provider
over a unix socket); the node only knows the socket. Pods run, their logs come through the plugin,
deletion reaches it, and a plugin killed with SIGKILL makes the provider unavailable on the node
without evicting anything, until it is back and the node goes on.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from tests.integration.daemons import ManagedProcess, processes_with_argument
from tests.integration.test_local_node import LOCAL_SETTINGS, StartNode, sleeper
from tests.integration.waiting import wait_for


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
