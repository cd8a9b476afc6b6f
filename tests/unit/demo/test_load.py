"""The load generator: open-loop rate, the request mix, and each way a request can fail."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from aiohttp import web

from tests.unit.local import closed_port_url, until
from tests.unit.router import served_router
from vk_devtools.demo import load
from vk_devtools.demo.load import LoadGenerator, LoadSettings, Outcome, failures, share_by, window
from vk_devtools.demo.tokens import TokenServerSettings
from vk_provider.router import Endpoint, Route, RouteMatch, Router, RouteTable

from . import serving, start_module, stopped, token_server


def outcome(start: float, served_by: str | None = "a", failure: str | None = None) -> Outcome:
    return Outcome("short", start, start + 0.1, 200, served_by, failure)


def test_failures_window_and_share_by_slice_and_count_outcomes() -> None:
    outcomes = [
        outcome(1.0, "home-1"),
        outcome(1.5, "away-1", load.TIMEOUT),
        outcome(2.0, "home-2"),
        outcome(2.5, None, load.CONNECTION_ERROR),
        outcome(3.0, "away-1"),
    ]
    assert failures(outcomes) == [outcomes[1], outcomes[3]]
    assert window(outcomes, 1.5, 3.0) == outcomes[1:4]  # start included, end excluded
    assert window(outcomes, 5.0, 6.0) == []
    sides = share_by(outcomes, lambda served_by: (served_by or "none").split("-")[0])
    assert sides == {"home": 2, "away": 2, "none": 1}
    assert not outcomes[1].ok
    assert outcomes[0].ok
    assert outcomes[0].duration == pytest.approx(0.1)


def test_the_stream_share_is_spread_evenly_over_the_schedule() -> None:
    kinds = [load.is_stream(index, 0.3) for index in range(100)]
    assert sum(kinds) == 30
    assert all(sum(kinds[start : start + 10]) == 3 for start in range(0, 100, 10))
    assert not any(load.is_stream(index, 0.0) for index in range(100))
    assert all(load.is_stream(index, 1.0) for index in range(100))


@pytest.mark.parametrize(
    "settings",
    [
        {"rate": 0},
        {"stream_share": 1.5},
        {"stream_tokens": 0},
        {"timeout": 0},
    ],
)
def test_invalid_settings_are_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"must be above 0|is outside"):
        LoadSettings(url="http://127.0.0.1:1", **settings)  # type: ignore[arg-type]


def _route(home: str, away: str) -> RouteTable:
    return RouteTable(
        (
            Route(
                namespace="demo",
                name="tokens",
                generation=1,
                match=RouteMatch(hosts=("tokens.demo",)),
                away_weight=50,
                home=(Endpoint(home),),
                away=(Endpoint(away),),
            ),
        )
    )


async def test_the_offered_rate_is_kept_through_the_router_to_two_token_servers() -> None:
    async with (
        token_server(TokenServerSettings(name="home-0", token_delay=0.005)) as home,
        token_server(TokenServerSettings(name="away-0", token_delay=0.005)) as away,
        served_router(Router(_route(home, away))) as router,
    ):
        router_url = f"http://127.0.0.1:{router.port}"
        settings = LoadSettings(url=router_url, host_header="tokens.demo", rate=200, stream_share=0.3)
        generator = LoadGenerator(settings)
        began = time.monotonic()
        await generator.start()
        await until(lambda: generator.issued >= 300)  # 1.5 s at 200/s
        elapsed = time.monotonic() - began
        await generator.stop()
    outcomes = generator.outcomes
    assert 1.35 <= elapsed <= 1.65, elapsed  # within 10% of the schedule: open loop keeps the rate
    assert len(outcomes) == generator.issued
    assert abs(len(outcomes) - 300) <= 30
    assert failures(outcomes) == []
    streams = [outcome for outcome in outcomes if outcome.kind == "stream"]
    assert abs(len(streams) - 0.3 * len(outcomes)) <= 1
    sides = share_by(outcomes, lambda served_by: (served_by or "none").split("-")[0])
    assert set(sides) == {"home", "away"}  # routed by the Host header to both sides
    assert 0.3 <= sides["away"] / len(outcomes) <= 0.7
    assert all(outcome.status == 200 and outcome.start <= outcome.end for outcome in outcomes)


async def test_a_stuck_backend_does_not_lower_the_offered_load() -> None:
    gate = asyncio.Event()

    async def stuck(request: web.Request) -> web.Response:
        await gate.wait()
        return web.Response(text="late", headers={"X-Served-By": "stuck"})

    app = web.Application()
    app.router.add_get("/", stuck)
    async with serving(app) as url:
        generator = LoadGenerator(LoadSettings(url=url, rate=100, stream_share=0, short_request="root"))
        began = time.monotonic()
        async with generator:
            await until(lambda: generator.issued >= 40)
            # A closed-loop client would have waited for answers; this one kept sending on time.
            assert time.monotonic() - began < 0.6
            assert generator.outcomes == []
            assert generator.in_flight == generator.issued
            gate.set()
    assert len(generator.outcomes) == generator.issued
    assert failures(generator.outcomes) == []
    assert {outcome.served_by for outcome in generator.outcomes} == {"stuck"}


async def _outcomes_from(url: str, count: int = 3, **settings: object) -> list[Outcome]:
    """The first `count` outcomes of a load run against `url`."""
    generator = LoadGenerator(LoadSettings(url=url, rate=50, **settings))  # type: ignore[arg-type]
    async with generator:
        await until(lambda: len(generator.outcomes) >= count)
    return generator.outcomes


def _sse_app(events: list[bytes], *, cut: bool) -> web.Application:
    """A server whose streams send `events`, then end cleanly (or have the connection cut)."""

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Served-By": "odd"})
        await response.prepare(request)
        for event in events:
            await response.write(event)
        if cut:
            assert request.transport is not None
            request.transport.close()
        else:
            await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/completions", stream)
    return app


def _event(index: int) -> bytes:
    return f"data: {json.dumps({'index': index, 'token': 'x', 'served_by': 'odd'})}\n\n".encode()


@pytest.mark.parametrize(
    ("events", "cut", "failure"),
    [
        ([_event(0), _event(1)], True, load.BROKEN_STREAM),
        ([_event(0), _event(1)], False, load.BROKEN_STREAM),
        ([_event(0), _event(2), _event(1), b"data: [DONE]\n\n"], False, load.TOKENS_OUT_OF_ORDER),
        ([_event(0), _event(1), b"data: [DONE]\n\n"], False, load.WRONG_TOKEN_COUNT),
        ([_event(0), b"data: {not json\n\n"], False, load.MALFORMED_EVENT),
        ([_event(index) for index in range(3)] + [b": comment\n\ndata: [DONE]\n\n"], False, None),
    ],
    ids=["cut midway", "ended without done", "out of order", "too few", "malformed", "complete"],
)
async def test_each_way_a_stream_can_break_is_told_apart(
    events: list[bytes], cut: bool, failure: str | None
) -> None:
    async with serving(_sse_app(events, cut=cut)) as url:
        outcomes = await _outcomes_from(url, stream_share=1.0, stream_tokens=3)
    assert {(outcome.kind, outcome.status, outcome.served_by, outcome.failure) for outcome in outcomes} == {
        ("stream", 200, "odd", failure)
    }


@pytest.mark.parametrize("short_request", ["completion", "root"])
async def test_a_server_error_is_a_failure_with_its_status(short_request: str) -> None:
    settings = TokenServerSettings(name="failing", error_rate=1.0)
    async with token_server(settings) as url:
        outcomes = await _outcomes_from(url, stream_share=0.5, short_request=short_request)
    assert {(outcome.status, outcome.served_by, outcome.failure) for outcome in outcomes} == {
        (500, "failing", "status 500")
    }
    assert {outcome.kind for outcome in outcomes} == {"short", "stream"}


async def test_a_refused_connection_is_a_connection_error() -> None:
    outcomes = await _outcomes_from(closed_port_url())
    assert {(outcome.status, outcome.served_by, outcome.failure) for outcome in outcomes} == {
        (None, None, load.CONNECTION_ERROR)
    }


async def test_a_request_slower_than_the_timeout_is_a_timeout() -> None:
    async def silent(request: web.Request) -> web.Response:
        await asyncio.Event().wait()  # never answers; cancelled when the client gives up
        raise AssertionError("unreachable")

    app = web.Application()
    app.router.add_get("/", silent)
    async with serving(app, grace=0.1) as url:
        outcomes = await _outcomes_from(url, count=1, short_request="root", stream_share=0, timeout=0.2)
    # Requests kept starting on schedule while the first waited, so there may be more than one.
    assert {(outcome.status, outcome.failure) for outcome in outcomes} == {(None, load.TIMEOUT)}
    assert all(outcome.duration >= 0.2 for outcome in outcomes)


async def _run_cli(*args: str) -> tuple[int, str]:
    process = await start_module("vk_devtools.demo.load", *args)
    try:
        async with asyncio.timeout(15):
            stdout, _ = await process.communicate()
    finally:
        await stopped(process)
    assert process.returncode is not None
    return process.returncode, stdout.decode()


async def test_the_cli_prints_each_second_and_a_summary_and_exits_0_when_all_went_well() -> None:
    async with token_server(TokenServerSettings(name="cli-0", token_delay=0.001)) as url:
        code, output = await _run_cli(
            "--url", url, "--host", "tokens.demo", "--rate", "40", "--duration", "1.5"
        )
    assert code == 0, output
    lines = output.splitlines()
    seconds = [line for line in lines if re.match(r"\s+\d+s ", line)]
    assert len(seconds) == 2, output
    total, served_by, *latencies = lines[len(seconds) :]
    for line in seconds:
        assert re.fullmatch(r"\s+\d+s  sent\s+\d+  done\s+\d+  failed\s+0  in flight\s+\d+  cli-0 100%", line)
    sent = re.fullmatch(r"total: sent (\d+) in [\d.]+s \(\d+/s\), done \1, failed 0 \(none\)", total)
    assert sent is not None, total
    assert abs(int(sent.group(1)) - 60) <= 3
    assert served_by == f"served by: cli-0 {sent.group(1)}"
    assert [line.split(" latency:")[0] for line in latencies] == ["short", "stream"]


async def test_the_cli_exits_1_when_a_request_failed() -> None:
    async with token_server(TokenServerSettings(name="cli-1", error_rate=1.0)) as url:
        code, output = await _run_cli("--url", url, "--rate", "20", "--duration", "0.5", "--short", "root")
    assert code == 1, output
    assert re.search(r"failed (\d+) \(status 500 x\1\)", output), output


async def test_the_cli_refuses_invalid_settings() -> None:
    code, _ = await _run_cli("--url", "http://127.0.0.1:1", "--stream-share", "2")
    assert code == 2


async def test_stop_without_start_and_a_second_start_are_handled() -> None:
    generator = LoadGenerator(LoadSettings(url=closed_port_url()))
    await generator.stop()  # nothing to stop
    async with generator:
        with pytest.raises(RuntimeError, match="already started"):
            await generator.start()


async def test_requests_still_running_at_stop_are_waited_for() -> None:
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="done")

    app = web.Application()
    app.router.add_get("/", slow)
    async with serving(app) as url:
        generator = LoadGenerator(LoadSettings(url=url, rate=100, short_request="root", stream_share=0))
        await generator.start()
        await until(lambda: generator.issued >= 3)
        stopping = asyncio.create_task(generator.stop())
        await asyncio.sleep(0)  # one turn of the loop: stop() has begun and stopped the schedule
        assert generator.outcomes == []
        release.set()
        await stopping
    # Every request started was answered, none cut short: stop() waited for them.
    assert len(generator.outcomes) == generator.issued >= 3
    assert failures(generator.outcomes) == []


async def test_the_host_header_is_sent() -> None:
    hosts: list[str] = []

    async def record(request: web.Request) -> web.Response:
        hosts.append(request.host)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", record)
    async with serving(app) as url:
        await _outcomes_from(url, count=2, short_request="root", stream_share=0, host_header="chat.example")
    assert set(hosts) == {"chat.example"}


async def test_requests_take_the_urls_in_turn() -> None:
    def answering(name: str) -> web.Application:
        async def root(request: web.Request) -> web.Response:
            return web.Response(text=name, headers={"X-Served-By": name})

        app = web.Application()
        app.router.add_get("/", root)
        return app

    async with serving(answering("first")) as first, serving(answering("second")) as second:
        generator = LoadGenerator(
            LoadSettings(url=first, more_urls=(second,), rate=100, stream_share=0, short_request="root")
        )
        async with generator:
            await until(lambda: len(generator.outcomes) >= 20)
    assert failures(generator.outcomes) == []
    served = share_by(generator.outcomes, lambda name: name)
    assert set(served) == {"first", "second"}
    assert abs(served["first"] - served["second"]) <= 2, served
