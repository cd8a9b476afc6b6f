"""`kubectl offload` for the OffloadPolicies against the real plane: a person's flip and `auto` write
their annotations on a real Offload, and `policy list|status [--watch]` show a real policy.

No policy controller runs here: the test writes the policy's status through its /status subresource as
fixture data, the way the controller does, and reads what the CLI makes of it. The CRD is
manifests/crds/offloadpolicy.yaml; while that file does not exist (it is written on another branch), a
minimal CRD of our own stands in: cluster-scoped, a status subresource, fields kept as they are.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import POLICY_GROUP, Kubectl
from tests.integration.test_offload_cli import (
    CLI_TIMEOUT_SECONDS,
    create_offload,
    read,
    run_cli,
    start_cli,
)
from vk_devtools.devcluster import cluster
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.policy.names import (
    AUTO_ANNOTATION,
    FLIPPED_BY_ANNOTATION,
    HOLD_UNTIL_ANNOTATION,
    POLICY_KIND,
    POLICY_PLURAL,
    POLICY_SHORT_NAME,
    policies_path,
)

pytestmark = POLICY_GROUP

POLICY_CRD_FILE = Path(__file__).parents[2] / "manifests" / "crds" / "offloadpolicy.yaml"
GROUP = "offload.vk-provider.dev"
POLICY_CRD_NAME = f"{POLICY_PLURAL}.{GROUP}"
STAND_IN_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": POLICY_CRD_NAME},
    "spec": {
        "group": GROUP,
        "scope": "Cluster",
        "names": {
            "kind": POLICY_KIND,
            "listKind": f"{POLICY_KIND}List",
            "plural": POLICY_PLURAL,
            "singular": POLICY_KIND.lower(),
            "shortNames": [POLICY_SHORT_NAME],
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


@pytest.fixture(scope="session")
def policy_crd(kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The OffloadPolicy CRD applied and Established: the real one, or the stand-in while it is absent."""
    path = POLICY_CRD_FILE
    if not path.exists():
        path = tmp_path_factory.mktemp("policy-crd") / "offloadpolicy.yaml"
        path.write_text(yaml.safe_dump(STAND_IN_CRD))
    kubectl("apply", "-f", str(path))
    kubectl("wait", "--for=condition=Established", f"crd/{POLICY_CRD_NAME}", "--timeout=60s")


@pytest.fixture
async def api(
    control_plane: cluster.ClusterState, offload_crd: None, policy_crd: None
) -> AsyncIterator[KubeApi]:
    kube = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    try:
        yield kube
    finally:
        await kube.close()


CreatePolicy = Callable[..., Awaitable[str]]


@pytest.fixture
async def create_policy(api: KubeApi, namespace: str) -> AsyncIterator[CreatePolicy]:
    """`await create_policy(suffix, status=...)`: a policy named after this test's namespace (policies are
    cluster-scoped, so the namespace's deletion does not take them along: they are deleted here)."""
    created: list[str] = []

    async def create(suffix: str, status: dict[str, Any] | None = None) -> str:
        name = f"{namespace}-{suffix}"[:63].rstrip("-")
        body = {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": POLICY_KIND,
            "metadata": {"name": name},
            "spec": {
                "offloads": {"selector": {"matchLabels": {"tier": "inference"}}},
                "homePool": {"nodeSelector": {"matchLabels": {"gpu-pool": "home"}}},
            },
        }
        await api.create(policies_path(), body)
        created.append(name)
        if status is not None:
            await write_status(api, name, status)
        return name

    yield create
    for name in created:
        try:
            await api.delete(policies_path(name))
        except KubeApiError as error:
            if not error.not_found:
                raise


async def write_status(api: KubeApi, name: str, status: dict[str, Any]) -> None:
    await api.patch(policies_path(name, status=True), {"status": status}, content_type=MERGE_PATCH)


def fixture_status(namespace: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    stamp = (now - timedelta(seconds=40)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Watching",
                "message": "1 Offload, 8 home GPUs",
                "lastTransitionTime": stamp,
            }
        ],
        "demand": {
            "gpus": 6,
            "gangs": [
                {
                    "kind": "Pods",
                    "namespace": "train",
                    "name": "job-a",
                    "gpus": 6,
                    "unplacedGpus": 2,
                    "since": stamp,
                }
            ],
        },
        "pool": {
            "resource": "nvidia.com/gpu",
            "total": 8,
            "free": 2,
            "reserved": 4,
            "busy": 0,
            "unhealthy": 2,
            "tensorActive": 0.5,
            "nodes": [
                {
                    "name": "gpu-a",
                    "gpus": 4,
                    "free": 0,
                    "healthy": True,
                    "temperatureCelsius": 64,
                    "tensorActive": 1.0,
                },
                {
                    "name": "gpu-b",
                    "gpus": 4,
                    "free": 2,
                    "healthy": False,
                    "reason": "Xid",
                    "since": stamp,
                    "temperatureCelsius": 71,
                    "tensorActive": 0.0,
                },
            ],
        },
        "offloads": [
            {
                "namespace": namespace,
                "name": "chat",
                "placement": "away",
                "phase": "Succeeded",
                "homeGpus": 4,
                "auto": "on",
                "holdUntil": "next-flip",
                "lastFlip": stamp,
                "lastTrigger": "person",
            }
        ],
        "decisions": [
            {
                "time": stamp,
                "action": "Skip",
                "offloads": [f"{namespace}/chat"],
                "reason": "ManualHold: held until the next flip by a person",
            }
        ],
    }


async def test_policy_list_and_status_show_a_policy_with_and_without_status(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState, create_policy: CreatePolicy
) -> None:
    reported = await create_policy("reported", status=fixture_status(namespace))
    fresh = await create_policy("fresh")

    listed = await asyncio.to_thread(run_cli, control_plane, "policy", "list")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split()[:8] == [
        "NAME",
        "PAUSED",
        "DEMAND",
        "FREE",
        "RESERVED",
        "UNHEALTHY",
        "TOTAL",
        "OFFLOADS",
    ]
    by_name = {row.split()[0]: row.split() for row in rows}
    assert by_name[reported][1:9] == ["no", "6", "2", "4", "2", "8", "1", "True"]
    assert by_name[fresh][1:9] == ["no", "-", "-", "-", "-", "-", "-", "-"]

    as_json = await asyncio.to_thread(run_cli, control_plane, "policy", "list", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    documents = {item["metadata"]["name"]: item for item in json.loads(as_json.stdout)["items"]}
    assert documents[reported]["status"]["pool"]["unhealthy"] == 2

    shown = await asyncio.to_thread(run_cli, control_plane, "policy", "status", reported)
    assert shown.returncode == 0, shown.stderr
    page = shown.stdout
    assert "Demand:       6 GPUs from 1 gang" in page
    assert "Home GPUs:    8 nvidia.com/gpu: 2 free, 4 reserved, 0 busy, 2 unhealthy" in page
    assert "Tensor cores: 50% active on average" in page
    assert "unhealthy: Xid" in page
    assert "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" in page
    assert f"{namespace}/chat" in page
    assert "next flip" in page
    assert "      ManualHold: held until the next flip by a person" in page.splitlines()

    stored = await api.get(policies_path(reported))
    document = await asyncio.to_thread(run_cli, control_plane, "policy", "status", reported, "-o", "json")
    assert document.returncode == 0, document.stderr
    assert json.loads(document.stdout) == stored

    empty = await asyncio.to_thread(run_cli, control_plane, "policy", "status", fresh)
    assert empty.returncode == 0, empty.stderr
    assert "Selects:      Offloads matching tier=inference, in every namespace" in empty.stdout
    assert "Status:       no status yet" in empty.stdout

    # An Event about the policy (filed in "default", as for any cluster-scoped object) shows on its page.
    event = await api.create(
        "/api/v1/namespaces/default/events",
        {
            "metadata": {"generateName": f"{reported}."},
            "involvedObject": {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": POLICY_KIND,
                "name": reported,
                "uid": stored["metadata"]["uid"],
            },
            "type": "Normal",
            "reason": "FlipOutStarted",
            "message": "chat moves away for train/job-a",
            "source": {"component": "test"},
            "firstTimestamp": stored["metadata"]["creationTimestamp"],
            "lastTimestamp": stored["metadata"]["creationTimestamp"],
        },
    )
    try:
        with_events = await asyncio.to_thread(run_cli, control_plane, "policy", "status", reported)
    finally:
        await api.delete(f"/api/v1/namespaces/default/events/{event['metadata']['name']}")
    assert with_events.returncode == 0, with_events.stderr
    events = with_events.stdout.split("Recent events:\n", 1)[1]
    assert "FlipOutStarted" in events
    assert "chat moves away for train/job-a" in events

    missing = await asyncio.to_thread(run_cli, control_plane, "policy", "status", f"{namespace}-ghost")
    assert missing.returncode == 1
    assert f'offloadpolicy "{namespace}-ghost" not found' in missing.stderr


async def test_policy_status_watch_redraws_on_a_status_change_until_interrupted(
    api: KubeApi, control_plane: cluster.ClusterState, create_policy: CreatePolicy
) -> None:
    name = await create_policy("watched")
    process = await start_cli(control_plane, "policy", "status", name, "--watch")
    try:
        assert process.stdout is not None
        async with asyncio.timeout(CLI_TIMEOUT_SECONDS):
            first = await process.stdout.readuntil(b"no status yet")
        assert name.encode() in first
        await write_status(api, name, {"demand": {"gpus": 4, "gangs": []}, "pool": {"total": 8, "free": 4}})
        async with asyncio.timeout(CLI_TIMEOUT_SECONDS):
            await process.stdout.readuntil(b"Demand:       4 GPUs from 0 gangs")
        assert process.returncode is None
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(CLI_TIMEOUT_SECONDS):
            _, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 130, stderr.decode()


async def test_flip_with_a_hold_and_auto_write_the_annotations_of_a_real_offload(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    await create_offload(api, namespace, "chat")

    before = datetime.now(UTC)
    held = await asyncio.to_thread(
        run_cli, control_plane, "flip", "chat", "--to", "away", "--hold", "2h", "-n", namespace
    )
    after = datetime.now(UTC)
    assert held.returncode == 0, held.stderr
    offload = await read(api, namespace, "chat")
    annotations = offload["metadata"]["annotations"]
    assert offload["spec"]["placement"] == "away"
    assert annotations[FLIPPED_BY_ANNOTATION] == "person"
    until = parse_timestamp(annotations[HOLD_UNTIL_ANNOTATION])
    assert until is not None
    assert annotations[HOLD_UNTIL_ANNOTATION].endswith("Z")
    two_hours = timedelta(hours=2)
    assert before.replace(microsecond=0) + two_hours <= until <= after + two_hours
    assert "OffloadPolicies leave it alone until" in held.stdout

    shown = await asyncio.to_thread(run_cli, control_plane, "status", "chat", "-n", namespace)
    assert "Hold:         until " in shown.stdout
    assert "Flipped by:   person" in shown.stdout

    # A bad duration is refused before anything is written.
    version = offload["metadata"]["resourceVersion"]
    refused = await asyncio.to_thread(
        run_cli, control_plane, "flip", "chat", "--to", "home", "--hold", "2x", "-n", namespace
    )
    assert refused.returncode == 2
    assert "'2x' is not a hold duration" in refused.stderr
    assert (await read(api, namespace, "chat"))["metadata"]["resourceVersion"] == version

    off = await asyncio.to_thread(run_cli, control_plane, "auto", "off", "chat", "-n", namespace)
    assert off.returncode == 0, off.stderr
    annotations = (await read(api, namespace, "chat"))["metadata"]["annotations"]
    assert annotations[AUTO_ANNOTATION] == "off"
    assert HOLD_UNTIL_ANNOTATION in annotations  # off keeps the hold: only `on` hands the Offload back
    shown = await asyncio.to_thread(run_cli, control_plane, "status", "chat", "-n", namespace)
    assert "Auto:         off" in shown.stdout

    on = await asyncio.to_thread(run_cli, control_plane, "auto", "on", "chat", "-n", namespace)
    assert on.returncode == 0, on.stderr
    annotations = (await read(api, namespace, "chat"))["metadata"]["annotations"]
    assert annotations[AUTO_ANNOTATION] == "on"
    assert HOLD_UNTIL_ANNOTATION not in annotations

    # A flip without --hold holds until the next flip by a person.
    back = await asyncio.to_thread(run_cli, control_plane, "flip", "chat", "--to", "home", "-n", namespace)
    assert back.returncode == 0, back.stderr
    offload = await read(api, namespace, "chat")
    assert offload["spec"]["placement"] == "home"
    assert offload["metadata"]["annotations"][HOLD_UNTIL_ANNOTATION] == "next-flip"
    assert "until the next flip by a person" in back.stdout


async def test_the_hold_is_written_in_the_same_write_as_the_placement(
    api: KubeApi, namespace: str, control_plane: cluster.ClusterState
) -> None:
    """One patch: a watcher sees a single new version, carrying the placement and the hold together
    (the policy never sees the placement without the hold)."""
    created = await create_offload(api, namespace, "chat")
    watched: list[dict[str, Any]] = []

    async def collect() -> None:
        async for event in api.watch(
            f"/apis/{GROUP}/v1alpha1/namespaces/{namespace}/offloads",
            query={"resourceVersion": created["metadata"]["resourceVersion"]},
            timeout_seconds=CLI_TIMEOUT_SECONDS,
        ):
            watched.append(event.object)
            if event.object["spec"].get("placement") == "away":
                return

    collector = asyncio.create_task(collect())
    flipped = await asyncio.to_thread(
        run_cli, control_plane, "flip", "chat", "--to", "away", "--hold", "90m", "-n", namespace
    )
    assert flipped.returncode == 0, flipped.stderr
    async with asyncio.timeout(CLI_TIMEOUT_SECONDS):
        await collector
    changed = [
        version
        for version in watched
        if version["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    ]
    assert len(changed) == 1
    annotations = changed[0]["metadata"]["annotations"]
    assert annotations[HOLD_UNTIL_ANNOTATION].endswith("Z")
    assert annotations[FLIPPED_BY_ANNOTATION] == "person"
