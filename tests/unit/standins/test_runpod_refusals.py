"""The RunPod stand-in's refusals of a create: no capacity on a type the catalog lists as available
(scripted per GPU type and data center, or seeded), 402 for a balance too low, 403 for a pool the
account may not use; each a problem document with no machine-readable code."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from vk_devtools.standins.runpod.capacity import NO_CAPACITY_DETAIL
from vk_devtools.standins.runpod.profile import REALISTIC
from vk_devtools.standins.runpod.standin import FakeRunPod

from .runpod_support import A100, GPU, call, pod_body


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


@pytest.fixture
async def fake() -> AsyncIterator[FakeRunPod]:
    async with FakeRunPod(profile=REALISTIC.scaled(0)) as server:
        yield server


async def availability(session: aiohttp.ClientSession, fake: FakeRunPod, gpu: str) -> str:
    _, _, catalog = await call(session, fake, "GET", "/catalog/gpus?include=AVAILABILITY&product=POD")
    return str(next(entry["availability"] for entry in catalog["gpus"] if entry["id"] == gpu))


async def test_the_first_candidate_refuses_for_capacity_and_the_second_accepts(
    fake: FakeRunPod, session: aiohttp.ClientSession
) -> None:
    await fake.control.refuse_capacity(GPU, data_center="US-KS-2")
    assert await availability(session, fake, GPU) == "HIGH"

    status, headers, refused = await call(session, fake, "POST", "/pods", pod_body(dataCenterIds=["US-KS-2"]))
    assert (status, headers["Content-Type"].split(";")[0]) == (400, "application/problem+json")
    assert refused == {"title": "Bad Request", "status": 400, "detail": NO_CAPACITY_DETAIL}
    assert await availability(session, fake, GPU) == "HIGH"  # the catalog is not told

    status, _, pod = await call(session, fake, "POST", "/pods", pod_body(dataCenterIds=["EU-RO-1"]))
    assert (status, pod["dataCenterId"]) == (201, "EU-RO-1")
    status, _, pod = await call(session, fake, "POST", "/pods", pod_body(dataCenterIds=["US-KS-2"]))
    assert (status, pod["dataCenterId"]) == (201, "US-KS-2")  # refused once, as scripted
    assert len(await fake.control.pods()) == 2
    assert (await fake.control.capacity_refusals())["refused"] == 1


async def test_a_refusal_of_a_gpu_type_leaves_the_next_type_alone(
    fake: FakeRunPod, session: aiohttp.ClientSession
) -> None:
    await fake.control.refuse_capacity(GPU, times=None)
    for _ in range(3):
        assert (await call(session, fake, "POST", "/pods", pod_body()))[0] == 400
    assert (await call(session, fake, "POST", "/pods", pod_body(A100)))[0] == 201
    await fake.control.clear_faults()
    assert (await call(session, fake, "POST", "/pods", pod_body()))[0] == 201


async def test_a_create_naming_several_data_centers_goes_to_one_with_room(
    fake: FakeRunPod, session: aiohttp.ClientSession
) -> None:
    await fake.control.refuse_capacity(GPU, data_center="US-KS-2", times=None)
    status, _, pod = await call(
        session, fake, "POST", "/pods", pod_body(dataCenterIds=["US-KS-2", "EU-RO-1"])
    )
    assert (status, pod["dataCenterId"]) == (201, "EU-RO-1")
    await fake.control.refuse_capacity(GPU, data_center="EU-RO-1")
    status, _, _ = await call(session, fake, "POST", "/pods", pod_body(dataCenterIds=["US-KS-2", "EU-RO-1"]))
    assert status == 400


async def test_a_seeded_share_of_creates_is_refused_the_same_way_every_run(
    session: aiohttp.ClientSession,
) -> None:
    async def outcomes(seed: int) -> list[int]:
        profile = REALISTIC.scaled(0).updated({"capacity_refusal_fraction": 0.5, "capacity_seed": seed})
        async with FakeRunPod(profile=profile) as fake:
            return [(await call(session, fake, "POST", "/pods", pod_body()))[0] for _ in range(12)]

    first = await outcomes(7)
    assert first == await outcomes(7)
    assert set(first) == {201, 400}
    assert first != await outcomes(8)


async def test_a_balance_that_does_not_cover_the_first_hour_is_402(
    fake: FakeRunPod, session: aiohttp.ClientSession
) -> None:
    await fake.control.set_balance(1.0)
    assert (await call(session, fake, "POST", "/pods", pod_body()))[0] == 201  # $0.69 an hour
    status, headers, refused = await call(session, fake, "POST", "/pods", pod_body(A100))  # $1.64 an hour
    assert (status, headers["Content-Type"].split(";")[0]) == (402, "application/problem+json")
    assert set(refused) == {"title", "status", "detail"}
    assert (refused["title"], refused["status"]) == ("Payment Required", 402)
    assert "insufficient balance" in refused["detail"]
    await fake.control.set_balance(None)
    assert (await call(session, fake, "POST", "/pods", pod_body(A100)))[0] == 201


async def test_a_pool_the_account_may_not_use_is_403(
    fake: FakeRunPod, session: aiohttp.ClientSession
) -> None:
    await fake.control.deny_pool("AMPERE_80")
    status, _, refused = await call(session, fake, "POST", "/pods", pod_body(A100))
    assert (status, refused["title"]) == (403, "Forbidden")
    assert "AMPERE_80" in refused["detail"]
    assert (await call(session, fake, "POST", "/pods", pod_body()))[0] == 201  # another pool
    await fake.control.deny_pool("AMPERE_80", denied=False)
    assert (await call(session, fake, "POST", "/pods", pod_body(A100)))[0] == 201


async def test_the_control_plane_refuses_a_wrong_profile_change_or_refusal(fake: FakeRunPod) -> None:
    with pytest.raises(RuntimeError, match="unknown profile fields: bogus"):
        await fake.control.set_profile(bogus=1)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        await fake.control.set_profile(capacity_refusal_fraction=2)
    with pytest.raises(RuntimeError, match="catalog knows"):
        await fake.control.refuse_capacity("NVIDIA RTX 9999")
    assert (await fake.control.profile())["name"] == "realistic"
