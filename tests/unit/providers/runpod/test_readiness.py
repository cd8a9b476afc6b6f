"""A RUNNING RunPod pod is ready only when its HTTP readiness probe answers through the proxy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from vk_devtools.standins.runpod.proxy import ServedPod
from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.errors import InvalidPodError
from vk_provider.provider import ContainerPort, ContainerSpec, HttpGetAction, Probe
from vk_provider.testing.contract import wait_running
from vk_providers.runpod import RunPodProvider

from .support import IMAGE, ManualClock, make_provider, pod_request, runpod_pod_of


class ModelServer:
    """Each pod's app: `/ready` answers 503 until the model is "loaded"; records what reached it."""

    def __init__(self) -> None:
        self.loaded = False
        self.authorization_seen: list[str | None] = []

    def app(self, pod: ServedPod) -> web.Application:
        async def ready(request: web.Request) -> web.Response:
            self.authorization_seen.append(request.headers.get("Authorization"))
            return web.Response(status=200 if self.loaded else 503, text=pod.id)

        app = web.Application()
        app.router.add_get("/ready", ready)
        return app


def probed_container(port: int = 8000, path: str = "/ready") -> ContainerSpec:
    return ContainerSpec(
        name="server",
        image=IMAGE,
        ports=(ContainerPort(8000, name="http"),),
        readiness_probe=Probe(action=HttpGetAction(port=port, path=path)),
    )


@pytest.fixture
def model() -> ModelServer:
    return ModelServer()


@pytest.fixture
async def model_fake(model: ModelServer) -> AsyncIterator[FakeRunPod]:
    async with FakeRunPod(provisioning_seconds=0.01, starting_seconds=0.01, pod_app=model.app) as server:
        yield server


@pytest.fixture
async def probing(
    model_fake: FakeRunPod, tmp_path: Path, clock: ManualClock
) -> AsyncIterator[RunPodProvider]:
    subject = make_provider(model_fake, tmp_path, clock=clock, readiness_interval_seconds=5)
    yield subject
    await subject.aclose()


async def test_running_is_not_ready_until_the_probe_answers_through_the_proxy(
    probing: RunPodProvider, model_fake: FakeRunPod, model: ModelServer, clock: ManualClock
) -> None:
    request = pod_request("llm", containers=(probed_container(),))
    await probing.create_pod(request)
    assert (await runpod_pod_of(model_fake, request.ref.uid))["env"]["VK_PROVIDER_READINESS"] == "8000/ready"
    state = await wait_running(probing, request.ref)
    assert not state.containers[0].ready  # RUNNING, but the model answers 503
    assert [not pod.containers[0].ready for pod in await probing.list_pods()] == [True]

    model.loaded = True
    state = await wait_running(probing, request.ref)
    assert not state.containers[0].ready, "checked again before the interval passed"
    clock.advance(5)
    state = await wait_running(probing, request.ref)
    assert state.containers[0].ready
    assert [pod.containers[0].ready for pod in await probing.list_pods()] == [True]

    model.loaded = False  # e.g. the server restarts: traffic must stop going there
    clock.advance(5)
    assert not (await wait_running(probing, request.ref)).containers[0].ready
    assert model.authorization_seen
    assert set(model.authorization_seen) == {None}  # the API key never reaches a pod


async def test_a_pod_without_an_http_probe_is_ready_when_running(probing: RunPodProvider) -> None:
    request = pod_request("plain")
    await probing.create_pod(request)
    assert (await wait_running(probing, request.ref)).containers[0].ready


async def test_a_probe_on_an_undeclared_port_is_refused(probing: RunPodProvider) -> None:
    with pytest.raises(InvalidPodError, match="readiness probe's port 9000 is not one of its ports"):
        await probing.create_pod(pod_request("odd", containers=(probed_container(port=9000),)))


async def test_an_unreachable_pod_is_not_ready(tmp_path: Path, clock: ManualClock) -> None:
    async with FakeRunPod(provisioning_seconds=0.01, starting_seconds=0.01) as fake:
        provider = make_provider(
            fake,
            tmp_path,
            clock=clock,
            proxy_url_template="http://127.0.0.1:9/{pod_id}-{port}",  # nothing listens on port 9
            readiness_timeout_seconds=1,
        )
        try:
            request = pod_request("dark", containers=(probed_container(),))
            await provider.create_pod(request)
            assert not (await wait_running(provider, request.ref)).containers[0].ready
        finally:
            await provider.aclose()
