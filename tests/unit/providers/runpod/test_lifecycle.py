"""The runpod provider's pod lifecycle against the fake: what it sends, idempotence, deletion, listing."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import aiohttp
import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.errors import InvalidPodError, TemporaryProviderError
from vk_provider.provider import (
    ContainerPort,
    ContainerSpec,
    PodLifecycle,
    SupportsGpuCatalog,
    SupportsLogs,
    SupportsNodeCapacity,
    SupportsPodAddress,
    SupportsStatusPush,
    SupportsUsage,
)
from vk_provider.testing.contract import wait_running
from vk_providers.runpod import RunPodProvider

from .support import (
    GPU,
    IMAGE,
    NODE,
    ManualClock,
    make_provider,
    pod_request,
    requests_to,
    runpod_pod_of,
    runpod_pods_of,
)


def test_capabilities_are_declared_honestly(provider: RunPodProvider) -> None:
    assert isinstance(provider, PodLifecycle)
    assert isinstance(provider, SupportsLogs)
    assert isinstance(provider, SupportsNodeCapacity)
    assert isinstance(provider, SupportsGpuCatalog)
    assert not isinstance(provider, SupportsStatusPush)
    assert not isinstance(provider, SupportsPodAddress)
    assert not isinstance(provider, SupportsUsage)


async def test_create_sends_image_env_ports_gpus_and_identity(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request = pod_request(
        "llm",
        ports=(ContainerPort(9090, name="metrics"), ContainerPort(8000, name="http")),
        env=(("MODEL", "llama"), ("MODEL", "mistral"), ("VK_PROVIDER_POD_UID", "forged")),
        args=("--port", "8000", "--name", "two words"),
        gpus="2",
    )
    await provider.create_pod(request)
    [create] = await requests_to(fake, "POST")
    body = create["body"]
    assert body == {
        "name": f"vk-{request.ref.uid}",
        "image": IMAGE,
        "gpu": {"id": GPU, "count": 2},
        "cloud": "SECURE",
        "env": {
            "MODEL": "mistral",  # the later duplicate wins, as in Kubernetes
            "VK_PROVIDER_POD_UID": request.ref.uid,  # ours win over the pod's own
            "VK_PROVIDER_POD_NAMESPACE": "default",
            "VK_PROVIDER_POD_NAME": "llm",
            "VK_PROVIDER_NODE_NAME": NODE,
            "VK_PROVIDER_CONTAINER_NAME": "server",
        },
        "ports": ["8000/http", "9090/http"],  # the traffic port (named http) first
        "args": "--port 8000 --name 'two words'",
    }
    assert create["status"] == 201


async def test_placement_settings_and_annotations(fake: FakeRunPod, tmp_path: Path) -> None:
    provider = make_provider(fake, tmp_path, cloud="COMMUNITY", data_center_ids=["EU-RO-1"], disk_gb=40)
    try:
        await provider.create_pod(pod_request("defaults"))
        await provider.create_pod(
            pod_request(
                "annotated",
                annotations={
                    "runpod.vk-provider.dev/gpu-type": "NVIDIA A100 80GB PCIe",
                    "runpod.vk-provider.dev/cloud": "secure",
                    "runpod.vk-provider.dev/data-centers": "US-KS-2, EU-RO-1",
                },
            )
        )
    finally:
        await provider.aclose()
    defaults, annotated = (request["body"] for request in await requests_to(fake, "POST"))
    assert (defaults["gpu"], defaults["cloud"], defaults["dataCenterIds"], defaults["disk"]) == (
        {"id": GPU, "count": 1},
        "COMMUNITY",
        ["EU-RO-1"],
        40,
    )
    assert (annotated["gpu"]["id"], annotated["cloud"], annotated["dataCenterIds"]) == (
        "NVIDIA A100 80GB PCIe",
        "SECURE",
        ["US-KS-2", "EU-RO-1"],
    )


async def test_traffic_reaches_the_pod_through_its_proxy_address(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request = pod_request("served")
    await provider.create_pod(request)
    state = await wait_running(provider, request.ref)
    pod = await runpod_pod_of(fake, request.ref.uid)
    assert state.traffic_address == fake.proxy_url_template.format(pod_id=pod["id"], port=8000)
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{state.traffic_address}/v1/completions?stream=false", data=b"hello") as response,
    ):
        assert response.status == 200
        assert response.headers["X-Served-By"] == pod["id"]
        echoed = await response.json()
    assert echoed["path"] == "/v1/completions?stream=false"
    assert echoed["body"] == "hello"
    assert echoed["env"]["VK_PROVIDER_POD_UID"] == request.ref.uid


def test_default_traffic_address_is_runpods_https_proxy(fake: FakeRunPod, tmp_path: Path) -> None:
    provider = make_provider(fake, tmp_path, proxy_url_template="https://{pod_id}-{port}.proxy.runpod.net")
    assert provider.settings.proxy_url_template.format(pod_id="abc123", port=8000) == (
        "https://abc123-8000.proxy.runpod.net"
    )


async def test_create_is_idempotent_across_calls_and_restarts(
    fake: FakeRunPod, provider: RunPodProvider, tmp_path: Path
) -> None:
    request = pod_request("once")
    await provider.create_pod(request)
    await provider.create_pod(request)
    restarted = make_provider(fake, tmp_path)
    try:
        await restarted.create_pod(request)
    finally:
        await restarted.aclose()
    assert len(await requests_to(fake, "POST")) == 1
    assert len(await runpod_pods_of(fake, request.ref.uid)) == 1


async def test_concurrent_creates_of_one_pod_make_one_runpod_pod(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request = pod_request("racing")
    await asyncio.gather(*(provider.create_pod(request) for _ in range(3)))
    assert len(await runpod_pods_of(fake, request.ref.uid)) == 1


async def test_a_create_whose_answer_was_lost_is_not_repeated(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    await fake.control.lose_answer(method="POST", path="^/v2/pods$")
    request = pod_request("lost-answer")
    await provider.create_pod(request)
    # The first POST created the pod but its answer never came; the retry looked before posting again.
    assert len(await requests_to(fake, "POST")) == 1
    pod = await runpod_pod_of(fake, request.ref.uid)
    await wait_running(provider, request.ref)
    assert (await provider.get_pod_state(request.ref)) is not None
    assert pod["name"] == f"vk-{request.ref.uid}"


async def create_again_behind_the_providers_back(fake: FakeRunPod) -> None:
    """A second RunPod pod from the provider's first create body: what a late-executed create makes."""
    body = (await requests_to(fake, "POST"))[0]["body"]
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{fake.api_url}/pods", json=body, headers={"Authorization": f"Bearer {fake.api_key}"}
        ) as response,
    ):
        assert response.status == 201


async def test_duplicate_runpod_pods_of_one_uid_are_reduced_to_one(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request = pod_request("doubled")
    await provider.create_pod(request)
    await wait_running(provider, request.ref)
    original = await runpod_pod_of(fake, request.ref.uid)
    await create_again_behind_the_providers_back(fake)
    assert len(await runpod_pods_of(fake, request.ref.uid)) == 2
    await provider.create_pod(request)  # keeps the one furthest along, terminates the other
    assert [pod["id"] for pod in await runpod_pods_of(fake, request.ref.uid)] == [original["id"]]


async def test_listing_terminates_a_duplicate_made_by_a_create_that_went_through_late(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request = pod_request("late")
    await provider.create_pod(request)
    await wait_running(provider, request.ref)
    original = await runpod_pod_of(fake, request.ref.uid)
    await create_again_behind_the_providers_back(fake)
    assert len(await runpod_pods_of(fake, request.ref.uid)) == 2
    states = await provider.list_pods()  # what the node's orphan sweep calls
    assert [state.ref for state in states] == [request.ref]
    assert [pod["id"] for pod in await runpod_pods_of(fake, request.ref.uid)] == [original["id"]]


async def test_delete_terminates_and_tolerates_what_is_already_gone(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request = pod_request("doomed")
    await provider.create_pod(request)
    await provider.delete_pod(request.ref, grace_period_seconds=30)
    assert await runpod_pods_of(fake, request.ref.uid) == []
    assert await provider.get_pod_state(request.ref) is None
    await provider.delete_pod(request.ref, grace_period_seconds=30)
    assert len(await requests_to(fake, "DELETE")) == 1


async def test_delete_of_a_pod_runpod_lost_meanwhile_succeeds(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request = pod_request("lost")
    await provider.create_pod(request)
    pod = await runpod_pod_of(fake, request.ref.uid)
    await fake.control.vanish(pod["id"])
    await provider.delete_pod(request.ref, grace_period_seconds=0)
    deletes = await requests_to(fake, "DELETE")
    assert [(request["path"], request["status"]) for request in deletes] == [(f"/v2/pods/{pod['id']}", 404)]


async def test_delete_of_a_pod_never_created_sends_no_delete(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    await provider.delete_pod(pod_request("ghost").ref, grace_period_seconds=0)
    assert await requests_to(fake, "DELETE") == []


async def test_list_ignores_other_nodes_foreign_pods_and_terminated_ones(
    fake: FakeRunPod, provider: RunPodProvider, tmp_path: Path
) -> None:
    ours = pod_request("ours")
    await provider.create_pod(ours)
    other = make_provider(fake, tmp_path, node_name="other-node")
    try:
        await other.create_pod(pod_request("theirs", node_name="other-node"))
    finally:
        await other.aclose()
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{fake.api_url}/pods",
            json={"name": "someone-elses", "image": "x", "gpu": {"id": GPU}},
            headers={"Authorization": f"Bearer {fake.api_key}"},
        ) as response,
    ):
        assert response.status == 201
    terminated = pod_request("terminated")
    await provider.create_pod(terminated)
    await fake.control.set_status((await runpod_pod_of(fake, terminated.ref.uid))["id"], "TERMINATED")
    assert [state.ref for state in await provider.list_pods()] == [ours.ref]
    assert await provider.get_pod_state(terminated.ref) is None


async def test_image_change_patches_the_runpod_pod(fake: FakeRunPod, provider: RunPodProvider) -> None:
    request = pod_request("upgraded")
    await provider.create_pod(request)
    await provider.update_pod(request)  # nothing changed: nothing sent
    assert await requests_to(fake, "PATCH") == []
    await provider.update_pod(
        pod_request("upgraded", uid=request.ref.uid, image="registry.example/llm-server:2")
    )
    [patch] = await requests_to(fake, "PATCH")
    assert patch["body"] == {"image": "registry.example/llm-server:2"}
    assert (await runpod_pod_of(fake, request.ref.uid))["image"] == "registry.example/llm-server:2"


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (
            pod_request(
                "two",
                containers=(ContainerSpec(name="a", image="x"), ContainerSpec(name="b", image="y")),
            ),
            "one container per pod, and this pod has 2",
        ),
        (
            pod_request(
                "cmd", containers=(ContainerSpec(name="a", image="x", command=("python", "-m", "srv")),)
            ),
            "RunPod always runs the image's entrypoint",
        ),
        (pod_request("udp", ports=(ContainerPort(53, protocol="UDP"),)), "TCP only"),
        (
            pod_request("many", ports=tuple(ContainerPort(8000 + n) for n in range(11))),
            "at most 10 HTTP ports",
        ),
        (
            dataclasses.replace(
                pod_request("files"),
                raw={"spec": {"volumes": [{"name": "hf-token", "secret": {"secretName": "hf"}}]}},
            ),
            r"RunPod cannot mount volumes .* hf-token \(secret\)",
        ),
        (pod_request("zero", gpus="0"), "whole number of GPUs >= 1"),
        (pod_request("half", gpus="500m"), "whole number of GPUs >= 1"),
        (pod_request("cloud", annotations={"runpod.vk-provider.dev/cloud": "moon"}), "must be one of SECURE"),
        (
            pod_request("price", annotations={"runpod.vk-provider.dev/max-price-per-hour": "cheap"}),
            "must be a positive number",
        ),
    ],
)
async def test_pods_runpod_cannot_run_are_refused_before_any_call(
    fake: FakeRunPod, provider: RunPodProvider, request_: object, words: str
) -> None:
    with pytest.raises(InvalidPodError, match=words):
        await provider.create_pod(request_)  # type: ignore[arg-type]
    assert await fake.control.requests() == []


async def test_a_pod_without_gpu_type_is_refused(fake: FakeRunPod, tmp_path: Path) -> None:
    provider = make_provider(fake, tmp_path, gpu_type=None)
    try:
        with pytest.raises(InvalidPodError, match=r"runpod\.vk-provider\.dev/gpu-type"):
            await provider.create_pod(pod_request("no-gpu-type"))
    finally:
        await provider.aclose()


async def test_price_cap_is_checked_against_the_catalog(fake: FakeRunPod, tmp_path: Path) -> None:
    provider = make_provider(fake, tmp_path, max_price_per_hour=1.0)  # the fake's 4090: 0.69/h per GPU
    try:
        await provider.create_pod(pod_request("one-gpu"))
        with pytest.raises(InvalidPodError, match=r"costs \$1.38/h, above the cap of \$1.00/h"):
            await provider.create_pod(pod_request("two-gpus", gpus="2"))
        with pytest.raises(InvalidPodError, match="does not offer"):
            await provider.create_pod(
                pod_request(
                    "h100-community",
                    annotations={
                        "runpod.vk-provider.dev/gpu-type": "NVIDIA H100 80GB HBM3",
                        "runpod.vk-provider.dev/cloud": "COMMUNITY",
                    },
                )
            )
        await provider.create_pod(
            pod_request("richer", gpus="2", annotations={"runpod.vk-provider.dev/max-price-per-hour": "1.5"})
        )
    finally:
        await provider.aclose()
    assert len(await requests_to(fake, "POST")) == 2
    assert len(await requests_to(fake, "GET", "/v2/catalog/gpus")) == 3  # cached per count and cloud


async def test_no_capacity_is_temporary_with_runpods_words(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    await fake.control.set_stock(GPU, "SECURE", "NONE")
    with pytest.raises(
        TemporaryProviderError, match=r"could not place the pod.*no instances currently available"
    ):
        await provider.create_pod(pod_request("starved"))
    assert len(await requests_to(fake, "POST")) == 1  # a 400 is not retried at once; the node retries later
    await fake.control.set_stock(GPU, "SECURE", "LOW")
    await provider.create_pod(pod_request("fed"))


async def test_node_capacity_is_the_configured_one_plus_gpus_per_type_in_stock(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    clock = ManualClock()
    provider = make_provider(fake, tmp_path, clock=clock, capacity={"nvidia.com/gpu": 8})
    try:
        assert await provider.node_capacity() == {
            "nvidia.com/gpu": "8",
            "gpu.vk-provider.dev/nvidia-geforce-rtx-4090": "8",
            "gpu.vk-provider.dev/nvidia-a100-80gb-pcie": "8",
            "gpu.vk-provider.dev/nvidia-h100-80gb-hbm3": "8",
        }
        # Out of stock in the only cloud that has H100s: still listed, with nothing to give.
        await fake.control.set_stock("NVIDIA H100 80GB HBM3", "SECURE", "NONE")
        clock.advance(61)  # past the catalog's cache
        capacity = await provider.node_capacity()
        assert capacity["gpu.vk-provider.dev/nvidia-h100-80gb-hbm3"] == "0"
        # The catalog unreadable: the last types read stay advertised.
        await fake.control.fail(status=503, method="GET", path="/v2/catalog/gpus", times=None)
        clock.advance(61)
        assert await provider.node_capacity() == capacity
    finally:
        await provider.aclose()


async def test_health_is_fine_when_runpod_answers(provider: RunPodProvider, clock: ManualClock) -> None:
    await provider.check_health()
    assert provider.breaker_status().available
