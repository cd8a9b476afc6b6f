"""RunPod's pod statuses mapped onto pod states, with reasons and messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.provider import ContainerStateKind, PodRef, PodState
from vk_provider.testing.contract import eventually
from vk_providers.runpod import RunPodProvider
from vk_providers.runpod.api import RunPodPod
from vk_providers.runpod.translate import UNREPORTED_EXIT_CODE, pod_state

from .support import GPU, IMAGE, make_provider, pod_request, requests_to, runpod_pod_of


@pytest.fixture
async def held(held_fake: FakeRunPod, tmp_path: Path) -> AsyncIterator[RunPodProvider]:
    subject = make_provider(held_fake, tmp_path)
    yield subject
    await subject.aclose()


async def state_after(
    fake: FakeRunPod, provider: RunPodProvider, status: str, message: str | None = None
) -> PodState:
    request = pod_request("mapped")
    await provider.create_pod(request)
    pod = await runpod_pod_of(fake, request.ref.uid)
    if status != "PROVISIONING":
        await fake.control.set_status(pod["id"], status, message)
    state = await provider.get_pod_state(request.ref)
    assert state is not None
    assert state.ref == request.ref
    assert state.traffic_address == fake.proxy_url_template.format(pod_id=pod["id"], port=8000)
    [container] = state.containers
    assert (container.name, container.image, container.container_id) == (
        "server",
        IMAGE,
        f"runpod://{pod['id']}",
    )
    return state


async def test_provisioning_is_pending_waiting_for_a_machine(
    held_fake: FakeRunPod, held: RunPodProvider
) -> None:
    state = await state_after(held_fake, held, "PROVISIONING")
    assert (state.phase, state.reason) == ("Pending", None)
    [container] = state.containers
    assert (container.state, container.reason) == (ContainerStateKind.WAITING, "Provisioning")
    assert container.message == f"RunPod is finding a machine with 1 x {GPU}"
    assert state.started_at is not None


async def test_starting_is_pending_creating_the_container(
    held_fake: FakeRunPod, held: RunPodProvider
) -> None:
    state = await state_after(held_fake, held, "STARTING")
    assert state.phase == "Pending"
    [container] = state.containers
    assert (container.state, container.reason) == (ContainerStateKind.WAITING, "ContainerCreating")
    assert container.message == f"RunPod is starting the container from {IMAGE}"


async def test_running_is_running_and_ready_since_runpod_started_it(
    held_fake: FakeRunPod, held: RunPodProvider
) -> None:
    before = datetime.now(UTC)
    state = await state_after(held_fake, held, "RUNNING")
    assert state.phase == "Running"
    [container] = state.containers
    assert container.state is ContainerStateKind.RUNNING
    assert container.ready
    assert container.started
    assert container.started_at is not None
    assert container.started_at >= before.replace(microsecond=0)


async def test_exited_is_failed_and_says_no_exit_code_is_known(
    held_fake: FakeRunPod, held: RunPodProvider
) -> None:
    state = await state_after(held_fake, held, "EXITED")
    assert (state.phase, state.reason) == ("Failed", "Exited")
    assert state.message == "the container exited (RunPod reports no exit code)"
    [container] = state.containers
    assert container.state is ContainerStateKind.TERMINATED
    assert container.termination is not None
    assert (container.termination.exit_code, container.termination.reason) == (UNREPORTED_EXIT_CODE, "Exited")


async def test_error_is_failed_with_runpods_message_from_the_system_log(
    held_fake: FakeRunPod, held: RunPodProvider
) -> None:
    state = await state_after(held_fake, held, "ERROR", "start container failed: manifest unknown")
    assert (state.phase, state.reason) == ("Failed", "RunPodError")
    assert state.message is not None
    assert state.message.startswith("RunPod reports the pod in ERROR; its system log ends: ")
    assert state.message.endswith("start container failed: manifest unknown")
    [container] = state.containers
    assert container.termination is not None
    assert (container.reason, container.termination.reason) == ("Error", "Error")
    assert container.termination.message == state.message


async def test_error_message_is_read_once_per_pod(held_fake: FakeRunPod, held: RunPodProvider) -> None:
    request = pod_request("broken")
    await held.create_pod(request)
    pod = await runpod_pod_of(held_fake, request.ref.uid)
    await held_fake.control.set_status(pod["id"], "ERROR", "out of memory")
    first = await held.get_pod_state(request.ref)
    second = await held.get_pod_state(request.ref)
    assert first is not None
    assert first == second
    assert len(await requests_to(held_fake, "GET", f"/v2/pods/{pod['id']}/logs")) == 1
    [listed] = await held.list_pods()
    assert listed.message == first.message


async def test_terminated_reads_as_gone(held_fake: FakeRunPod, held: RunPodProvider) -> None:
    request = pod_request("terminated")
    await held.create_pod(request)
    await held_fake.control.set_status((await runpod_pod_of(held_fake, request.ref.uid))["id"], "TERMINATED")
    assert await held.get_pod_state(request.ref) is None


async def test_the_state_machine_moves_from_pending_to_running(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request = pod_request("moving")
    await provider.create_pod(request)
    first = await provider.get_pod_state(request.ref)
    assert first is not None
    assert first.phase == "Pending"
    reasons: list[str | None] = []

    async def observe() -> PodState | None:
        state = await provider.get_pod_state(request.ref)
        if state is not None and state.containers:
            reasons.append(state.containers[0].reason)
        return state

    await eventually(observe, lambda state: state is not None and state.phase == "Running", what="RUNNING")
    seen = [reason for index, reason in enumerate(reasons) if index == 0 or reasons[index - 1] != reason]
    assert seen[-1] is None
    assert set(seen[:-1]) <= {"Provisioning", "ContainerCreating"}


def test_an_unknown_status_is_unknown_not_a_guess() -> None:
    pod = RunPodPod(
        id="abc",
        name="vk-1",
        status="MIGRATING",
        image=IMAGE,
        env={"VK_PROVIDER_CONTAINER_NAME": "server"},
        ports=("8000/http",),
        gpu_type=GPU,
        gpu_count=1,
        cloud="SECURE",
        data_center_id=None,
        cost_per_hour=None,
        created_at=None,
        started_at=None,
    )
    state = pod_state(
        PodRef("default", "x", "1"), pod, proxy_url_template="https://{pod_id}-{port}.p", error_message=None
    )
    assert state.phase == "Unknown"
    assert state.message == "RunPod reports the unknown status 'MIGRATING'"
    assert state.traffic_address == "https://abc-8000.p"
