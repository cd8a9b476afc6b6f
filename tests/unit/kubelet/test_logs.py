"""GET /containerLogs: options, errors, and a stream that is passed through untouched and closed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from vk_provider.errors import NotFoundError, TemporaryProviderError
from vk_provider.kubelet import routes
from vk_provider.kubelet.routes import build_app
from vk_provider.provider import LogOptions

from . import (
    START,
    BareProvider,
    FakeClock,
    ScriptedLogs,
    TrackedStream,
    backend_for,
    kubelet_client,
    pod_json,
    ref_of,
    running_mock,
)

WEB = pod_json("web", "app", "sidecar", init_containers=["setup"])
LOGS = "/containerLogs/default/web/app"


def mock_lines(*numbers: int, container: str = "app") -> bytes:
    return b"".join(f"mock log line {number} of web/{container}\n".encode() for number in numbers)


async def test_the_whole_log_is_served_as_plain_text(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        response = await client.get("/containerLogs/default/web/sidecar")
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/plain"
        assert await response.read() == mock_lines(*range(1, 11), container="sidecar")


async def test_tail_lines_keeps_the_last_lines(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        assert await (await client.get(LOGS, params={"tailLines": "3"})).read() == mock_lines(8, 9, 10)
        assert await (await client.get(LOGS, params={"tailLines": "0"})).read() == b""
        assert await (await client.get(LOGS, params={"tail": "2"})).read() == mock_lines(9, 10)


@pytest.mark.parametrize("limit", [1, 25, 27, 270, 1000])
async def test_limit_bytes_cuts_the_output_at_exactly_that_many_bytes(tmp_path: Path, limit: int) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        body = await (await client.get(LOGS, params={"limitBytes": str(limit)})).read()
    assert body == mock_lines(*range(1, 11))[:limit]


async def test_timestamps_prefix_each_line_with_its_time_in_nanoseconds(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        body = await (await client.get(LOGS, params={"timestamps": "true", "tailLines": "2"})).read()
    assert body == (
        b"2024-01-02T03:04:05.800000000Z mock log line 9 of web/app\n"
        b"2024-01-02T03:04:05.900000000Z mock log line 10 of web/app\n"
    )


async def test_since_time_and_since_seconds_drop_earlier_lines(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    clock.advance(1.0)  # now: one second after the start, so line 10 (start + 0.9 s) is 0.1 s old
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        since_time = await client.get(LOGS, params={"sinceTime": "2024-01-02T05:04:05.75+02:00"})
        assert await since_time.read() == mock_lines(9, 10)
        since_seconds = await client.get(LOGS, params={"sinceSeconds": "1"})
        assert await since_seconds.read() == mock_lines(*range(1, 11))


async def test_previous_asks_the_provider_which_has_no_earlier_run(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        response = await client.get(LOGS, params={"previous": "true"})
        assert response.status == 404
        assert "previous terminated container 'app'" in await response.text()


async def test_follow_streams_new_lines_until_the_pod_is_deleted(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB, log_follow_interval_seconds=0.01)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        response = await client.get(LOGS, params={"follow": "true", "tailLines": "1"})
        assert await response.content.readline() == mock_lines(10)
        assert await response.content.readline() == mock_lines(11)  # sent while the stream is still open
        assert await response.content.readline() == mock_lines(12)
        await provider.delete_pod(ref_of(WEB), grace_period_seconds=0)
        rest = await response.read()  # ends: the container is gone
        assert rest == b"" or rest.startswith(b"mock log line 13 of web/app\n")


async def test_every_option_reaches_the_provider(tmp_path: Path) -> None:
    provider = ScriptedLogs(lambda options: TrackedStream().run([], then_wait=False))
    clock = FakeClock()
    query = {
        "follow": "1",
        "tailLines": "4",
        "limitBytes": "9",
        "previous": "t",
        "timestamps": "yes",
        "sinceSeconds": "5",
    }
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        assert (await client.get(LOGS, params=query)).status == 200
    assert provider.options == [
        LogOptions(
            follow=True,
            tail_lines=4,
            limit_bytes=9,
            previous=True,
            since_time=START.replace(second=0),
            timestamps=True,
        )
    ]


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"tailLines": "x"}, "tailLines"),
        ({"tailLines": "-1"}, "tailLines"),
        ({"limitBytes": "0"}, "limitBytes"),
        ({"limitBytes": "1e3"}, "limitBytes"),
        ({"sinceSeconds": "0"}, "sinceSeconds"),
        ({"sinceSeconds": "soon"}, "sinceSeconds"),
        ({"sinceTime": "2024-01-02"}, "sinceTime"),
        ({"sinceTime": "2024-01-02T03:04:05Z", "sinceSeconds": "3"}, "sinceSeconds"),
    ],
)
async def test_bad_options_are_a_400_that_names_the_parameter(
    tmp_path: Path, query: dict[str, str], named: str
) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        response = await client.get(LOGS, params=query)
        assert response.status == 400
        assert named in await response.text()


async def test_an_unknown_pod_or_container_is_a_404_with_a_message(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        other_namespace = await client.get("/containerLogs/kube-system/web/app")
        assert other_namespace.status == 404
        assert await other_namespace.text() == 'pod "kube-system/web" is not on node "vk-test"'
        no_container = await client.get("/containerLogs/default/web/db")
        assert no_container.status == 404
        assert await no_container.text() == 'container "db" not found in pod "default/web"'


async def test_a_container_the_provider_does_not_know_is_a_404(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        response = await client.get("/containerLogs/default/web/setup")  # an init container of the spec
        assert response.status == 404
        assert "has no container 'setup'" in await response.text()


async def test_a_provider_without_logs_is_a_501() -> None:
    async with kubelet_client(BareProvider(), [WEB]) as client:
        response = await client.get(LOGS)
        assert response.status == 501
        assert await response.text() == 'the provider of node "vk-test" serves no logs'


async def test_a_stream_failing_before_its_first_chunk_gets_the_status_of_its_error() -> None:
    async def failing(error: Exception) -> AsyncIterator[bytes]:
        raise error
        yield b""  # an async generator that fails on its first step

    async with kubelet_client(ScriptedLogs(lambda _: failing(NotFoundError("gone"))), [WEB]) as client:
        response = await client.get(LOGS)
        assert (response.status, await response.text()) == (404, "gone")
    busy = ScriptedLogs(lambda _: failing(TemporaryProviderError("backend busy")))
    async with kubelet_client(busy, [WEB]) as client:
        response = await client.get(LOGS)
        assert (response.status, await response.text()) == (503, "backend busy")


async def test_an_unexpected_error_is_a_short_500_with_the_traceback_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(options: LogOptions) -> AsyncIterator[bytes]:
        raise RuntimeError("secret internals")

    async with kubelet_client(ScriptedLogs(broken), [WEB]) as client:
        response = await client.get(LOGS)
        assert response.status == 500
        assert await response.text() == "internal error; the node's log has the details"
    failure = next(record for record in caplog.records if record.name == "vk_provider.kubelet.routes")
    assert failure.levelno == logging.ERROR
    assert failure.exc_info is not None
    assert "secret internals" in str(failure.exc_info[1])


async def test_bytes_pass_through_untouched_even_invalid_utf8_and_a_one_mebibyte_line() -> None:
    chunks = [
        b"\xff\xfe not UTF-8 \xc3\x28\n",
        b"x" * (1024 * 1024) + b"\n",
        b"\x00\r\nno newline at the end",
    ]
    tracked = TrackedStream()
    async with kubelet_client(ScriptedLogs(lambda _: tracked.run(chunks, then_wait=False)), [WEB]) as client:
        response = await client.get(LOGS)
        assert await response.read() == b"".join(chunks)
    assert tracked.closed.is_set()


async def test_limit_bytes_holds_even_when_the_provider_sends_more_and_the_stream_is_closed() -> None:
    tracked = TrackedStream()
    endless = ScriptedLogs(lambda _: tracked.run([b"0123456789"] * 5, then_wait=True))
    async with kubelet_client(endless, [WEB]) as client:
        response = await client.get(LOGS, params={"limitBytes": "25", "follow": "true"})
        assert await response.read() == b"0123456789012345678901234"
    assert tracked.closed.is_set()


async def test_a_followed_stream_is_closed_when_the_client_disconnects() -> None:
    tracked = TrackedStream()
    provider = ScriptedLogs(lambda _: tracked.run([b"first line\n"], then_wait=True))
    async with kubelet_client(provider, [WEB]) as client:
        response = await client.get(LOGS, params={"follow": "true"})
        assert await response.content.readline() == b"first line\n"
        assert not tracked.closed.is_set()
        response.close()
        await asyncio.wait_for(tracked.closed.wait(), timeout=5)


@contextlib.asynccontextmanager
async def server_without_handler_cancellation(app: web.Application) -> AsyncIterator[str]:
    """How the node's TLS server runs the app: aiohttp does not cancel a handler when its client leaves."""
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("chunks", [[b"first line\n"], []], ids=["after a line", "before any output"])
async def test_a_quiet_followed_stream_is_closed_when_the_client_leaves_even_if_handlers_are_not_cancelled(
    monkeypatch: pytest.MonkeyPatch, chunks: list[bytes]
) -> None:
    monkeypatch.setattr(routes, "DISCONNECT_CHECK_SECONDS", 0.01)
    tracked = TrackedStream()
    app = build_app(backend_for(ScriptedLogs(lambda _: tracked.run(chunks, then_wait=True)), [WEB]))
    async with server_without_handler_cancellation(app) as url, aiohttp.ClientSession() as session:
        request = asyncio.create_task(session.get(f"{url}{LOGS}?follow=true"))
        await asyncio.wait_for(tracked.started.wait(), timeout=5)
        if chunks:
            response = await request
            assert await response.content.readline() == chunks[0]
            response.close()
        else:  # no headers yet (they wait for the first chunk): leave while waiting for them
            request.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await request
        await asyncio.wait_for(tracked.closed.wait(), timeout=5)


async def test_a_stream_that_breaks_off_midway_ends_the_connection_without_a_clean_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def breaking(options: LogOptions) -> AsyncIterator[bytes]:
        yield b"partial\n"
        raise TemporaryProviderError("backend lost the stream")

    async with kubelet_client(ScriptedLogs(breaking), [WEB]) as client:
        response = await client.get(LOGS)
        assert response.status == 200
        assert await response.content.readline() == b"partial\n"
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    assert any("backend lost the stream" in record.getMessage() for record in caplog.records)


async def test_the_stream_is_closed_as_soon_as_it_is_fully_served() -> None:
    tracked = TrackedStream()
    async with kubelet_client(
        ScriptedLogs(lambda _: tracked.run([b"a\n", b"b\n"], then_wait=False)), [WEB]
    ) as c:
        assert await (await c.get(LOGS)).read() == b"a\nb\n"
        await asyncio.wait_for(tracked.closed.wait(), timeout=5)
