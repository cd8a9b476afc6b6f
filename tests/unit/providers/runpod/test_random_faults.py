"""The stand-in's random faults: seeded draws, the kinds mixed, each served as a remote API fails."""

from __future__ import annotations

import asyncio
import collections

import aiohttp
import pytest

from vk_devtools.standins.faults import RANDOM_KINDS, RandomFaults
from vk_devtools.standins.runpod.standin import FakeRunPod

from .support import GPU

VALID = {"name": "x", "image": "img:1", "gpu": {"id": GPU, "count": 1}}


def draws(seed: int, count: int = 400) -> list[str | None]:
    faults = RandomFaults(fraction=0.2, seed=seed)
    return [
        None if (drawn := faults.draw("GET", "/v2/pods")) is None else drawn.random_kind for _ in range(count)
    ]


def test_the_same_seed_draws_the_same_faults_and_another_seed_others() -> None:
    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


def test_about_the_fraction_fails_with_every_kind_among_them() -> None:
    faults = RandomFaults(fraction=0.2, seed=11)
    kinds = collections.Counter(
        drawn.random_kind for _ in range(2000) if (drawn := faults.draw("POST", "/v2/pods")) is not None
    )
    assert 300 <= sum(kinds.values()) <= 500
    assert set(kinds) == set(RANDOM_KINDS)
    assert faults.stats()["injected"] == dict(kinds)
    assert faults.stats()["drawn"] == 2000


def test_only_matching_requests_are_drawn_for() -> None:
    faults = RandomFaults(fraction=1.0, seed=1, method="POST", path="^/v2/pods$")
    assert faults.draw("GET", "/v2/pods") is None
    assert faults.draw("POST", "/v2/pods/abc") is None
    assert faults.draw("POST", "/v2/pods") is not None
    assert faults.stats()["drawn"] == 1


@pytest.mark.parametrize(
    "spec", [{"fraction": 1.5, "seed": 1}, {"fraction": 0.1, "seed": 1, "kinds": ["boom"]}, {"seed": 1}]
)
async def test_a_wrong_plan_is_refused(fake: FakeRunPod, spec: dict[str, object]) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{fake.control_url}/random-faults", json=spec) as response,
    ):
        assert response.status == 400


async def test_each_kind_is_served_and_recorded_as_the_fault_it_is(fake: FakeRunPod) -> None:
    headers = {"Authorization": f"Bearer {fake.api_key}"}
    timeout = aiohttp.ClientTimeout(total=0.5)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        for kind in RANDOM_KINDS:
            await fake.control.fail_randomly(
                1.0, seed=3, kinds=[kind], hang_seconds=1.0, retry_after_seconds=2
            )
            try:
                async with session.post(f"{fake.api_url}/pods", json=VALID) as response:
                    status, retry_after = response.status, response.headers.get("Retry-After")
            except TimeoutError:
                status, retry_after = 0, None  # no answer in time
            if kind == "server_error":
                assert status in (500, 502, 503)
            elif kind == "throttle":
                assert (status, retry_after) == (429, "2")
            else:
                assert status == 0
    await fake.control.clear_faults()  # releases the hang, which then answers its 504
    for _ in range(100):
        if all(record.status is not None for record in fake.requests):
            break
        await asyncio.sleep(0.01)  # a bounded poll of the stand-in's request log (noqa: sleep-ok)
    records = [(record.fault, record.status) for record in fake.requests]
    assert [fault for fault, _ in records] == list(RANDOM_KINDS)
    assert records[2][1] == 504  # the hang ends in a 504 nobody waited for
    assert records[3][1] == 201  # the lost answer's create was carried out
    assert len(await fake.control.pods()) == 1
    assert (await fake.control.random_fault_stats() or {})["active"] is False
