"""Bounds where names or money are at stake, on the real plane: the apiserver refuses, saying why.

An Offload's name is a label value on its away pods (at most 63 characters), and every away replica is
a paid workload at a provider: a 64- or 253-character name and `away.replicas: 100000` are refused by
the CRD's schema, with a message naming the field, where the user looks (kubectl's answer). Nothing is
created, so nothing can be stuck, and the CLI answers "not found" for the name, never the misleading
"already migrating to home" it used to.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Kubectl
from vk_devtools.devcluster import cluster

pytestmark = pytest.mark.usefixtures("offload_crd")


def manifest(name: str, **away: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "offload.vk-provider.dev/v1alpha1",
            "kind": "Offload",
            "metadata": {"name": name},
            "spec": {
                "home": {"deployment": "chat", "service": "chat"},
                "placement": "away",
                "route": {"hosts": ["chat.example.test"]},
                "away": away,
            },
        }
    )


def apply(kubectl: Kubectl, namespace: str, body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "offload.json"
    path.write_text(body)
    return kubectl("apply", "-n", namespace, "-f", str(path), check=False)


def nothing_in(kubectl: Kubectl, namespace: str) -> None:
    for kind in ("offloads.offload.vk-provider.dev", "deployments", "pods"):
        listed = kubectl("get", kind, "-n", namespace, "-o", "name")
        assert listed.stdout.strip() == "", f"{kind} left in {namespace}: {listed.stdout}"


def cli(control_plane: cluster.ClusterState, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "kubectl-offload"), *arguments]
    command += ["--kubeconfig", str(control_plane.kubeconfig)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("length", [64, 253])
async def test_a_name_too_long_for_a_label_is_refused_with_the_reason(
    length: int, kubectl: Kubectl, namespace: str, tmp_path: Path, control_plane: cluster.ClusterState
) -> None:
    name = ("o" * (length - 1)) + "x"
    refused = await asyncio.to_thread(apply, kubectl, namespace, manifest(name), tmp_path)

    assert refused.returncode != 0
    assert "metadata.name" in refused.stderr
    assert "must be at most 63 characters" in refused.stderr, refused.stderr
    nothing_in(kubectl, namespace)
    for arguments in (["flip", name, "--to", "home"], ["status", name]):
        answer = await asyncio.to_thread(cli, control_plane, *arguments, "-n", namespace)
        assert answer.returncode == 1
        assert "not found" in answer.stderr
        assert "already migrating" not in answer.stderr


async def test_the_longest_name_that_fits_is_accepted(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    accepted = await asyncio.to_thread(apply, kubectl, namespace, manifest("o" * 63), tmp_path)
    assert accepted.returncode == 0, accepted.stderr


@pytest.mark.parametrize(("replicas", "accepted"), [(100000, False), (101, False), (100, True)])
async def test_away_replicas_are_bounded_by_the_schema(
    replicas: int, accepted: bool, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    answer = await asyncio.to_thread(apply, kubectl, namespace, manifest("chat", replicas=replicas), tmp_path)

    if accepted:
        assert answer.returncode == 0, answer.stderr
        return
    assert answer.returncode != 0
    assert "spec.away.replicas" in answer.stderr
    assert "should be less than or equal to 100" in answer.stderr, answer.stderr
    nothing_in(kubectl, namespace)
