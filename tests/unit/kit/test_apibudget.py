"""The client-side budget: unpaced until the apiserver pushes back, AIMD on 429s, a class of its own for
the node's heartbeats, and an optional hard ceiling. Time is a fake clock: sleeping advances it."""

from __future__ import annotations

import math

import pytest

from vk_provider.kit import apibudget
from vk_provider.kit.apibudget import EVENTS, HEARTBEAT, WORKLOAD, AdaptiveLimiter, ApiBudget
from vk_provider.kit.kube import _retry_after_seconds

pytestmark = pytest.mark.unit


class FakeClock:
    def __init__(self) -> None:
        self.time = 1000.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.time += seconds


async def send(limiter: AdaptiveLimiter, clock: FakeClock, count: int, *, every: float) -> None:
    """`count` requests, one each `every` seconds of the caller's own pace (plus any wait)."""
    for _ in range(count):
        await limiter.acquire()
        clock.time += every


async def test_unpaced_until_the_apiserver_pushes_back() -> None:
    clock = FakeClock()
    limiter = AdaptiveLimiter(clock=clock)
    await send(limiter, clock, 5000, every=0.0001)
    assert limiter.waited_seconds == 0
    assert limiter.qps == math.inf


async def test_a_429_pauses_the_class_for_retry_after_and_halves_the_rate_it_was_sending_at() -> None:
    clock = FakeClock()
    limiter = AdaptiveLimiter(clock=clock)
    await send(limiter, clock, 250, every=0.005)  # 200 requests a second for 1.25 s
    limiter.throttle(2.0)
    assert limiter.qps == pytest.approx(100, rel=0.1)
    started = clock.time
    await limiter.acquire()
    assert clock.time - started >= 2.0


async def test_429s_of_one_episode_cut_the_rate_once() -> None:
    clock = FakeClock()
    limiter = AdaptiveLimiter(clock=clock)
    await send(limiter, clock, 250, every=0.005)
    for _ in range(20):  # the requests in flight all answer 429 together
        limiter.throttle(1.0)
    assert limiter.qps == pytest.approx(100, rel=0.1)
    assert limiter.throttled == 20
    clock.time += 1.0
    limiter.throttle(1.0)  # a new episode: cut again
    assert limiter.qps <= 60


async def test_the_rate_recovers_additively_and_then_is_unpaced_again() -> None:
    clock = FakeClock()
    limiter = AdaptiveLimiter(clock=clock)
    await send(limiter, clock, 250, every=0.005)
    limiter.throttle(1.0)
    cut = limiter.qps
    clock.time += 1.0 + 2.0  # the episode, then two quiet seconds: +2 x 10% of the rate before the cut
    assert limiter.qps == pytest.approx(cut + 0.2 * 200, rel=0.15)
    clock.time += 30.0
    assert limiter.qps == math.inf


async def test_a_paced_class_spaces_its_requests_at_its_rate() -> None:
    clock = FakeClock()
    limiter = AdaptiveLimiter(clock=clock)
    await send(limiter, clock, 100, every=0.01)  # 100/s
    limiter.throttle(0.0)  # 50/s from now, no pause
    started = clock.time
    await send(limiter, clock, 50, every=0.0)
    # Some of its one-second burst is gone; the rest is paced at about 50/s (recovery creeps in).
    assert 0.4 <= clock.time - started <= 1.1


async def test_the_ceiling_passes_a_burst_then_paces_at_its_rate() -> None:
    clock = FakeClock()
    budget = ApiBudget(qps=100, burst=10, clock=clock)
    for _ in range(10):
        await budget.acquire(WORKLOAD)
    assert budget.waited_seconds == 0
    started = clock.time
    for _ in range(100):
        await budget.acquire(EVENTS)  # events and pod work share the ceiling
    assert clock.time - started == pytest.approx(1.0, abs=0.02)


async def test_no_burst_means_one_seconds_worth() -> None:
    clock = FakeClock()
    budget = ApiBudget(qps=20, clock=clock)
    for _ in range(20):
        await budget.acquire(WORKLOAD)
    assert budget.waited_seconds == 0
    await budget.acquire(WORKLOAD)
    assert budget.waited_seconds == pytest.approx(0.05)


async def test_heartbeats_never_wait_behind_pod_work_or_its_429s() -> None:
    clock = FakeClock()
    budget = ApiBudget(qps=1, burst=1, clock=clock)
    sleeps_before = len(clock.slept)
    await budget.acquire(WORKLOAD)
    budget.throttle(WORKLOAD, 30.0)
    budget.throttle(EVENTS, 30.0)
    await budget.acquire(HEARTBEAT)
    await budget.acquire(HEARTBEAT)
    assert len(clock.slept) == sleeps_before
    await budget.acquire(WORKLOAD)
    assert clock.slept[-1] >= 30.0
    assert budget.throttled == 2


async def test_a_heartbeat_429_pauses_only_the_heartbeat() -> None:
    clock = FakeClock()
    budget = ApiBudget(clock=clock)
    budget.throttle(HEARTBEAT, 5.0)
    await budget.acquire(WORKLOAD)
    assert clock.slept == []
    await budget.acquire(HEARTBEAT)
    assert clock.slept == [5.0]


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", HEARTBEAT),
        ("PATCH", "/apis/coordination.k8s.io/v1/namespaces/vk-provider-system/leases/n1-leader", HEARTBEAT),
        ("PATCH", "/api/v1/nodes/n1/status", HEARTBEAT),
        ("POST", "/api/v1/nodes", HEARTBEAT),
        ("POST", "/api/v1/namespaces/default/events", EVENTS),
        ("PATCH", "/api/v1/namespaces/default/events/pod-1.17a", EVENTS),
        ("POST", "/apis/events.k8s.io/v1/namespaces/default/events", EVENTS),
        ("PATCH", "/api/v1/namespaces/default/pods/pod-1/status", WORKLOAD),
        ("GET", "/api/v1/namespaces/default/secrets/events", WORKLOAD),
        ("GET", "/api/v1/pods", WORKLOAD),
    ],
)
def test_requests_are_classed_by_their_path(method: str, path: str, expected: str) -> None:
    assert apibudget.classify(method, path) == expected


@pytest.mark.parametrize(
    ("status", "header", "expected"),
    [
        (429, "1", 1.0),
        (429, "0", 0.0),
        (503, "3", 3.0),
        (500, "2", 2.0),
        (429, "86400", apibudget.MAX_RETRY_AFTER_SECONDS),
        (429, None, None),  # client-go retries only what the server asks to be retried
        (409, "1", None),
        (429, "Wed, 21 Oct 2015 07:28:00 GMT", None),
        (503, None, None),
    ],
)
def test_only_answers_asking_for_a_retry_are_retried(
    status: int, header: str | None, expected: float | None
) -> None:
    assert _retry_after_seconds(status, header) == expected
