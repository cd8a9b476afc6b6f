"""Placement by price across two RunPod accounts (stand-ins): cheapest first, refusals fall through."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.errors import InvalidPodError, NotFoundError, TemporaryProviderError
from vk_provider.kit.placement import (
    CHOSEN_ANNOTATION,
    GPU_COUNT_ANNOTATION,
    GPU_TYPES_ANNOTATION,
    MAX_PRICE_ANNOTATION,
    PROVIDERS_ANNOTATION,
    REGIONS_ANNOTATION,
    chosen_annotation,
)
from vk_provider.provider import Placement
from vk_provider.testing.contract import wait_running
from vk_providers.chain import ChainProvider

from ..runpod.support import requests_to, runpod_pod_of, runpod_pods_of
from .conftest import runpod_member
from .support import make_chain, pod_request

RTX_4090 = "NVIDIA GeForce RTX 4090"
A100 = "NVIDIA A100 80GB PCIe"
NO_CAPACITY = "There are no instances currently available"


@pytest.fixture
async def chain(cheap: FakeRunPod, pricey: FakeRunPod, tmp_path: Path) -> AsyncIterator[ChainProvider]:
    members = [runpod_member("cheap", cheap, tmp_path), runpod_member("pricey", pricey, tmp_path)]
    subject = make_chain(tmp_path / "node", members)
    yield subject
    await subject.aclose()


async def refuse_creates(fake: FakeRunPod, *, times: int | None) -> None:
    """RunPod's answer when the catalog showed stock but none was left: 400, no code to tell it apart."""
    await fake.control.fail(status=400, method="POST", path="^/v2/pods$", detail=NO_CAPACITY, times=times)


async def test_a_capacity_refusal_falls_through_to_the_next_provider_in_the_chain(
    chain: ChainProvider, cheap: FakeRunPod, pricey: FakeRunPod
) -> None:
    # Offers for one RTX 4090: cheap COMMUNITY $0.34, pricey COMMUNITY $0.44, pricey SECURE $0.59, ...
    await refuse_creates(cheap, times=1)
    request = pod_request("llm", annotations={GPU_TYPES_ANNOTATION: "RTX-4090"})
    await chain.create_pod(request)

    assert await runpod_pods_of(cheap, request.ref.uid) == []
    created = await runpod_pod_of(pricey, request.ref.uid)
    assert (created["gpu"], created["cloud"]) == ({"id": RTX_4090, "count": 1}, "COMMUNITY")
    state = await wait_running(chain, request.ref)
    assert state.placement == Placement("pricey", 0.44, RTX_4090, 1, "COMMUNITY")
    [refused] = await requests_to(cheap, "POST")
    assert (refused["status"], refused["body"]["cloud"]) == (400, "COMMUNITY")


async def test_the_cheapest_accepted_offer_is_used_in_its_own_tier(
    chain: ChainProvider, cheap: FakeRunPod, pricey: FakeRunPod
) -> None:
    # The members' default is one RTX 4090 in SECURE: the pod's placement is what changes it.
    request = pod_request(
        "a100",
        annotations={
            GPU_TYPES_ANNOTATION: "H100-80GB,A100-80GB",
            GPU_COUNT_ANNOTATION: "2",
            MAX_PRICE_ANNOTATION: "3",
        },
    )
    await chain.create_pod(request)
    created = await runpod_pod_of(pricey, request.ref.uid)  # $2.18 for two, below cheap's $2.38
    assert (created["gpu"], created["cloud"]) == ({"id": A100, "count": 2}, "COMMUNITY")
    state = await chain.get_pod_state(request.ref)
    assert state is not None
    assert state.placement == Placement("pricey", 2.18, A100, 2, "COMMUNITY")


async def test_regions_are_passed_to_the_member_in_the_pods_order(
    chain: ChainProvider, cheap: FakeRunPod, pricey: FakeRunPod
) -> None:
    request = pod_request(
        "eu", annotations={REGIONS_ANNOTATION: "EU-RO-1,US-KS-2", PROVIDERS_ANNOTATION: "cheap"}
    )
    await chain.create_pod(request)
    created = await runpod_pod_of(cheap, request.ref.uid)
    assert created["dataCenterId"] == "EU-RO-1"
    [body] = [r["body"] for r in await requests_to(cheap, "POST")]
    assert body["dataCenterIds"] == ["EU-RO-1", "US-KS-2"]
    state = await chain.get_pod_state(request.ref)
    assert state is not None
    assert state.placement is not None
    assert state.placement.locations == ("EU-RO-1", "US-KS-2")
    assert await requests_to(pricey, "GET", "/v2/catalog") == []  # not one the pod may use: not asked


async def test_when_every_offer_is_refused_the_error_is_temporary_with_every_reason(
    chain: ChainProvider, cheap: FakeRunPod, pricey: FakeRunPod
) -> None:
    await refuse_creates(cheap, times=None)
    await refuse_creates(pricey, times=None)
    request = pod_request("nowhere", annotations={GPU_TYPES_ANNOTATION: "RTX-4090"})
    with pytest.raises(TemporaryProviderError) as refused:
        await chain.create_pod(request)
    assert not isinstance(refused.value, InvalidPodError)
    message = str(refused.value)
    for tried in (
        "cheap: 1 x NVIDIA GeForce RTX 4090 (COMMUNITY) at $0.34/h",
        "pricey: 1 x NVIDIA GeForce RTX 4090 (COMMUNITY) at $0.44/h",
        "pricey: 1 x NVIDIA GeForce RTX 4090 (SECURE) at $0.59/h",
        "cheap: 1 x NVIDIA GeForce RTX 4090 (SECURE) at $0.69/h",
    ):
        assert f"{tried}: RunPod create_pod: RunPod could not place the pod" in message
    assert message.count(NO_CAPACITY) == 4
    assert await cheap.control.pods() == []
    assert await pricey.control.pods() == []
    assert await chain.get_pod_state(request.ref) is None


async def test_a_price_cap_no_offer_meets_fails_the_pod_without_creating(
    chain: ChainProvider, cheap: FakeRunPod, pricey: FakeRunPod
) -> None:
    request = pod_request(
        "frugal", annotations={GPU_TYPES_ANNOTATION: "A100-80GB", MAX_PRICE_ANNOTATION: "1.00"}
    )
    with pytest.raises(InvalidPodError) as refused:
        await chain.create_pod(request)
    assert str(refused.value).startswith(
        "no offer matches 1 x A100-80GB, at most $1.00/h: "
        "pricey: 1 x NVIDIA A100 80GB PCIe (COMMUNITY) at $1.09/h is above the price cap; "
    )
    assert await requests_to(cheap, "POST") == []
    assert await requests_to(pricey, "POST") == []


async def test_a_sold_out_type_is_worth_trying_again(chain: ChainProvider, cheap: FakeRunPod) -> None:
    await cheap.control.set_stock("NVIDIA H100 80GB HBM3", "SECURE", "NONE")  # only cheap has H100s
    request = pod_request("h100", annotations={GPU_TYPES_ANNOTATION: "H100-SXM"})
    with pytest.raises(
        TemporaryProviderError, match=r"1 x NVIDIA H100 80GB HBM3 \(SECURE\) at \$2\.99/h is sold out"
    ):
        await chain.create_pod(request)
    assert await requests_to(cheap, "POST") == []


async def test_a_retried_create_does_not_place_the_pod_twice(
    chain: ChainProvider, cheap: FakeRunPod, pricey: FakeRunPod, tmp_path: Path
) -> None:
    await refuse_creates(cheap, times=1)
    request = pod_request("once", annotations={GPU_TYPES_ANNOTATION: "RTX-4090"})
    await chain.create_pod(request)
    await chain.create_pod(request)  # the node retries: the pod is where it was put
    restarted = make_chain(
        tmp_path / "node",
        [runpod_member("cheap", cheap, tmp_path), runpod_member("pricey", pricey, tmp_path)],
    )
    try:
        await restarted.create_pod(request)  # and after a restart, where the list says it is
        await wait_running(restarted, request.ref)
    finally:
        await restarted.aclose()
    assert len(await runpod_pods_of(pricey, request.ref.uid)) == 1
    assert await runpod_pods_of(cheap, request.ref.uid) == []
    assert len(await requests_to(pricey, "POST")) == 1


async def test_after_a_restart_state_update_and_delete_go_to_the_owner_found_by_listing(
    cheap: FakeRunPod, pricey: FakeRunPod, tmp_path: Path
) -> None:
    # No default GPU type: an update that did not carry the pod's placement would be refused.
    members = [
        runpod_member("cheap", cheap, tmp_path, gpu_type=None),
        runpod_member("pricey", pricey, tmp_path, gpu_type=None),
    ]
    first = make_chain(tmp_path / "node", members)
    request = pod_request("moved", annotations={GPU_TYPES_ANNOTATION: "A100-80GB"})
    try:
        await first.create_pod(request)
        placed = await first.get_pod_state(request.ref)
    finally:
        await first.aclose()
    assert placed is not None
    assert placed.placement is not None
    await cheap.control.forget_requests()

    restarted = make_chain(tmp_path / "node", members)
    try:
        assert [state.ref for state in await restarted.list_pods()] == [request.ref]
        state = await wait_running(restarted, request.ref)
        runpod_id = (await runpod_pod_of(pricey, request.ref.uid))["id"]
        assert state.containers[0].container_id == f"runpod://{runpod_id}"
        assert state.placement is None  # only the node's annotation remembers it across restarts

        written = {**request.annotations, CHOSEN_ANNOTATION: chosen_annotation(placed.placement)}
        updated = pod_request(
            "moved", uid=request.ref.uid, annotations=written, image="registry.example/llm:2"
        )
        await restarted.update_pod(updated)
        assert (await runpod_pod_of(pricey, request.ref.uid))["image"] == "registry.example/llm:2"

        await restarted.delete_pod(request.ref, grace_period_seconds=0)
        assert await runpod_pods_of(pricey, request.ref.uid) == []
        assert await restarted.get_pod_state(request.ref) is None
        assert await restarted.list_pods() == []
    finally:
        await restarted.aclose()
    asked = {(r["method"], r["path"]) for r in await cheap.control.requests()}
    assert asked <= {("GET", "/v2/pods")}  # the other member was listed, never asked to change anything


async def test_without_catalog_annotations_the_member_uses_its_defaults_and_no_price_is_known(
    chain: ChainProvider, cheap: FakeRunPod
) -> None:
    request = pod_request("quiet", annotations={PROVIDERS_ANNOTATION: "cheap"})
    await chain.create_pod(request)
    state = await wait_running(chain, request.ref)
    assert state.placement == Placement("cheap")
    created = await runpod_pod_of(cheap, request.ref.uid)
    assert (created["gpu"], created["cloud"]) == ({"id": RTX_4090, "count": 1}, "SECURE")  # its settings
    # And the chain's capabilities are its owner's: RunPod reports no usage.
    with pytest.raises(NotFoundError, match="cheap, which holds pod default/quiet, reports no usage"):
        await chain.usage(request.ref)  # the kubelet's stats leave it out, as on a runpod node
