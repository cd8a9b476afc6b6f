"""A node whose provider cannot start (its credentials Secret was never created) runs on: its Node says
why, a Warning Event says it again, and its probes keep the pod Ready instead of a crash loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from tests.integration.daemons import NodeDaemon
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster
from vk_devtools.devcluster.ports import PortPicker

pytestmark = pytest.mark.integration


async def test_a_missing_key_is_reported_on_the_node_and_the_daemon_keeps_trying(
    kube_api: client.ApiClient, control_plane: cluster.ClusterState, tmp_path: Path
) -> None:
    key = tmp_path / "credentials" / "runpod-api-key"  # as an optional Secret never created leaves it
    health_port = PortPicker().pick()
    daemon = NodeDaemon(
        folder=tmp_path / "node",
        provider="runpod",
        kubeconfig=str(control_plane.kubeconfig),
        health_port=health_port,
        provider_config={"api_key_file": str(key)},
    )
    core = client.CoreV1Api(kube_api)
    daemon.start()
    try:

        async def reported() -> dict[str, Any] | None:
            node = await core.read_node(daemon.node_name)
            conditions = {c.type: c for c in node.status.conditions or []}
            provider = conditions.get("ProviderAvailable")
            if provider is None or provider.reason != "CredentialsMissing":
                return None
            return {"ready": conditions["Ready"], "provider": provider}

        found = await wait_for(reported, timeout_seconds=60, what="the Node's ProviderAvailable condition")
        assert found["ready"].status == "False"
        assert found["provider"].status == "False"
        assert str(key) in found["provider"].message

        async def warned() -> list[Any]:
            events = await core.list_namespaced_event(
                "default", field_selector=f"involvedObject.name={daemon.node_name}"
            )
            return [e for e in events.items if e.type == "Warning" and e.reason == "CredentialsMissing"]

        assert await wait_for(warned, timeout_seconds=30, what="a Warning Event on the Node")
        url = f"http://127.0.0.1:{health_port}/readyz"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 200  # Ready as a pod: a restart would not create the Secret
        assert daemon.alive()
        assert "trying again in" in daemon.log_tail()
    finally:
        daemon.stop()
        daemon.close()
        await core.delete_node(daemon.node_name)
