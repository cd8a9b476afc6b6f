"""The mock provider's synthetic logs and usage: deterministic, so the kubelet API can be checked exactly."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from pathlib import Path

import pytest

from vk_provider.errors import NotFoundError
from vk_provider.provider import ContainerUsage, LogOptions, PodRef, SupportsLogs, SupportsUsage
from vk_providers.mock import MockProvider

from . import START, FakeClock, mock_provider, pod_json, ref_of, running_mock

WEB = pod_json("web", "app", "sidecar")
MIB = 1024 * 1024


async def read(provider: MockProvider, container: str = "app", **options: object) -> bytes:
    stream = provider.stream_logs(ref_of(WEB), container, LogOptions(**options))  # type: ignore[arg-type]
    async with contextlib.aclosing(stream) as chunks:  # type: ignore[type-var]
        return b"".join([chunk async for chunk in chunks])


def test_the_mock_offers_logs_and_usage(tmp_path: Path) -> None:
    provider = mock_provider(tmp_path, FakeClock())
    assert isinstance(provider, SupportsLogs)
    assert isinstance(provider, SupportsUsage)


async def test_cpu_grows_by_a_tenth_of_a_core_per_container_and_memory_stays_at_64_mib(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    assert await provider.usage(ref_of(WEB)) == [
        ContainerUsage(
            name="app", cpu_usage_core_nanoseconds=0, memory_working_set_bytes=64 * MIB, timestamp=START
        ),
        ContainerUsage(
            name="sidecar", cpu_usage_core_nanoseconds=0, memory_working_set_bytes=64 * MIB, timestamp=START
        ),
    ]
    clock.advance(2.5)
    usage = await provider.usage(ref_of(WEB))
    assert [item.cpu_usage_core_nanoseconds for item in usage] == [250_000_000, 250_000_000]
    assert {item.timestamp for item in usage} == {clock.now}


async def test_usage_of_an_unknown_or_deleted_pod_is_not_found(tmp_path: Path) -> None:
    provider = await running_mock(tmp_path, FakeClock(), WEB)
    await provider.delete_pod(ref_of(WEB), grace_period_seconds=0)
    with pytest.raises(NotFoundError):
        await provider.usage(ref_of(WEB))


async def test_the_log_has_ten_numbered_lines(tmp_path: Path) -> None:
    provider = await running_mock(tmp_path, FakeClock(), WEB)
    lines = (await read(provider, "sidecar")).splitlines()
    assert lines == [f"mock log line {number} of web/sidecar".encode() for number in range(1, 11)]


async def test_tail_is_applied_before_since_time_as_the_kubelet_does(tmp_path: Path) -> None:
    provider = await running_mock(tmp_path, FakeClock(), WEB)
    since_line_9 = START + timedelta(milliseconds=800)
    assert await read(provider, tail_lines=3, since_time=since_line_9) == (
        b"mock log line 9 of web/app\nmock log line 10 of web/app\n"
    )
    assert await read(provider, tail_lines=1, since_time=START + timedelta(seconds=5)) == b""


async def test_limit_bytes_and_timestamps(tmp_path: Path) -> None:
    provider = await running_mock(tmp_path, FakeClock(), WEB)
    assert await read(provider, limit_bytes=5) == b"mock "
    assert await read(provider, timestamps=True, tail_lines=1) == (
        b"2024-01-02T03:04:05.900000000Z mock log line 10 of web/app\n"
    )


async def test_unknown_pods_and_containers_and_previous_runs_are_not_found(tmp_path: Path) -> None:
    provider = await running_mock(tmp_path, FakeClock(), WEB)
    with pytest.raises(NotFoundError):
        provider.stream_logs(PodRef("default", "web", "other-uid"), "app", LogOptions())
    with pytest.raises(NotFoundError):
        provider.stream_logs(ref_of(WEB), "db", LogOptions())
    with pytest.raises(NotFoundError):
        provider.stream_logs(ref_of(WEB), "app", LogOptions(previous=True))


async def test_a_followed_log_adds_lines_until_the_pod_is_deleted(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB, log_follow_interval_seconds=0.001)
    stream = provider.stream_logs(ref_of(WEB), "app", LogOptions(follow=True, tail_lines=0))
    async with contextlib.aclosing(stream) as chunks:  # type: ignore[type-var]
        received = []
        async for chunk in chunks:
            received.append(chunk)
            if len(received) == 3:
                await provider.delete_pod(ref_of(WEB), grace_period_seconds=0)
    assert received == [f"mock log line {number} of web/app\n".encode() for number in (11, 12, 13)]
