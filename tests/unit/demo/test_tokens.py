"""The token server: completions whole and streamed, bad requests, failure injection, graceful drain."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from vk_devtools.demo import tokens
from vk_devtools.demo.tokens import TokenServerSettings, parse_settings

from . import LOOPBACK, listening_url, serving, start_module, stopped, token_server

COMPLETIONS = "/v1/completions"


def sse_events(raw: bytes) -> list[Any]:
    """The JSON events of a whole SSE body, checking it ends with [DONE] and nothing after."""
    assert raw.endswith(b"data: [DONE]\n\n"), raw[-200:]
    events = raw.split(b"\n\n")[:-2]  # [DONE] and the empty tail after the last separator
    assert all(event.startswith(b"data: ") for event in events)
    return [json.loads(event.removeprefix(b"data: ")) for event in events]


def expected_events(prompt: str, count: int, name: str) -> list[dict[str, Any]]:
    words = tokens.tokens_for(prompt, count)
    return [{"index": index, "token": word, "served_by": name} for index, word in enumerate(words)]


async def poll(probe: Callable[[], Awaitable[object]], expected: object, within: float = 5.0) -> None:
    """Call `probe` until it returns `expected` (a condition on a live server, not a fixed wait)."""
    async with asyncio.timeout(within):
        while await probe() != expected:  # noqa: ASYNC110 - each probe is a new HTTP request
            await asyncio.sleep(0.01)  # a bounded poll of a live server (noqa: sleep-ok)


def test_tokens_depend_only_on_the_prompt_and_the_position() -> None:
    assert tokens.tokens_for("hello", 16) == tokens.tokens_for("hello", 16)
    assert tokens.tokens_for("hello", 16)[:5] == tokens.tokens_for("hello", 5)
    assert tokens.tokens_for("hello", 16) != tokens.tokens_for("goodbye", 16)
    assert set(tokens.tokens_for("hello", 64)) <= set(tokens.VOCABULARY)


async def test_a_completion_returns_the_prompts_words_and_who_served_it() -> None:
    async with token_server(TokenServerSettings(name="alpha")) as url, aiohttp.ClientSession() as session:
        # Unknown fields (model, temperature) are ignored, as OpenAI-style clients send them.
        request = {"prompt": "hello", "max_tokens": 5, "model": "demo", "temperature": 0.2}
        async with session.post(url + COMPLETIONS, json=request) as response:
            assert response.status == 200
            assert response.headers["X-Served-By"] == "alpha"
            body = await response.json()
        assert body == {"text": " ".join(tokens.tokens_for("hello", 5)), "tokens": 5, "served_by": "alpha"}
        async with session.post(url + COMPLETIONS, json={"prompt": "hello"}) as response:
            assert (await response.json())["tokens"] == tokens.DEFAULT_MAX_TOKENS


async def test_a_stream_sends_one_event_per_token_in_order_then_done() -> None:
    settings = TokenServerSettings(name="streamer", token_delay=0.001)
    async with token_server(settings) as url, aiohttp.ClientSession() as session:
        request = {"prompt": "order", "max_tokens": 8, "stream": True}
        async with session.post(url + COMPLETIONS, json=request) as response:
            assert response.status == 200
            assert response.content_type == "text/event-stream"
            assert response.headers["X-Served-By"] == "streamer"
            raw = await response.read()
    assert sse_events(raw) == expected_events("order", 8, "streamer")


async def test_the_first_token_reaches_the_client_long_before_the_last_is_produced() -> None:
    # 200 tokens 50 ms apart take 10 s to produce: a buffered stream could not deliver the first
    # one within 2 s. The client then leaves, which cancels the rest on the server.
    settings = TokenServerSettings(name="flusher", token_delay=0.05)
    async with token_server(settings) as url, aiohttp.ClientSession() as session:
        request = {"prompt": "flush", "max_tokens": 200, "stream": True}
        async with session.post(url + COMPLETIONS, json=request) as response:
            async with asyncio.timeout(2):
                first = await response.content.readline()
            assert json.loads(first.removeprefix(b"data: ")) == expected_events("flush", 1, "flusher")[0]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "the body must be JSON"),
        (b"\xff\xfe", "the body must be JSON"),
        (b"[1, 2]", "the body must be a JSON object"),
        (b'{"max_tokens": 4}', "'prompt' must be a string"),
        (b'{"prompt": 7}', "'prompt' must be a string"),
        (b'{"prompt": "p", "max_tokens": 0}', "'max_tokens' must be between 1 and 4096"),
        (b'{"prompt": "p", "max_tokens": 4097}', "'max_tokens' must be between 1 and 4096"),
        (b'{"prompt": "p", "max_tokens": "5"}', "'max_tokens' must be an integer"),
        (b'{"prompt": "p", "max_tokens": true}', "'max_tokens' must be an integer"),
        (b'{"prompt": "p", "stream": "yes"}', "'stream' must be true or false"),
    ],
)
async def test_a_bad_request_gets_400_with_a_json_error(body: bytes, message: str) -> None:
    async with token_server(TokenServerSettings(name="strict")) as url, aiohttp.ClientSession() as session:
        headers = {"Content-Type": "application/json"}
        async with session.post(url + COMPLETIONS, data=body, headers=headers) as response:
            assert response.status == 400
            assert response.headers["X-Served-By"] == "strict"
            assert await response.json() == {"error": {"type": "invalid_request", "message": message}}


async def _statuses(session: aiohttp.ClientSession, url: str) -> tuple[int, int, int, int]:
    """Status of healthz, of `/`, of a completion and of a streamed completion, in that order."""
    statuses = []
    for method, path, body in [
        ("GET", "/healthz", None),
        ("GET", "/", None),
        ("POST", COMPLETIONS, {"prompt": "p", "max_tokens": 2}),
        ("POST", COMPLETIONS, {"prompt": "p", "max_tokens": 2, "stream": True}),
    ]:
        async with session.request(method, url + path, json=body) as response:
            await response.read()
            statuses.append(response.status)
    return statuses[0], statuses[1], statuses[2], statuses[3]


async def test_the_fail_file_switches_failures_on_and_off_while_the_pod_stays_ready(tmp_path: Path) -> None:
    fail_file = tmp_path / "fail"
    settings = TokenServerSettings(name="flaky", fail_file=fail_file, token_delay=0.001)
    async with token_server(settings) as url, aiohttp.ClientSession() as session:
        assert await _statuses(session, url) == (200, 200, 200, 200)
        fail_file.touch()
        assert await _statuses(session, url) == (200, 500, 500, 500)
        async with session.post(url + COMPLETIONS, json={"prompt": "p"}) as response:
            assert response.headers["X-Served-By"] == "flaky"
            error = (await response.json())["error"]
        assert error == {"type": "injected_failure", "message": f"failure injected: {fail_file} exists"}
        fail_file.unlink()
        assert await _statuses(session, url) == (200, 200, 200, 200)


async def test_a_client_can_provoke_a_500_from_a_healthy_server_and_only_for_its_own_request() -> None:
    settings = TokenServerSettings(name="healthy", token_delay=0.001)
    provoking = {tokens.PROVOKE_ERROR_HEADER: "1"}
    async with token_server(settings) as url, aiohttp.ClientSession() as session:
        async with session.post(url + COMPLETIONS, json={"prompt": "p"}, headers=provoking) as response:
            assert response.status == 500
            assert response.headers["X-Served-By"] == "healthy"
            assert (await response.json())["error"]["type"] == "provoked_failure"
        async with session.get(url + "/", headers=provoking) as response:
            assert response.status == 500
        assert await _statuses(session, url) == (200, 200, 200, 200)  # everyone else is served


async def test_an_error_rate_of_one_fails_every_request_but_healthz() -> None:
    settings = TokenServerSettings(name="broken", error_rate=1.0)
    async with token_server(settings) as url, aiohttp.ClientSession() as session:
        for _ in range(5):
            assert await _statuses(session, url) == (200, 500, 500, 500)


async def test_an_error_rate_fails_about_that_share_of_requests() -> None:
    settings = TokenServerSettings(name="sometimes", error_rate=0.25)
    app = tokens.make_app(settings, rng=random.Random(11))  # noqa: S311 - reproducible draws
    async with serving(app) as url, aiohttp.ClientSession() as session:
        statuses = []
        for _ in range(400):
            async with session.get(url + "/") as response:
                statuses.append(response.status)
    assert set(statuses) == {200, 500}
    assert 70 <= statuses.count(500) <= 130


async def test_every_response_says_who_served_it() -> None:
    async with token_server(TokenServerSettings(name="replica-7")) as url, aiohttp.ClientSession() as session:
        for method, path, status in [
            ("GET", "/healthz", 200),
            ("GET", "/", 200),
            ("GET", "/nowhere", 404),
            ("GET", COMPLETIONS, 405),
            ("POST", COMPLETIONS, 400),
        ]:
            async with session.request(method, url + path) as response:
                assert (response.status, response.headers.get("X-Served-By")) == (status, "replica-7")


def test_the_name_defaults_to_the_hostname() -> None:
    assert TokenServerSettings().name == socket.gethostname()


def test_flags_win_over_environment_variables_which_win_over_defaults() -> None:
    environ = {
        "TOKENS_HOST": "127.0.0.2",
        "TOKENS_PORT": "9001",
        "TOKENS_NAME": "from-env",
        "TOKENS_TOKEN_DELAY": "0.5",
        "TOKENS_FAIL_FILE": "/srv/fail",
        "TOKENS_ERROR_RATE": "0.25",
        "TOKENS_MAX_RUNNING": "4",
    }
    argv = ["--port", "9002", "--error-rate", "0", "--shutdown-grace", "3", "--kv-cache-tokens", "100"]
    settings = parse_settings(argv, environ)
    assert settings == TokenServerSettings(
        name="from-env",
        host="127.0.0.2",
        port=9002,
        token_delay=0.5,
        fail_file=Path("/srv/fail"),
        error_rate=0.0,
        shutdown_grace=3.0,
        max_running=4,
        kv_cache_tokens=100,
    )
    # An empty variable is unset: TOKENS_FAIL_FILE="" must not make "." the fail file.
    assert parse_settings([], {"TOKENS_FAIL_FILE": "", "TOKENS_NAME": ""}) == TokenServerSettings()


@pytest.mark.parametrize(
    ("argv", "environ"),
    [
        (["--error-rate", "1.5"], {}),
        (["--token-delay", "-1"], {}),
        (["--port", "70000"], {}),
        ([], {"TOKENS_PORT": "http"}),
        ([], {"TOKENS_ERROR_RATE": "nan"}),
        (["--max-running", "-1"], {}),
        ([], {"TOKENS_KV_CACHE_TOKENS": "0"}),
    ],
)
def test_invalid_values_exit_with_a_usage_error(argv: list[str], environ: dict[str, str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_settings(argv, environ)
    assert exit_info.value.code == 2


async def _health(url: str) -> int | None:
    """Status of healthz on a new connection, None when the connection is refused."""
    try:
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session,
            session.get(url + "/healthz") as response,
        ):
            return response.status
    except aiohttp.ClientConnectionError:
        return None


async def test_sigterm_drains_readiness_then_lets_a_running_stream_finish() -> None:
    process = await start_module(
        "vk_devtools.demo.tokens",
        *("--host", LOOPBACK, "--port", "0", "--name", "draining"),
        *("--token-delay", "0.05", "--drain-delay", "0.3"),
    )
    try:
        url = await listening_url(process)
        assert await _health(url) == 200
        async with aiohttp.ClientSession() as session:
            request = {"prompt": "drain", "max_tokens": 30, "stream": True}  # about 1.5 s
            async with session.post(url + COMPLETIONS, json=request) as response:
                assert response.status == 200
                first = await response.content.readline()  # the stream is under way
                process.send_signal(signal.SIGTERM)
                await poll(lambda: _health(url), 503)  # readiness drops, still listening
                await poll(lambda: _health(url), None)  # then new connections are refused...
                assert process.returncode is None  # ...while the process waits for the stream
                rest = await response.read()
        assert sse_events(first + rest) == expected_events("drain", 30, "draining")
        _, stderr = await process.communicate()
        assert process.returncode == 0
        log = stderr.decode()
        assert "SIGTERM received" in log
        assert "draining: healthz answers 503, 1 request(s) in flight" in log
        assert "stopped listening; waiting up to 30s for 1 request(s) in flight" in log
        assert log.rstrip().endswith("stopped")
    finally:
        await stopped(process)


async def test_a_stream_longer_than_the_grace_is_cut_off_and_the_exit_is_still_clean() -> None:
    process = await start_module(
        "vk_devtools.demo.tokens",
        *("--host", LOOPBACK, "--port", "0", "--token-delay", "0.05", "--shutdown-grace", "0.2"),
    )
    try:
        url = await listening_url(process)
        async with aiohttp.ClientSession() as session:
            request = {"prompt": "long", "max_tokens": 200, "stream": True}  # about 10 s
            async with session.post(url + COMPLETIONS, json=request) as response:
                await response.content.readline()
                process.send_signal(signal.SIGTERM)
                with pytest.raises(aiohttp.ClientPayloadError):
                    await response.read()
        _, stderr = await process.communicate()
        assert process.returncode == 0
        assert "1 request(s) cut off after the 0.2s grace" in stderr.decode()
    finally:
        await stopped(process)


async def test_an_address_in_use_exits_1_with_a_clear_message() -> None:
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = await start_module("vk_devtools.demo.tokens", "--host", LOOPBACK, "--port", str(port))
        try:
            async with asyncio.timeout(10):
                _, stderr = await process.communicate()
        finally:
            await stopped(process)
    assert process.returncode == 1
    assert f"cannot listen on {LOOPBACK}:{port}: " in stderr.decode()
    assert "address already in use" in stderr.decode().lower()
