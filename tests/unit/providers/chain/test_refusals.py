"""A member that refuses goes on to the next one, says so on the pod, and one that refuses all work (a
402) is not asked again for every pod; the chain is unavailable only when every member is, and its
condition says which member refuses and why."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.errors import ProviderUnavailableError, TemporaryProviderError
from vk_provider.provider import ProviderContext
from vk_providers.chain import ChainProvider

from ..runpod.support import requests_to, runpod_pod_of
from .conftest import runpod_member
from .support import NODE, Backends, pod_request

NO_CAPACITY = "There are no instances currently available"


@pytest.fixture
def context(cheap: FakeRunPod, pricey: FakeRunPod, tmp_path: Path) -> ProviderContext:
    members = [runpod_member("cheap", cheap, tmp_path), runpod_member("pricey", pricey, tmp_path)]
    return ProviderContext(NODE, {"members": members}, "10.0.0.1", tmp_path / "node")


@pytest.fixture
async def chain(context: ProviderContext) -> AsyncIterator[ChainProvider]:
    subject = ChainProvider(context, build=Backends().build)
    yield subject
    await subject.aclose()


async def test_a_member_without_capacity_for_any_candidate_hands_the_pod_to_the_next_and_says_so(
    chain: ChainProvider, context: ProviderContext, cheap: FakeRunPod, pricey: FakeRunPod
) -> None:
    await cheap.control.fail(status=400, method="POST", path="^/v2/pods$", detail=NO_CAPACITY)
    request = pod_request("llm")
    await chain.create_pod(request)

    assert (await runpod_pod_of(pricey, request.ref.uid))["status"] in ("PROVISIONING", "STARTING", "RUNNING")
    reasons = [(reason, message) for _, _, reason, message in context.pod_events.recorded]
    assert reasons[0][0] == "NoCapacity"  # the member's own: its last candidate refused
    assert reasons[1][0] == "ProviderRefused"
    assert reasons[1][1].startswith("cheap (its own defaults) refused: RunPod create_pod: RunPod could not")
    assert reasons[1][1].endswith("; trying pricey (its own defaults)")


async def test_a_member_that_refuses_all_work_is_passed_over_without_a_request_until_its_wait_ends(
    chain: ChainProvider, context: ProviderContext, cheap: FakeRunPod, pricey: FakeRunPod
) -> None:
    await cheap.control.fail(
        status=402, method="POST", path="^/v2/pods$", times=None, detail="insufficient balance"
    )
    first, second = pod_request("first"), pod_request("second")
    await chain.create_pod(first)
    await chain.create_pod(second)

    assert len(await requests_to(cheap, "POST")) == 1  # the second pod did not ask it
    for request in (first, second):
        assert (await runpod_pod_of(pricey, request.ref.uid))["env"]["VK_PROVIDER_POD_UID"] == request.ref.uid
    refusals = [
        message for _, _, reason, message in context.pod_events.recorded if reason == "ProviderRefused"
    ]
    assert len(refusals) == 2
    assert "402 Payment Required" in refusals[0]
    assert "not asking again for" in refusals[1]


async def refuse_all_work(fake: FakeRunPod) -> None:
    await fake.control.fail(
        status=402, method="POST", path="^/v2/pods$", times=None, detail="insufficient balance"
    )


async def test_a_member_refusing_all_work_is_skipped_for_new_pods_and_named_in_the_condition(
    chain: ChainProvider, context: ProviderContext, cheap: FakeRunPod, pricey: FakeRunPod
) -> None:
    await refuse_all_work(cheap)
    await chain.create_pod(pod_request("first"))  # cheap refuses it, and from now on all work
    await chain.check_health()  # pricey takes work: the chain is available
    assert chain.health_note() == (
        "cheap refuses new work (InsufficientBalance); the other members take new pods"
    )

    later = pod_request("later")
    await chain.create_pod(later)
    assert len(await requests_to(cheap, "POST")) == 1  # only the first pod asked it
    assert (await runpod_pod_of(pricey, later.ref.uid))["env"]["VK_PROVIDER_POD_UID"] == later.ref.uid
    told = [message for ref, _, reason, message in context.pod_events.recorded if ref == later.ref]
    assert len(told) == 1
    assert told[0].startswith(
        "cheap (its own defaults) refused: not asked, it refuses all new work (InsufficientBalance): "
    )
    assert told[0].endswith("; trying pricey (its own defaults)")


async def test_the_chain_is_unavailable_only_when_every_member_refuses(
    chain: ChainProvider, cheap: FakeRunPod, pricey: FakeRunPod
) -> None:
    await refuse_all_work(cheap)
    await refuse_all_work(pricey)
    with pytest.raises(TemporaryProviderError, match="no provider could take pod"):
        await chain.create_pod(pod_request("nowhere"))
    with pytest.raises(ProviderUnavailableError) as unavailable:
        await chain.check_health()
    assert unavailable.value.reason == "InsufficientBalance"  # the reason both give
    assert "cheap: " in str(unavailable.value)
    assert "pricey: " in str(unavailable.value)
