"""A RunPod pod that takes more than ten minutes from create to serving (machine, image, model) is never
declared failed on the way: the provider reports each stage, and only RunPod's own word ends it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.node import podstatus
from vk_provider.provider import PodRequest, PodState
from vk_providers.runpod import RunPodProvider

from .support import ManualClock, make_provider, pod_request, requests_to, runpod_pod_of
from .test_readiness import ModelServer, probed_container

STEP_SECONDS = 30.0
"""The node's status poll, roughly: one look per step of the manual clock."""


@pytest.fixture
def model() -> ModelServer:
    return ModelServer()


@pytest.fixture
async def slow_fake(model: ModelServer) -> AsyncIterator[FakeRunPod]:
    """Pods stay in each status until the test moves them; `/ready` answers 503 until the model loads."""
    async with FakeRunPod(auto_advance=False, pod_app=model.app) as server:
        yield server


@pytest.fixture
async def slow(slow_fake: FakeRunPod, tmp_path: Path, clock: ManualClock) -> AsyncIterator[RunPodProvider]:
    subject = make_provider(slow_fake, tmp_path, clock=clock, readiness_interval_seconds=10)
    yield subject
    await subject.aclose()


def api_pod(request: PodRequest) -> dict[str, Any]:
    return {
        "metadata": {"name": request.ref.name, "namespace": request.ref.namespace, "uid": request.ref.uid},
        "spec": {"containers": [{"name": "server", "image": request.containers[0].image}]},
        "status": {},
    }


async def minutes_of(
    provider: RunPodProvider, request: PodRequest, clock: ManualClock, minutes: float
) -> list[PodState]:
    """The states the provider reports over `minutes` of the manual clock, one per step."""
    states = []
    for _ in range(int(minutes * 60 / STEP_SECONDS)):
        clock.advance(STEP_SECONDS)
        state = await provider.get_pod_state(request.ref)
        assert state is not None
        states.append(state)
    return states


async def test_eleven_minutes_per_stage_and_the_pod_is_still_only_on_its_way(
    slow: RunPodProvider, slow_fake: FakeRunPod, model: ModelServer, clock: ManualClock
) -> None:
    request = pod_request("slow", containers=(probed_container(),))
    await slow.create_pod(request)
    runpod_id = (await runpod_pod_of(slow_fake, request.ref.uid))["id"]

    seen: dict[str, set[tuple[str, str | None, bool]]] = {}
    for status in ("PROVISIONING", "STARTING", "RUNNING"):
        if status != "PROVISIONING":
            await slow_fake.control.set_status(runpod_id, status)
        states = await minutes_of(slow, request, clock, 11)
        seen[status] = {
            (state.phase, state.containers[0].reason, state.containers[0].ready) for state in states
        }
    assert seen == {
        "PROVISIONING": {("Pending", "Provisioning", False)},
        "STARTING": {("Pending", "ContainerCreating", False)},
        "RUNNING": {("Running", "LoadingModel", False)},
    }
    loading = await slow.get_pod_state(request.ref)
    assert loading is not None
    status = podstatus.pod_status(api_pod(request), loading, host_ip="10.0.0.1", now=datetime.now(UTC))
    ready = next(condition for condition in status["conditions"] if condition["type"] == "Ready")
    assert ready["status"] == "False"
    assert ready["message"] == (
        "containers with unready status: [server] "
        "(server: LoadingModel: its readiness probe does not answer yet (loading))"
    )

    model.loaded = True
    clock.advance(STEP_SECONDS)
    served = await slow.get_pod_state(request.ref)
    assert served is not None
    assert (served.phase, served.containers[0].ready, served.containers[0].reason) == ("Running", True, None)
    # 33 minutes, one create, nothing deleted or made again.
    assert len(await requests_to(slow_fake, "POST")) == 1
    assert await requests_to(slow_fake, "DELETE") == []
