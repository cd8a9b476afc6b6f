"""`kubectl offload uninstall` against a scripted apiserver: what it refuses, what it writes, and what it
says when time runs out. (The whole way on the real plane: tests/integration/test_uninstall.py.)"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from vk_provider.kit.kube import KubeApi, KubeApiError
from vk_provider.offload.names import FINALIZER
from vk_provider.offloadcli import uninstall
from vk_provider.offloadcli.commands import CommandError

LEASE = "/apis/coordination.k8s.io/v1/namespaces/vk-provider-system/leases/vk-provider-controller"


class ScriptedApi:
    """One Offload serving away, a burst node with its away pod, and a Lease; every write recorded."""

    def __init__(self, *, controller: bool) -> None:
        renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.lease: dict[str, Any] | None = (
            {"spec": {"holderIdentity": "c-0", "renewTime": renewed, "leaseDurationSeconds": 15}}
            if controller
            else None
        )
        self.offload: dict[str, Any] = {
            "metadata": {
                "namespace": "ml",
                "name": "chat",
                "generation": 3,
                "resourceVersion": "9",
                "finalizers": [FINALIZER],
            },
            "spec": {"placement": "away"},
            "status": {"phase": "Succeeded", "awayWeight": 100, "observedGeneration": 3},
        }
        self.writes: list[tuple[str, str]] = []

    async def get(self, path: str, *, query: Mapping[str, str | int | bool] | None = None) -> dict[str, Any]:
        if path == LEASE:
            if self.lease is None:
                raise KubeApiError(404, "NotFound", "not found")
            return copy.deepcopy(self.lease)
        if path.endswith("/offloads"):
            return {"items": [copy.deepcopy(self.offload)]}
        if path.endswith("/offloads/chat"):
            return copy.deepcopy(self.offload)
        if path == "/api/v1/nodes":
            return {"items": [{"metadata": {"name": "burst"}}]}
        if path.endswith("/pods"):
            labels = {"offload.vk-provider.dev/offload": "chat"}
            return {
                "items": [
                    {
                        "metadata": {"namespace": "ml", "name": "chat-away-1", "labels": labels},
                        "spec": {"nodeName": "burst"},
                        "status": {"phase": "Running"},
                    }
                ]
            }
        raise AssertionError(f"unexpected GET {path}")

    async def patch(self, path: str, body: Any, *, content_type: str = "") -> dict[str, Any]:
        self.writes.append(("PATCH", path))
        # The controller never answers: the generation moves, the status stays.
        self.offload["metadata"]["generation"] = 4
        return copy.deepcopy(self.offload)

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self.writes.append(("DELETE", path))
        return {}


def arguments(*, timeout: int = 600, dry_run: str | None = None, force: bool = False) -> argparse.Namespace:
    return argparse.Namespace(
        namespace=None,
        timeout=timeout,
        controller_lease=("vk-provider-system", "vk-provider-controller"),
        virtual_nodes="node-restriction.kubernetes.io/vk-provider=true",
        force=force,
        dry_run=dry_run,
    )


async def test_without_a_controller_it_refuses_names_the_offload_and_writes_nothing() -> None:
    api = ScriptedApi(controller=False)
    with pytest.raises(CommandError) as refused:
        await uninstall.run_uninstall(cast(KubeApi, api), arguments(), "default")
    assert refused.value.code == 1
    message = refused.value.message
    assert "the migration controller must run to bring Offloads home, and it does not" in message
    assert "vk-provider-system/vk-provider-controller (it does not exist)" in message
    assert "--force" in message
    assert "Offload ml/chat: placement away, phase Succeeded, away weight 100%" in message
    assert api.writes == []


async def test_a_dry_run_says_what_it_would_do_and_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    api = ScriptedApi(controller=True)
    assert await uninstall.run_uninstall(cast(KubeApi, api), arguments(dry_run="client"), "default") == 0
    shown = capsys.readouterr().out
    assert "controller c-0 holds the Lease" in shown
    assert "would: bring home (steps 10,25,50,75,100, 30s each)" in shown
    assert "pod ml/chat-away-1 on node burst (Running; away pod of Offload chat)" in shown
    assert "nothing was changed (--dry-run=client)" in shown
    assert api.writes == []


async def test_when_time_runs_out_it_lists_what_is_left(capsys: pytest.CaptureFixture[str]) -> None:
    api = ScriptedApi(controller=True)
    with pytest.raises(CommandError) as timed_out:
        await uninstall.run_uninstall(cast(KubeApi, api), arguments(timeout=1), "default")
    assert timed_out.value.code == 1
    assert timed_out.value.message.splitlines() == [
        "uninstall did not finish within 1s; left:",
        "  Offload ml/chat: placement away, phase Succeeded, away weight 100%",
        "  pod ml/chat-away-1 on node burst (Running; away pod of Offload chat)",
    ]
    assert api.writes == [("PATCH", "/apis/offload.vk-provider.dev/v1alpha1/namespaces/ml/offloads/chat")]
    assert "uninstall: bringing 1 Offloads home by their strategies" in capsys.readouterr().out
