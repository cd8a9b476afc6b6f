"""RunPod's refusals as RunPod gives them: capacity (400, in words only), rules (400), balance (402),
rate (429): each leads to its own next step, and none to a storm of requests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.errors import (
    CapacityUnavailableError,
    InvalidPodError,
    ProviderRefusesWorkError,
    TemporaryProviderError,
)
from vk_provider.node.pods import retry_delay
from vk_provider.provider import PodRequest, ProviderContext
from vk_providers.runpod import RunPodProvider

from ..node_retries import retry_as_the_node_does
from .support import GPU, ManualClock, pod_request, provider_config, requests_to, runpod_pod_of, write_key

A100 = "NVIDIA A100 80GB PCIe"
H100 = "NVIDIA H100 80GB HBM3"
PODS = "/v2/pods"
CATALOG = "/v2/catalog/gpus"
NO_INSTANCES = "There are no instances currently available"


@pytest.fixture
def context(fake: FakeRunPod, tmp_path: Path) -> ProviderContext:
    key_file = write_key(tmp_path / "runpod-key", fake.api_key)
    return ProviderContext("runpod-test", provider_config(fake, key_file), "10.0.0.1", tmp_path)


@pytest.fixture
async def subject(context: ProviderContext, clock: ManualClock) -> AsyncIterator[RunPodProvider]:
    provider = RunPodProvider(context, clock=clock)
    yield provider
    await provider.aclose()


def with_gpu_types(name: str, *types: str) -> PodRequest:
    return pod_request(name, annotations={"runpod.vk-provider.dev/gpu-type": ", ".join(types)})


async def test_no_capacity_moves_the_pod_to_its_next_gpu_type_with_the_catalog_read_afresh(
    fake: FakeRunPod, subject: RunPodProvider, context: ProviderContext
) -> None:
    # The catalog says HIGH for the 4090 (the default stock); RunPod still refuses it, as it does.
    await fake.control.fail(status=400, method="POST", path=f"^{PODS}$", detail=NO_INSTANCES)
    pod = with_gpu_types("moved", GPU, A100)
    await subject.create_pod(pod)

    assert (await runpod_pod_of(fake, pod.ref.uid))["gpu"]["id"] == A100
    posts = await requests_to(fake, "POST")
    assert [request["body"]["gpu"]["id"] for request in posts] == [GPU, A100]
    assert len(await requests_to(fake, "GET", CATALOG)) == 1  # read afresh after the refusal
    [(ref, kind, reason, message)] = context.pod_events.recorded
    assert (ref, kind, reason) == (pod.ref, "Warning", "NoCapacity")
    assert message == f"RunPod has no capacity for 1 x {GPU} (SECURE); trying 1 x {A100} (SECURE)"


async def test_a_gpu_type_the_fresh_catalog_has_no_stock_of_is_skipped_without_a_create(
    fake: FakeRunPod, subject: RunPodProvider, context: ProviderContext
) -> None:
    await fake.control.set_stock(GPU, "SECURE", "NONE")
    await fake.control.set_stock(A100, "SECURE", "NONE")
    pod = with_gpu_types("skipping", GPU, A100, H100)
    await subject.create_pod(pod)

    assert [request["body"]["gpu"]["id"] for request in await requests_to(fake, "POST")] == [GPU, H100]
    assert [message for *_, message in context.pod_events.recorded] == [
        f"RunPod has no capacity for 1 x {GPU} (SECURE); trying 1 x {H100} (SECURE)"
    ]


async def test_when_every_candidate_refuses_the_error_is_capacity_and_names_each(
    fake: FakeRunPod, subject: RunPodProvider, context: ProviderContext
) -> None:
    await fake.control.fail(status=400, method="POST", path=f"^{PODS}$", detail=NO_INSTANCES, times=2)
    with pytest.raises(CapacityUnavailableError) as refused:
        await subject.create_pod(with_gpu_types("nowhere", GPU, A100))
    assert isinstance(refused.value, TemporaryProviderError)  # the node (or the chain's next member) goes on
    assert str(refused.value).count(NO_INSTANCES) == 2
    assert len(await requests_to(fake, "POST")) == 2
    assert context.pod_events.recorded[-1][3].endswith("the pod's last candidate in stock")


async def test_a_400_that_is_not_about_capacity_fails_the_pod_and_tries_nothing_else(
    fake: FakeRunPod, subject: RunPodProvider
) -> None:
    await fake.control.fail(
        status=400, method="POST", path=f"^{PODS}$", detail="at most one of mounts.persistent and network"
    )
    with pytest.raises(InvalidPodError, match="RunPod refuses the request"):
        await subject.create_pod(with_gpu_types("broken", GPU, A100))
    assert len(await requests_to(fake, "POST")) == 1
    assert len(await requests_to(fake, "GET", CATALOG)) == 0


async def creates_while_refused(
    fake: FakeRunPod, provider: RunPodProvider, clock: ManualClock, *, pods: int, seconds: float
) -> tuple[int, int]:
    """Pods retried as the node retries them (its default backoff, and never before the provider's
    wait) for `seconds` of manual time: the creates and look-ups RunPod received."""
    requests = [pod_request(f"waiting-{index}") for index in range(pods)]
    start = clock.now

    def set_clock(offset: float) -> None:
        clock.now = start + offset

    await retry_as_the_node_does(provider.create_pod, requests, set_clock, seconds=seconds)
    return len(await requests_to(fake, "POST")), len(await requests_to(fake, "GET", PODS))


async def test_402_holds_every_create_back_and_the_health_check_says_why(
    fake: FakeRunPod, subject: RunPodProvider, clock: ManualClock
) -> None:
    await fake.control.fail(
        status=402, method="POST", path=f"^{PODS}$", times=None, detail="insufficient balance"
    )
    creates, lookups = await creates_while_refused(fake, subject, clock, pods=5, seconds=600)
    # 5 pods over ten minutes: one create at 0, 60, 180 and 420 s (see WorkRefusal), not one per pod per
    # backoff; before this, each pod sent one at every node retry (92 creates, measured on the same run).
    assert creates == 4
    assert lookups == creates
    with pytest.raises(ProviderRefusesWorkError) as unavailable:
        await subject.check_health()
    assert unavailable.value.reason == "InsufficientBalance"
    assert "HTTP 402 Payment Required: insufficient balance" in str(unavailable.value)


async def test_after_402_the_provider_recovers_once_runpod_takes_a_pod_again(
    fake: FakeRunPod, subject: RunPodProvider, clock: ManualClock
) -> None:
    await fake.control.fail(status=402, method="POST", path=f"^{PODS}$", detail="insufficient balance")
    with pytest.raises(ProviderRefusesWorkError) as refused:
        await subject.create_pod(pod_request("first"))
    assert refused.value.retry_after_seconds == 60.0
    with pytest.raises(ProviderRefusesWorkError):
        await subject.create_pod(pod_request("second"))  # held back: nothing sent
    assert len(await requests_to(fake, "POST")) == 1

    clock.advance(60)  # the balance was topped up meanwhile (the fault served once)
    await subject.check_health()  # the node takes pods again, so one can be the trial
    await subject.create_pod(pod_request("second"))
    await subject.create_pod(pod_request("third"))
    assert len(await requests_to(fake, "POST")) == 3
    await subject.check_health()


async def test_429_waits_as_an_http_date_retry_after_asks(fake: FakeRunPod, subject: RunPodProvider) -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    await fake.control.fail(
        status=429, method="POST", path=f"^{PODS}$", retry_after=later, detail="slow down"
    )
    with pytest.raises(TemporaryProviderError) as throttled:
        await subject.create_pod(pod_request("throttled"))
    # Longer than a call may wait (5 s here): handed to the node, which waits that long.
    assert throttled.value.retry_after_seconds is not None
    assert 115 <= throttled.value.retry_after_seconds <= 120
    assert retry_delay(1.0, throttled.value) == throttled.value.retry_after_seconds
    assert len(await requests_to(fake, "POST")) == 1


async def test_a_next_gpu_type_above_the_pods_price_cap_is_not_tried(
    fake: FakeRunPod, subject: RunPodProvider, context: ProviderContext
) -> None:
    # RTX 4090 at $0.69/h secure is within $1.00; the A100 ($1.64) is not, the H100 ($2.99) neither.
    await fake.control.fail(status=400, method="POST", path=f"^{PODS}$", detail=NO_INSTANCES)
    pod = pod_request(
        "capped",
        annotations={
            "runpod.vk-provider.dev/gpu-type": f"{GPU}, {A100}, {H100}",
            "runpod.vk-provider.dev/max-price-per-hour": "1.0",
        },
    )
    with pytest.raises(CapacityUnavailableError):
        await subject.create_pod(pod)
    assert [request["body"]["gpu"]["id"] for request in await requests_to(fake, "POST")] == [GPU]
    assert context.pod_events.recorded[-1][3].endswith("the pod's last candidate in stock")
