"""External providers under failure, on the real plane: `runpod` and `chain` nodes against RunPod stand-ins.

- a fleet of 50 pods runs and goes while a fifth of RunPod calls fail at random (5xx, 429 with
  Retry-After, hangs, answers lost after the work was done), with and without kill -9 of the daemon:
  every pod runs, every RunPod pod is made exactly once and is gone at the end;
- a RunPod pod in ERROR fails its pod with RunPod's own words;
- a capacity refusal at the cheaper member of a chain moves the pod on to the next.

The random faults are seeded: a failure message names the seed, and `VK_PROVIDER_FAULT_SEED=<seed>`
replays the same sequence of draws (which request meets which draw still depends on timing).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.integration.daemons import NodeDaemon
from tests.integration.runpod_fleet import (
    GPU,
    HANG_SECONDS,
    Fleet,
    creates_by_uid,
    faults_served,
    gpu_pod,
    lost_creates,
    runpod_config,
    wait_and_kill,
)
from tests.integration.test_virtual_node import events_of
from tests.integration.waiting import wait_for
from vk_devtools.standins.faults import RANDOM_KINDS
from vk_devtools.standins.runpod.catalog import FakeGpuType
from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.kit.placement import (
    CHOSEN_CONDITION,
    GPU_TYPES_ANNOTATION,
    MAX_PRICE_ANNOTATION,
    PLACED_EVENT_REASON,
)
from vk_provider.kit.placement.capacity import gpu_type_resource

StartNode = Callable[..., Awaitable[NodeDaemon]]
StartRunPodNode = Callable[..., Awaitable[NodeDaemon]]
SEED_VARIABLE = "VK_PROVIDER_FAULT_SEED"
FLEET_SIZE = 50
FAULT_FRACTION = 0.2
SCRIPTED_LOST_CREATES = 3
"""The first creates lose their answer for certain, on top of the random ones that may."""
MIN_FAULTS_PER_KIND = 5
"""Far below the ~1000 draws x 20% / 4 kinds expected: a run that injects fewer proves too little."""


@pytest.fixture
def fault_seed() -> int:
    configured = os.environ.get(SEED_VARIABLE)
    return int(configured) if configured else random.SystemRandom().randrange(2**32)


@pytest.fixture
async def runpod_fake() -> AsyncIterator[FakeRunPod]:
    async with FakeRunPod(provisioning_seconds=0.3, starting_seconds=0.3) as fake:
        yield fake


@pytest.fixture
def start_runpod_node(runpod_fake: FakeRunPod, start_node: StartNode, tmp_path: Path) -> StartRunPodNode:
    """Starts `runpod` nodes on the stand-in. Set up after it, `start_node` is torn down before it: the
    daemons drain their pods while the stand-in still answers."""

    async def start(**overrides: Any) -> NodeDaemon:
        return await start_node(
            "runpod", provider_config=runpod_config(runpod_fake, tmp_path / "runpod", **overrides)
        )

    return start


# -- 50 pods under random faults ---------------------------------------------------------------------


async def drive_fleet_through_faults(
    fake: FakeRunPod, daemon: NodeDaemon, fleet: Fleet, *, seed: int, kills: bool
) -> str:
    """Create the fleet, wait until all of it runs, delete it, wait until all of it is gone, under random
    faults (and three kill -9 of the daemon at seeded moments if `kills`); then check the stand-in's
    record. Returns a summary of what was injected."""
    plan = random.Random(seed)  # noqa: S311 - reproducible kill moments, not secrets
    kill_when_running = sorted(plan.sample(range(5, FLEET_SIZE - 4), 2)) if kills else []
    kill_when_gone = [plan.randrange(5, FLEET_SIZE - 9)] if kills else []
    context = f"seed {seed} ({SEED_VARIABLE}={seed} replays it); kills at {kill_when_running} Running, "
    context += f"{kill_when_gone} gone"
    await fake.control.lose_answer(method="POST", path="^/v2/pods$", times=SCRIPTED_LOST_CREATES)
    await fake.control.fail_randomly(
        FAULT_FRACTION, seed=seed, hang_seconds=HANG_SECONDS, retry_after_seconds=1.0
    )

    creating = asyncio.create_task(fleet.create())
    for threshold in kill_when_running:
        await wait_and_kill(daemon, fleet.count_running, threshold, "Running")
    await creating
    await wait_for_fleet(daemon, fleet, "every pod to run", context, fleet.not_running)

    deleting = asyncio.create_task(fleet.delete())
    for threshold in kill_when_gone:
        await wait_and_kill(daemon, fleet.count_gone, threshold, "gone")
    await deleting

    async def gone_everywhere(phases: dict[str, str]) -> list[str]:
        left = [f"{name}: {phase}" for name, phase in sorted(phases.items())]
        return left + [f"RunPod pod {pod['id']}: {pod['status']}" for pod in await fake.control.pods()]

    await wait_for_fleet(daemon, fleet, "every pod to be gone, here and at RunPod", context, gone_everywhere)
    stats = await fake.control.random_fault_stats()
    await fake.control.clear_faults()
    assert stats is not None

    made = creates_by_uid(fake)
    wrong = {uid: count for uid, count in made.items() if count != 1 or uid not in fleet.uids.values()}
    missing = sorted(set(fleet.uids.values()) - set(made))
    assert not wrong, f"RunPod pods made more than once, or for no pod of the fleet: {wrong}; {context}"
    assert not missing, f"pods that never had a RunPod pod: {missing}; {context}"
    assert not await fake.control.pods(), f"RunPod pods left at the end; {context}"

    served = faults_served(fake)
    injected = stats["injected"]
    assert all(injected[kind] >= MIN_FAULTS_PER_KIND for kind in RANDOM_KINDS), (
        f"too few faults to prove anything: {injected} in {stats['drawn']} requests; {context}"
    )
    assert 0.12 <= sum(injected.values()) / stats["drawn"] <= 0.28, f"{stats}; {context}"
    assert lost_creates(fake) >= SCRIPTED_LOST_CREATES, f"{served}; {context}"
    return (
        f"{context}: {stats['drawn']} requests drawn, faults injected {injected} "
        f"(served in all {dict(served)}), {lost_creates(fake)} creates lost their answer, "
        f"{len(fake.requests)} requests in all, daemon started {daemon.starts} times"
    )


async def wait_for_fleet(
    daemon: NodeDaemon,
    fleet: Fleet,
    what: str,
    context: str,
    lagging: Callable[[dict[str, str]], Awaitable[list[str]]],
) -> None:
    """Wait until `lagging` (given the pods' phases) finds nothing; fail with what lags and the log."""
    last: list[str] = []

    async def converged() -> bool:
        if not daemon.alive():
            raise AssertionError(f"the daemon died; {context}:\n{daemon.log_tail()}")
        last[:] = await lagging(await fleet.phases())
        return not last

    try:
        await wait_for(converged, timeout_seconds=120, what=what)
    except AssertionError as error:
        raise AssertionError(f"{error}; {context}; lagging: {last[:10]}\n{daemon.log_tail()}") from None


async def test_fifty_pods_run_and_go_while_a_fifth_of_runpod_calls_fail_without_duplicates_or_leftovers(
    start_runpod_node: StartRunPodNode,
    runpod_fake: FakeRunPod,
    kube_api: client.ApiClient,
    namespace: str,
    fault_seed: int,
) -> None:
    daemon = await start_runpod_node()
    fleet = Fleet(client.CoreV1Api(kube_api), namespace, daemon.node_name, FLEET_SIZE)
    summary = await drive_fleet_through_faults(runpod_fake, daemon, fleet, seed=fault_seed, kills=False)
    print(summary)


async def test_fifty_pods_converge_under_random_faults_and_three_kill_9_of_the_daemon(
    start_runpod_node: StartRunPodNode,
    runpod_fake: FakeRunPod,
    kube_api: client.ApiClient,
    namespace: str,
    fault_seed: int,
) -> None:
    daemon = await start_runpod_node()
    fleet = Fleet(client.CoreV1Api(kube_api), namespace, daemon.node_name, FLEET_SIZE)
    summary = await drive_fleet_through_faults(runpod_fake, daemon, fleet, seed=fault_seed, kills=True)
    assert daemon.starts == 4
    print(summary)


async def test_a_restart_while_runpod_cannot_list_its_pods_waits_to_adopt_them_instead_of_exiting(
    start_runpod_node: StartRunPodNode,
    runpod_fake: FakeRunPod,
    kube_api: client.ApiClient,
    namespace: str,
) -> None:
    daemon = await start_runpod_node()
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_pod(namespace, gpu_pod("kept", daemon.node_name))

    async def running() -> bool:
        return (await core.read_namespaced_pod("kept", namespace)).status.phase == "Running"

    await wait_for(running, timeout_seconds=60, what="the pod to run")
    assert daemon.stop() == 0
    # Every attempt of the start-up listing fails: once, the daemon exited here.
    await runpod_fake.control.fail(status=503, method="GET", path="^/v2/pods$", times=4)
    daemon.start()

    async def adopted() -> bool:
        if not daemon.alive():
            raise AssertionError(f"the daemon exited:\n{daemon.log_tail()}")
        return "1 adopted from the provider" in daemon.log_path.read_text().split("--- start 2 ---")[1]

    await wait_for(adopted, timeout_seconds=30, what="the restarted daemon to adopt the pod")
    assert "listing the provider's pods to adopt failed" in daemon.log_path.read_text()
    assert (await core.read_namespaced_pod("kept", namespace)).status.phase == "Running"
    assert creates_by_uid(runpod_fake) == {created.metadata.uid: 1}


# -- a RunPod pod in ERROR ---------------------------------------------------------------------------


async def test_a_runpod_pod_in_error_fails_its_pod_with_runpods_message_whatever_its_restart_policy(
    start_runpod_node: StartRunPodNode,
    runpod_fake: FakeRunPod,
    kube_api: client.ApiClient,
    namespace: str,
) -> None:
    """ERROR maps to Failed (`vk_providers.runpod.translate`), restartPolicy Always included: RunPod does
    not restart a pod in ERROR, and the node never runs a Failed pod again."""
    daemon = await start_runpod_node()
    core = client.CoreV1Api(kube_api)
    policies = {"never": "Never", "always": "Always"}
    uids = {}
    for name, policy in policies.items():
        created = await core.create_namespaced_pod(
            namespace, gpu_pod(name, daemon.node_name, restart_policy=policy)
        )
        uids[name] = created.metadata.uid

    async def phases() -> dict[str, str]:
        return {
            pod.metadata.name: pod.status.phase for pod in (await core.list_namespaced_pod(namespace)).items
        }

    async def all_running() -> bool:
        return set((await phases()).values()) == {"Running"}

    await wait_for(all_running, timeout_seconds=60, what="both pods to run")
    runpod_ids = {pod["env"]["VK_PROVIDER_POD_NAME"]: pod["id"] for pod in await runpod_fake.control.pods()}
    for name in policies:
        await runpod_fake.control.set_status(runpod_ids[name], "ERROR", f"CUDA error: out of memory ({name})")

    async def all_failed() -> bool:
        return set((await phases()).values()) == {"Failed"}

    await wait_for(all_failed, timeout_seconds=60, what="both pods to fail")
    for name in policies:
        pod = await core.read_namespaced_pod(name, namespace)
        assert pod.status.reason == "RunPodError"
        assert f"CUDA error: out of memory ({name})" in pod.status.message
        [container] = pod.status.container_statuses
        assert container.state.terminated.reason == "Error"
        assert container.state.terminated.exit_code == 1  # RunPod reports none: UNREPORTED_EXIT_CODE
        assert f"CUDA error: out of memory ({name})" in container.state.terminated.message
        assert not container.ready
        print(f"{name}: {pod.status.phase}, {pod.status.reason}: {pod.status.message}")
    # Nothing was started again, at RunPod or by the node; the RunPod pods stay in ERROR until deleted.
    assert creates_by_uid(runpod_fake) == {uid: 1 for uid in uids.values()}
    assert {pod["status"] for pod in await runpod_fake.control.pods()} == {"ERROR"}

    for name in policies:
        await core.delete_namespaced_pod(name, namespace)

    async def all_gone() -> bool:
        return not await phases() and not await runpod_fake.control.pods()

    await wait_for(all_gone, timeout_seconds=60, what="both pods to be gone, here and at RunPod")


# -- a chain of two RunPod accounts --------------------------------------------------------------------

BARGAIN_PRICE = 0.44
BACKUP_PRICE = 0.79
NO_CAPACITY = "There are no instances currently available for 1 x NVIDIA GeForce RTX 4090 (SECURE)"


def chosen_of(pod: client.V1Pod) -> dict[str, Any]:
    """The placement the node recorded in the pod's status (its Chosen condition's JSON), or {}."""
    for condition in pod.status.conditions or ():
        if condition.type == CHOSEN_CONDITION and condition.message:
            recorded: dict[str, Any] = json.loads(condition.message)
            return recorded
    return {}


def rtx_4090_at(price: float) -> FakeGpuType:
    """One GPU type, in the secure cloud only: one offer per account, so the order of trial is plain."""
    return FakeGpuType(GPU, "RTX 4090", 24, price, 0.0, 8, 0, pool="ADA_24")


@pytest.fixture
async def chain_fakes() -> AsyncIterator[tuple[FakeRunPod, FakeRunPod]]:
    """Two RunPod accounts: `bargain`, the cheaper, and `backup`."""
    async with (
        FakeRunPod(
            provisioning_seconds=0.3, starting_seconds=0.3, gpu_types=(rtx_4090_at(BARGAIN_PRICE),)
        ) as bargain,
        FakeRunPod(
            provisioning_seconds=0.3, starting_seconds=0.3, gpu_types=(rtx_4090_at(BACKUP_PRICE),)
        ) as backup,
    ):
        yield bargain, backup


@pytest.fixture
def start_chain_node(
    chain_fakes: tuple[FakeRunPod, FakeRunPod], start_node: StartNode, tmp_path: Path
) -> Callable[[], Awaitable[NodeDaemon]]:
    """Starts a `chain` node, bargain then backup; torn down before the stand-ins (as start_runpod_node)."""

    async def start() -> NodeDaemon:
        members = [
            {"name": name, "provider": "runpod", "config": runpod_config(fake, tmp_path / name)}
            for name, fake in zip(("bargain", "backup"), chain_fakes, strict=True)
        ]
        return await start_node("chain", provider_config={"members": members})

    return start


@pytest.mark.parametrize("refusal", ["create-refused-for-capacity", "sold-out-in-the-catalog"])
async def test_a_capacity_refusal_at_the_cheaper_runpod_moves_the_pod_to_the_next_in_the_chain(
    refusal: str,
    start_chain_node: Callable[[], Awaitable[NodeDaemon]],
    chain_fakes: tuple[FakeRunPod, FakeRunPod],
    kube_api: client.ApiClient,
    namespace: str,
) -> None:
    """Refused for capacity: bargain's catalog shows stock, its create answers RunPod's 400 (stock gone
    since the catalog was read). Sold out: its catalog shows none, so it is not even tried. Set before
    the node starts, as the provider caches the catalog."""
    bargain, backup = chain_fakes
    if refusal == "create-refused-for-capacity":
        await bargain.control.fail(
            status=400, method="POST", path="^/v2/pods$", times=None, detail=NO_CAPACITY
        )
    else:
        await bargain.control.set_stock(GPU, "SECURE", "NONE")
    daemon = await start_chain_node()
    core = client.CoreV1Api(kube_api)
    annotations = {GPU_TYPES_ANNOTATION: "RTX-4090"}
    created = await core.create_namespaced_pod(
        namespace, gpu_pod("llm", daemon.node_name, annotations=annotations)
    )

    async def placed_and_running() -> bool:
        pod = await core.read_namespaced_pod("llm", namespace)
        return bool(pod.status.phase == "Running" and chosen_of(pod))

    await wait_for(placed_and_running, timeout_seconds=60, what="the pod to run, placed")
    pod = await core.read_namespaced_pod("llm", namespace)
    chosen = chosen_of(pod)
    assert chosen["provider"] == "backup"
    assert chosen["pricePerHour"] == BACKUP_PRICE
    assert chosen["gpuType"] == GPU
    assert creates_by_uid(backup) == {created.metadata.uid: 1}
    assert not await bargain.control.pods()
    refused_creates = [r for r in bargain.requests if r.method == "POST" and r.path == "/v2/pods"]
    if refusal == "create-refused-for-capacity":
        assert refused_creates, "bargain was never asked: nothing fell through"
        assert all(record.status == 400 for record in refused_creates)
    else:
        assert not refused_creates

    async def placed_event() -> list[str]:
        events = await events_of(core, namespace, "llm")
        return [event.message for event in events if event.reason == PLACED_EVENT_REASON]

    # Once, though the pod is reconciled again before the watch shows the placement recorded.
    [message] = await wait_for(placed_event, timeout_seconds=30, what="the Placed event")
    assert message.startswith("placed on backup: 1 x NVIDIA GeForce RTX 4090 (SECURE)")
    assert f"${BACKUP_PRICE:.2f}/h" in message
    print(f"{refusal}: {chosen}; event: {message}")

    # The node advertises the GPU type its members have: the largest pod of it that either can take.
    node = await core.read_node(daemon.node_name)
    assert node.status.capacity[gpu_type_resource(GPU)] == "8", node.status.capacity


async def test_a_node_with_runpod_alone_honours_the_placement_annotations(
    start_runpod_node: StartRunPodNode, runpod_fake: FakeRunPod, kube_api: client.ApiClient, namespace: str
) -> None:
    """The node's default GPU type is the RTX 4090; the pod asks for an 80 GB A100 under a price cap,
    and gets the cheapest A100 offer (the community cloud's), as a chain of several providers would."""
    daemon = await start_runpod_node()
    core = client.CoreV1Api(kube_api)
    annotations = {GPU_TYPES_ANNOTATION: "A100-80GB", MAX_PRICE_ANNOTATION: "1.50"}
    await core.create_namespaced_pod(namespace, gpu_pod("a100", daemon.node_name, annotations=annotations))

    async def placed_and_running() -> bool:
        pod = await core.read_namespaced_pod("a100", namespace)
        return bool(pod.status.phase == "Running" and chosen_of(pod))

    await wait_for(placed_and_running, timeout_seconds=60, what="the pod to run, placed")
    pod = await core.read_namespaced_pod("a100", namespace)
    chosen = chosen_of(pod)
    assert (chosen["provider"], chosen["gpuType"], chosen["tier"]) == (
        "runpod",
        "NVIDIA A100 80GB PCIe",
        "COMMUNITY",
    )
    assert chosen["pricePerHour"] == 1.19
    [made] = await runpod_fake.control.pods()
    assert (made["gpu"]["id"], made["cloud"]) == ("NVIDIA A100 80GB PCIe", "COMMUNITY"), made
