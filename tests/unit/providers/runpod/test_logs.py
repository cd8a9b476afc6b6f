"""Container logs through RunPod's log stream (Server-Sent Events), with the kubelet's options."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime

import aiohttp
import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.errors import NotFoundError
from vk_provider.provider import LogOptions, PodRef, PodRequest
from vk_provider.testing.contract import eventually, wait_running
from vk_providers.runpod import RunPodProvider

from .support import pod_request, requests_to


async def serving_pod(provider: RunPodProvider) -> tuple[PodRequest, str]:
    request = pod_request("logged")
    await provider.create_pod(request)
    state = await wait_running(provider, request.ref)
    assert state.traffic_address is not None
    return request, state.traffic_address


async def visit(address: str, *paths: str) -> None:
    """Requests through the proxy: the fake's app writes one container log line for each."""
    async with aiohttp.ClientSession() as session:
        for path in paths:
            async with session.get(address + path) as response:
                assert response.status == 200


async def read(
    provider: RunPodProvider, ref: PodRef, options: LogOptions, container: str = "server"
) -> bytes:
    return b"".join([chunk async for chunk in provider.stream_logs(ref, container, options)])


async def test_the_whole_container_log_and_nothing_of_the_system_log(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request, address = await serving_pod(provider)
    await visit(address, "/a", "/b?c=d")
    assert await read(provider, request.ref, LogOptions()) == b"GET /a\nGET /b?c=d\n"
    [logs] = [call for call in await requests_to(fake, "GET", "/v2/pods/") if call["path"].endswith("/logs")]
    assert logs["query"] == {"source": "container", "tail": "5000"}


async def test_tail_lines(fake: FakeRunPod, provider: RunPodProvider) -> None:
    request, address = await serving_pod(provider)
    await visit(address, "/1", "/2", "/3")
    assert await read(provider, request.ref, LogOptions(tail_lines=2)) == b"GET /2\nGET /3\n"
    assert await read(provider, request.ref, LogOptions(tail_lines=0)) == b""


async def test_timestamps_as_the_kubelet_writes_them(fake: FakeRunPod, provider: RunPodProvider) -> None:
    request, address = await serving_pod(provider)
    await visit(address, "/stamped")
    text = (await read(provider, request.ref, LogOptions(timestamps=True))).decode()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z GET /stamped\n", text), text


async def test_limit_bytes_cuts_exactly(fake: FakeRunPod, provider: RunPodProvider) -> None:
    request, address = await serving_pod(provider)
    await visit(address, "/first", "/second")
    assert await read(provider, request.ref, LogOptions(limit_bytes=9)) == b"GET /firs"


async def test_since_time_with_a_tail(fake: FakeRunPod, provider: RunPodProvider) -> None:
    request, address = await serving_pod(provider)
    await visit(address, "/old")
    since = datetime.now(UTC)
    await visit(address, "/new-1", "/new-2", "/new-3")
    assert (
        await read(provider, request.ref, LogOptions(since_time=since))
        == b"GET /new-1\nGET /new-2\nGET /new-3\n"
    )
    # RunPod ignores tail when since is given; the tail is cut here.
    assert await read(provider, request.ref, LogOptions(since_time=since, tail_lines=1)) == b"GET /new-3\n"


async def test_follow_streams_new_lines_as_they_come(fake: FakeRunPod, provider: RunPodProvider) -> None:
    request, address = await serving_pod(provider)
    await visit(address, "/before")
    stream = provider.stream_logs(request.ref, "server", LogOptions(follow=True))
    try:
        assert await anext(stream) == b"GET /before\n"
        pending = asyncio.ensure_future(anext(stream))
        await visit(address, "/after")
        assert await asyncio.wait_for(pending, 10) == b"GET /after\n"
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_follow_without_backfill_starts_with_the_next_line(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request, address = await serving_pod(provider)
    await visit(address, "/history")
    stream = provider.stream_logs(request.ref, "server", LogOptions(follow=True, tail_lines=0))
    try:
        pending = asyncio.ensure_future(anext(stream))
        await eventually(
            lambda: requests_to(fake, "GET", "/v2/pods/"),
            lambda calls: any(call["path"].endswith("/logs") for call in calls),
            what="the log stream to open",
        )
        await visit(address, "/live")
        assert await asyncio.wait_for(pending, 10) == b"GET /live\n"
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_a_followed_log_ends_when_the_pod_is_deleted(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request, address = await serving_pod(provider)
    await visit(address, "/last")
    chunks = []
    async for chunk in provider.stream_logs(request.ref, "server", LogOptions(follow=True)):
        chunks.append(chunk)
        await provider.delete_pod(request.ref, grace_period_seconds=0)
    assert chunks == [b"GET /last\n"]


async def test_unknown_pods_containers_and_previous_runs_are_not_found(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    request, _ = await serving_pod(provider)
    with pytest.raises(NotFoundError, match="previous terminated container"):
        provider.stream_logs(request.ref, "server", LogOptions(previous=True))
    with pytest.raises(NotFoundError, match="has no container 'sidecar'"):
        await read(provider, request.ref, LogOptions(), container="sidecar")
    with pytest.raises(NotFoundError, match="is not held by RunPod"):
        await read(provider, PodRef("default", "nobody", "no-such-uid"), LogOptions())
