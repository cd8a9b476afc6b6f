"""The chain over mock and scripted members: trial in order, faults that must not place a pod twice,
routing to the owner, health and capacity."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from vk_provider.errors import (
    CapabilityMissingError,
    InvalidPodError,
    NotFoundError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.kit.placement import GPU_TYPES_ANNOTATION, PROVIDERS_ANNOTATION, PlacementError
from vk_provider.provider import LogOptions, Placement
from vk_provider.testing.contract import wait_running
from vk_providers.chain.provider import format_quantity
from vk_providers.mock.provider import FAIL_CREATE_LABEL

from .support import Backends, ScriptedMember, make_chain, offer, pod_request

A100 = "NVIDIA A100 80GB PCIe"
H100 = "NVIDIA H100 80GB HBM3"


def scripted(*names: str) -> list[dict[str, str]]:
    return [{"name": name, "provider": "scripted"} for name in names]


def two_scripted(tmp_path: Path) -> tuple[Backends, ScriptedMember, ScriptedMember]:
    backends = Backends()
    make_chain(tmp_path, scripted("first", "second"), backends=backends)
    return backends, backends.scripted["first"], backends.scripted["second"]


# -- trial in order ------------------------------------------------------------------------------


async def test_without_placement_annotations_members_are_tried_in_the_nodes_order(tmp_path: Path) -> None:
    chain = make_chain(
        tmp_path, [{"name": "home", "provider": "mock"}, {"name": "burst", "provider": "mock"}]
    )
    request = pod_request("p")
    await chain.create_pod(request)
    state = await wait_running(chain, request.ref)
    assert state.placement == Placement("home")
    assert [s.ref for s in await chain.members[0].provider.list_pods()] == [request.ref]
    assert await chain.members[1].provider.list_pods() == []


async def test_the_pods_providers_annotation_picks_and_orders_the_members(tmp_path: Path) -> None:
    chain = make_chain(
        tmp_path, [{"name": "home", "provider": "mock"}, {"name": "burst", "provider": "mock"}]
    )
    request = pod_request("p", annotations={PROVIDERS_ANNOTATION: "burst,home"})
    await chain.create_pod(request)
    assert (await wait_running(chain, request.ref)).placement == Placement("burst")
    unknown = pod_request("q", annotations={PROVIDERS_ANNOTATION: "home,lambda"})
    with pytest.raises(
        PlacementError, match=r"lambda: no such provider on node chain-test \(its providers: home, burst\)"
    ):
        await chain.create_pod(unknown)


async def test_a_refusal_passes_the_pod_to_the_next_member(tmp_path: Path) -> None:
    backends, first, second = two_scripted(tmp_path)
    first.refusals["*"] = TemporaryProviderError("first: quota exceeded", retry_after_seconds=30)
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    request = pod_request("p")
    await chain.create_pod(request)
    assert list(second.pods) == [request.ref.uid]
    assert first.pods == {}
    assert (await wait_running(chain, request.ref)).placement == Placement("second")


async def test_refused_for_good_everywhere_fails_the_pod_and_anything_else_is_retried(tmp_path: Path) -> None:
    backends, first, second = two_scripted(tmp_path)
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    first.refusals["*"] = InvalidPodError("first: one container per pod")
    second.refusals["*"] = InvalidPodError("second: no such image")
    with pytest.raises(InvalidPodError) as refused:
        await chain.create_pod(pod_request("p"))
    assert str(refused.value) == (
        "no provider could take pod default/p: first (its own defaults): first: one container per pod; "
        "second (its own defaults): second: no such image"
    )
    second.refusals["*"] = TemporaryProviderError("second: busy", retry_after_seconds=12)
    with pytest.raises(TemporaryProviderError) as retried:
        await chain.create_pod(pod_request("q"))
    assert not isinstance(retried.value, InvalidPodError)
    assert retried.value.retry_after_seconds == 12  # the soonest a member that may take it asked for
    first.refusals["*"] = TemporaryProviderError("first: busy")
    with pytest.raises(TemporaryProviderError) as retried:
        await chain.create_pod(pod_request("r"))
    assert retried.value.retry_after_seconds is None  # first may take it at the node's next retry


async def test_placement_by_price_needs_a_member_with_a_catalog(tmp_path: Path) -> None:
    chain = make_chain(tmp_path, [{"name": "home", "provider": "mock"}])
    with pytest.raises(InvalidPodError, match=r"none of its providers \(home\) publishes GPU offers"):
        await chain.create_pod(pod_request("p", annotations={GPU_TYPES_ANNOTATION: "A100-80GB"}))


async def test_priced_offers_are_tried_in_order_across_members_and_tiers(tmp_path: Path) -> None:
    backends, first, second = two_scripted(tmp_path)
    first.offers = [offer(A100, 1.2, tier="spot"), offer(A100, 1.9, tier="on-demand")]
    second.offers = [offer(A100, 1.5), offer(H100, 0.5)]
    first.refusals[f"{A100}/spot"] = TemporaryProviderError("first: no spot capacity")
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    request = pod_request("p", annotations={GPU_TYPES_ANNOTATION: "A100-80GB"})
    await chain.create_pod(request)
    assert [r.annotations["scripted.test/offer"] for r in first.created + second.created] == [
        f"{A100}/spot",
        f"{A100}/None",
    ]
    assert (await wait_running(chain, request.ref)).placement == Placement("second", 1.5, A100, 1)


async def test_one_create_tries_a_bounded_number_of_offers(tmp_path: Path) -> None:
    backends, first, _ = two_scripted(tmp_path)
    first.offers = [offer(A100, 1.0 + tier, tier=str(tier)) for tier in range(5)]
    first.refusals["*"] = TemporaryProviderError("first: no capacity")
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends, max_offers_per_create=2)
    with pytest.raises(TemporaryProviderError, match=r"; 3 more offers: not tried in this attempt$"):
        await chain.create_pod(pod_request("p", annotations={GPU_TYPES_ANNOTATION: "A100-80GB"}))
    assert len(first.created) == 2


async def test_a_member_that_is_down_is_not_asked_again_for_its_other_offers(tmp_path: Path) -> None:
    backends, first, second = two_scripted(tmp_path)
    first.offers = [offer(A100, 1.0, tier="spot"), offer(A100, 1.1, tier="on-demand")]
    second.offers = [offer(A100, 1.2)]
    first.refusals["*"] = ProviderUnavailableError("first: the account is suspended")
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    await chain.create_pod(pod_request("p", annotations={GPU_TYPES_ANNOTATION: "A100-80GB"}))
    assert len(first.created) == 1
    assert len(second.pods) == 1


async def test_an_unreachable_catalog_makes_a_failed_placement_temporary(tmp_path: Path) -> None:
    backends, first, second = two_scripted(tmp_path)
    second.offers = [offer(A100, 1.5)]
    second.refusals["*"] = InvalidPodError("second: this account cannot use A100s")
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    await chain.list_pods()
    first.unreachable = True
    request = pod_request("p", annotations={GPU_TYPES_ANNOTATION: "A100-80GB"})
    with pytest.raises(TemporaryProviderError) as refused:
        await chain.create_pod(request)
    assert "first (its GPU catalog): first: connection refused" in str(refused.value)
    second.refusals.clear()
    await chain.create_pod(request)  # the cheapest offer the chain can see now
    assert list(second.pods) == [request.ref.uid]


# -- never twice ---------------------------------------------------------------------------------


async def test_a_create_whose_answer_was_lost_is_found_where_it_went(tmp_path: Path) -> None:
    backends, first, second = two_scripted(tmp_path)
    first.lose_answers = 1
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    request = pod_request("p")
    await chain.create_pod(request)
    assert list(first.pods) == [request.ref.uid]
    assert second.created == []
    assert (await wait_running(chain, request.ref)).placement == Placement("first")


async def test_a_copy_made_by_an_unanswered_create_is_deleted_once_seen(tmp_path: Path) -> None:
    backends, first, second = two_scripted(tmp_path)
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    assert await chain.list_pods() == []
    request = pod_request("p")
    first.lose_answers = 1
    first.unanswered_gets = 1
    await chain.create_pod(request)  # first made it but could not say so: second takes the pod
    assert list(first.pods) == list(second.pods) == [request.ref.uid]

    state = await chain.get_pod_state(request.ref)
    assert state is not None
    assert state.placement == Placement("second")
    listed = await chain.list_pods()
    assert [s.containers[0].container_id for s in listed] == [
        second.pods[request.ref.uid].containers[0].container_id
    ]
    assert first.pods == {}  # the copy is gone
    assert first.deleted == [request.ref]
    await chain.delete_pod(request.ref, grace_period_seconds=0)
    assert second.pods == {}


async def test_a_member_that_cannot_be_asked_blocks_what_it_may_hold(tmp_path: Path) -> None:
    backends, first, second = two_scripted(tmp_path)
    first.unreachable = True
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    request = pod_request("p")
    with pytest.raises(TemporaryProviderError, match="cannot tell whether pod default/p is held by first"):
        await chain.get_pod_state(request.ref)
    with pytest.raises(TemporaryProviderError, match="cannot tell whether pod default/p is held by first"):
        await chain.create_pod(request)
    assert second.created == []
    first.unreachable = False
    await chain.create_pod(request)
    assert list(first.pods) == [request.ref.uid]


async def test_once_every_member_has_listed_unknown_pods_need_no_calls(tmp_path: Path) -> None:
    backends, first, _ = two_scripted(tmp_path)
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    await chain.list_pods()
    first.unreachable = True  # would fail any call
    assert await chain.get_pod_state(pod_request("p").ref) is None


async def test_a_listing_that_fails_somewhere_is_partial_and_fails_only_when_nothing_answers(
    tmp_path: Path,
) -> None:
    backends, first, second = two_scripted(tmp_path)
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    request = pod_request("p", annotations={PROVIDERS_ANNOTATION: "second"})
    await chain.create_pod(request)
    first.unreachable = True
    assert [s.ref for s in await chain.list_pods()] == [request.ref]
    second.unreachable = True
    with pytest.raises(TemporaryProviderError, match="no provider of the chain could list its pods: first: "):
        await chain.list_pods()


# -- routing -------------------------------------------------------------------------------------


async def test_logs_and_usage_come_from_the_owner(tmp_path: Path) -> None:
    chain = make_chain(
        tmp_path, [{"name": "home", "provider": "mock"}, {"name": "burst", "provider": "mock"}]
    )
    request = pod_request("p", annotations={PROVIDERS_ANNOTATION: "burst"})
    await chain.create_pod(request)
    log = [chunk async for chunk in chain.stream_logs(request.ref, "server", LogOptions(tail_lines=1))]
    assert log == [b"mock log line 10 of p/server\n"]
    [usage] = await chain.usage(request.ref)
    assert usage.name == "server"
    unknown = pod_request("nobody").ref
    with pytest.raises(NotFoundError, match="pod default/nobody is held by no provider of node chain-test"):
        await chain.usage(unknown)
    with pytest.raises(NotFoundError):
        [chunk async for chunk in chain.stream_logs(unknown, "server", LogOptions())]


async def test_an_owner_without_logs_makes_logs_a_missing_capability(tmp_path: Path) -> None:
    chain = make_chain(tmp_path, scripted("first"))
    request = pod_request("p")
    await chain.create_pod(request)
    with pytest.raises(CapabilityMissingError, match="first, which holds pod default/p, serves no logs"):
        [chunk async for chunk in chain.stream_logs(request.ref, "server", LogOptions())]


async def test_update_goes_to_the_owner_only(tmp_path: Path) -> None:
    backends, first, second = two_scripted(tmp_path)
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends)
    request = pod_request("p", annotations={PROVIDERS_ANNOTATION: "second"})
    await chain.create_pod(request)
    first.unreachable = True  # any call to it would fail
    await chain.update_pod(request)
    await chain.delete_pod(request.ref, grace_period_seconds=30)
    assert second.deleted == [request.ref]
    assert await chain.get_pod_state(request.ref) is None


async def test_a_mock_member_refusing_for_good_passes_its_message_on(tmp_path: Path) -> None:
    chain = make_chain(tmp_path, [{"name": "home", "provider": "mock"}])
    with pytest.raises(
        InvalidPodError, match="home \\(its own defaults\\): mock provider refuses the pod: invalid"
    ):
        await chain.create_pod(pod_request("p", labels={FAIL_CREATE_LABEL: "invalid image"}))


# -- health and capacity -------------------------------------------------------------------------


async def test_the_chain_is_available_while_any_member_is(tmp_path: Path) -> None:
    backends, first, second = two_scripted(tmp_path)
    chain = make_chain(tmp_path, scripted("first", "second"), backends=backends, health_timeout_seconds=0.05)
    await chain.check_health()
    first.health_hangs = True  # a member that never answers counts as unavailable, and does not stall
    await chain.check_health()
    assert chain.unavailable == {"first": "its health check gave no answer within 0.05s"}
    second.unreachable = True
    with pytest.raises(ProviderUnavailableError) as down:
        await chain.check_health()
    assert str(down.value) == (
        "no provider of the chain is available: first: its health check gave no answer within 0.05s; "
        "second: second cannot be reached"
    )
    first.health_hangs = second.unreachable = False
    await chain.check_health()
    assert chain.unavailable == {}


async def test_capacity_is_the_members_added_up_and_gpus_per_type_their_largest_pod(tmp_path: Path) -> None:
    chain = make_chain(
        tmp_path,
        [
            {
                "name": "home",
                "provider": "mock",
                "config": {
                    "capacity": {
                        "nvidia.com/gpu": "4",
                        "memory": "64Gi",
                        "cpu": "500m",
                        "x": "oops",
                        "gpu.vk-provider.dev/nvidia-l4": "2",
                    }
                },
            },
            {"name": "none", "provider": "scripted"},
            {
                "name": "burst",
                "provider": "mock",
                "config": {
                    "capacity": {
                        "nvidia.com/gpu": "2",
                        "memory": "32Gi",
                        "cpu": "1.5",
                        "gpu.example/h100": "8",
                        "gpu.vk-provider.dev/nvidia-l4": "8",
                    }
                },
            },
        ],
    )
    assert await chain.node_capacity() == {
        "nvidia.com/gpu": "6",
        "memory": "96Gi",
        "cpu": "2",
        "gpu.example/h100": "8",
        "gpu.vk-provider.dev/nvidia-l4": "8",  # the largest pod of either member, not a sum
    }


@pytest.mark.parametrize(
    ("value", "binary", "text"),
    [
        (Fraction(6), False, "6"),
        (Fraction(0), True, "0"),
        (Fraction(96 * 2**30), True, "96Gi"),
        (Fraction(3 * 2**30 + 1), True, "3221225473"),
        (Fraction(3, 2), False, "1500m"),
        (Fraction(1, 10**6), False, "1u"),
        (Fraction(1, 3), False, "333333333n"),
    ],
)
def test_added_up_quantities_are_written_as_kubernetes_quantities(
    value: Fraction, binary: bool, text: str
) -> None:
    assert format_quantity(value, binary=binary) == text
