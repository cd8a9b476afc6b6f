"""An inference-like HTTP server for the demo and the tests: deterministic words instead of a model.

It copies the parts of an LLM server that a migration between home and away has to respect:

- `POST /v1/completions` answers whole or streams one SSE event per token, each flushed as written,
  so a proxy that buffers or a switch that cuts a stream is visible to the client;
- `GET /healthz` (the readiness probe) turns 503 on SIGTERM, and the shutdown lets requests in flight
  (streams included) finish before the process exits, as a well-behaved pod does;
- failures can be switched on while the pod stays Ready (a file that exists, or an error rate): then
  Kubernetes keeps sending traffic, and only the migration's health gates can notice;
- a client can provoke a 500 itself (`PROVOKE_ERROR_HEADER`), as a prompt that crashes a model
  server would: every replica, home or away, answers it alike, which the gates must not take for a
  failing side;
- `--max-running` requests generate at once and the others wait their turn, and `GET /metrics`
  publishes the batch (running, waiting, KV-cache use) under vLLM's names, which an endpoint picker
  reads to choose a replica (`vk_devtools.demo.batch`).

Every response names the replica in `X-Served-By`, so a client can tell which side served it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import random
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler

from vk_devtools.demo.batch import Batch, Generation
from vk_devtools.sse import encode_event, open_event_stream
from vk_provider.runtime.signals import until_signalled

# Not __name__: under `python -m` that is "__main__", which says nothing in a log line.
logger = logging.getLogger("vk_devtools.demo.tokens")

SERVED_BY = "X-Served-By"
PROVOKE_ERROR_HEADER = "X-Provoke-Error"
"""A request carrying this header is answered 500 by every replica: the client's doing, not the side's."""
COMPLETIONS_PATH = "/v1/completions"
MAX_TOKENS_LIMIT = 4096
DEFAULT_MAX_TOKENS = 16
SSE_DONE = encode_event("[DONE]")
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LATE_REQUEST_SETTLE = 0.1
"""Seconds a connection accepted just before the listener closed gets to send its request."""
CLEANUP_TIMEOUT = 1.0
"""Seconds aiohttp's cleanup waits for requests still running once the grace is over, before it
cancels them."""

VOCABULARY = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
    "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey", "xray",
    "yankee", "zulu", "amber", "basalt", "cobalt", "dune", "ember", "fjord",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class TokenServerSettings:
    name: str = dataclasses.field(default_factory=socket.gethostname)
    """The replica's name in `X-Served-By`; the pod's hostname (its name) unless told otherwise."""
    host: str = "0.0.0.0"  # noqa: S104 - in a pod the server must be reachable on the pod IP
    port: int = 8000
    token_delay: float = 0.01
    """Seconds before each streamed token: a stream lasts about max_tokens times this."""
    fail_file: Path | None = None
    """While this file exists, completions and `/` answer 500 (checked on every request)."""
    error_rate: float = 0.0
    """Share of completions and `/` requests that answer 500 at random, 0..1."""
    shutdown_grace: float = 30.0
    """Seconds requests in flight get to finish after the server stops listening."""
    drain_delay: float = 0.0
    """Seconds to keep listening after SIGTERM with healthz at 503, so readiness probes see the
    drop and the endpoint is removed before new connections start being refused."""
    max_running: int = 0
    """Completions generated at once; the others wait their turn (0: no bound)."""
    kv_cache_tokens: int = 8192
    """The KV cache, in tokens: what `vllm:kv_cache_usage_perc` is a share of."""


@dataclasses.dataclass(frozen=True)
class CompletionRequest:
    prompt: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    stream: bool = False


class InvalidRequestError(ValueError):
    """A completion request the server cannot serve; the message is shown to the client."""


class ServerState:
    """What the handlers share and what the shutdown changes; one per application."""

    def __init__(self, settings: TokenServerSettings, rng: random.Random) -> None:
        self.settings = settings
        self.draining = False
        self.batch = Batch(max_running=settings.max_running, kv_cache_tokens=settings.kv_cache_tokens)
        self._rng = rng
        self._handlers: set[asyncio.Task[object]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def in_flight(self) -> int:
        return len(self._handlers)

    def request_started(self, handler: asyncio.Task[object]) -> None:
        self._handlers.add(handler)
        self._idle.clear()

    def request_finished(self, handler: asyncio.Task[object]) -> None:
        self._handlers.discard(handler)
        if not self._handlers:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no request is in flight."""
        await self._idle.wait()

    def cancel_in_flight(self) -> int:
        """Cancel every request still running (their clients see the response cut); how many."""
        for handler in self._handlers:
            handler.cancel()
        return len(self._handlers)

    def failure_reason(self) -> str | None:
        """Why this request must fail by injection, or None to serve it normally."""
        fail_file = self.settings.fail_file
        # A stat per request is cheap and lets the demo flip failures with `touch` and `rm`.
        if fail_file is not None and fail_file.exists():
            return f"failure injected: {fail_file} exists"
        if self.settings.error_rate > 0 and self._rng.random() < self.settings.error_rate:
            return f"failure injected at random (error rate {self.settings.error_rate:g})"
        return None


STATE = web.AppKey("state", ServerState)


def tokens_for(prompt: str, count: int) -> list[str]:
    """`count` words that depend only on the prompt and their position: same prompt, same answer."""
    words = []
    for index in range(count):
        digest = hashlib.sha256(f"{index}\n{prompt}".encode()).digest()
        words.append(VOCABULARY[int.from_bytes(digest[:4], "big") % len(VOCABULARY)])
    return words


def parse_completion_request(body: object) -> CompletionRequest:
    """Check a decoded JSON body. Unknown fields are ignored, as clients send model, temperature..."""
    if not isinstance(body, dict):
        raise InvalidRequestError("the body must be a JSON object")
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise InvalidRequestError("'prompt' must be a string")
    max_tokens = body.get("max_tokens", DEFAULT_MAX_TOKENS)
    # bool is an int in Python, but `"max_tokens": true` is a client bug, not a count.
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise InvalidRequestError("'max_tokens' must be an integer")
    if not 1 <= max_tokens <= MAX_TOKENS_LIMIT:
        raise InvalidRequestError(f"'max_tokens' must be between 1 and {MAX_TOKENS_LIMIT}")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise InvalidRequestError("'stream' must be true or false")
    return CompletionRequest(prompt=prompt, max_tokens=max_tokens, stream=stream)


def error_response(status: int, kind: str, message: str) -> web.Response:
    return web.json_response({"error": {"type": kind, "message": message}}, status=status)


def _injected_failure(request: web.Request) -> web.Response | None:
    if PROVOKE_ERROR_HEADER in request.headers:
        return error_response(500, "provoked_failure", f"the request asked for it ({PROVOKE_ERROR_HEADER})")
    reason = request.app[STATE].failure_reason()
    return None if reason is None else error_response(500, "injected_failure", reason)


async def _healthz(request: web.Request) -> web.Response:
    if request.app[STATE].draining:
        return web.Response(status=503, text="draining")
    return web.Response(text="ok")


async def _index(request: web.Request) -> web.Response:
    failure = _injected_failure(request)
    if failure is not None:
        return failure
    name = request.app[STATE].settings.name
    return web.Response(text=f"tokens server {name}: POST {COMPLETIONS_PATH} for completions\n")


async def _completions(request: web.Request) -> web.StreamResponse:
    failure = _injected_failure(request)
    if failure is not None:
        return failure
    try:
        completion = parse_completion_request(await request.json())
    except InvalidRequestError as invalid:
        return error_response(400, "invalid_request", str(invalid))
    except ValueError:  # not JSON, or not UTF-8
        return error_response(400, "invalid_request", "the body must be JSON")
    state = request.app[STATE]
    tokens = tokens_for(completion.prompt, completion.max_tokens)
    async with state.batch.generation(prompt_tokens=len(completion.prompt.split())) as generation:
        if not completion.stream:
            generation.generated = len(tokens)
            name = state.settings.name
            return web.json_response({"text": " ".join(tokens), "tokens": len(tokens), "served_by": name})
        return await _stream(request, state.settings, tokens, generation)


async def _metrics(request: web.Request) -> web.Response:
    body = request.app[STATE].batch.exposition()
    return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})


async def _stream(
    request: web.Request, settings: TokenServerSettings, tokens: list[str], generation: Generation
) -> web.StreamResponse:
    response = await open_event_stream(request)
    try:
        for index, token in enumerate(tokens):
            await asyncio.sleep(settings.token_delay)
            generation.generated += 1
            event = {"index": index, "token": token, "served_by": settings.name}
            await response.write(encode_event(json.dumps(event)))
        await response.write(SSE_DONE)
        await response.write_eof()
    except ConnectionResetError:
        # The client left mid-stream; nobody is there to tell, and it is not the server's fault.
        logger.debug("client went away during a stream")
    return response


@web.middleware
async def _count_in_flight(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = request.app[STATE]
    # Each request runs in a task of its own (aiohttp's), so the task stands for the request.
    task = asyncio.current_task()
    assert task is not None  # noqa: S101 - a middleware always runs in a task
    state.request_started(task)
    try:
        return await handler(request)
    finally:
        state.request_finished(task)


async def _before_response(request: web.Request, response: web.StreamResponse) -> None:
    # A response signal rather than per handler: errors aiohttp makes itself (404, 405) get it too.
    state = request.app[STATE]
    response.headers[SERVED_BY] = state.settings.name
    if state.draining:
        # `Connection: close` tells pooling clients (the router) to stop reusing connections to a
        # server that is going away: their next request opens a new connection, which is refused
        # once the listener is closed, and a refused connection is safe to retry elsewhere.
        response.force_close()


def make_app(settings: TokenServerSettings, *, rng: random.Random | None = None) -> web.Application:
    """The server as an aiohttp application, for `start` or for running in-process in tests.

    `rng` draws the random failures; tests pass a seeded one. Injected failures are a test device,
    not security, so the standard generator is right.
    """
    app = web.Application(middlewares=[_count_in_flight])
    app[STATE] = ServerState(settings, rng if rng is not None else random.Random())  # noqa: S311
    app.on_response_prepare.append(_before_response)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/", _index)
    app.router.add_get("/metrics", _metrics)
    app.router.add_post(COMPLETIONS_PATH, _completions)
    return app


async def start(app: web.Application, host: str, port: int, *, shutdown_timeout: float) -> web.AppRunner:
    """Serve `app` on host:port (port 0 picks a free one; see `listening_urls`) until the runner's
    `cleanup()`, which waits up to `shutdown_timeout` seconds for requests in flight. Raises OSError
    when the address cannot be bound."""
    # Handler cancellation stops a stream whose client went away instead of generating for nobody.
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError:
        await runner.cleanup()
        raise
    return runner


def listening_urls(runner: web.AppRunner) -> list[str]:
    urls = []
    for address in runner.addresses:
        host, port = address[0], address[1]
        urls.append(f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}")
    return urls


async def serve(settings: TokenServerSettings, stop: asyncio.Event) -> int:
    """Serve until `stop` is set, then drain; the process exit code (1 when it cannot listen)."""
    app = make_app(settings)
    state = app[STATE]
    try:
        runner = await start(app, settings.host, settings.port, shutdown_timeout=CLEANUP_TIMEOUT)
    except OSError as error:
        logger.error("cannot listen on %s:%s: %s", settings.host, settings.port, error)
        return 1
    logger.info(
        "%s serving on %s (token delay %gs, error rate %g, fail file %s)",
        settings.name,
        ", ".join(listening_urls(runner)),
        settings.token_delay,
        settings.error_rate,
        settings.fail_file or "none",
    )
    await stop.wait()
    state.draining = True
    logger.info("draining: healthz answers 503, %d request(s) in flight", state.in_flight)
    if settings.drain_delay > 0:
        await asyncio.sleep(settings.drain_delay)
    for site in list(runner.sites):
        await site.stop()
    logger.info(
        "stopped listening; waiting up to %gs for %d request(s) in flight",
        settings.shutdown_grace,
        state.in_flight,
    )
    await _finish_in_flight(state, settings.shutdown_grace)
    await runner.cleanup()
    logger.info("stopped")
    return 0


async def _finish_in_flight(state: ServerState, grace: float) -> None:
    """Wait, up to `grace` seconds, until requests in flight are done; then only idle connections
    are left for the runner's cleanup to close.

    Not left to cleanup alone: it first closes every connection that has no request running, and
    one accepted just before the listener closed may not have sent its request yet. With aiohttp
    on Python 3.11 that request is then dropped while its connection stays open, so the client hangs
    until the shutdown timeout and gets no answer. Giving such connections a moment to send, then
    waiting for every handler, answers them instead.
    """
    await asyncio.sleep(min(LATE_REQUEST_SETTLE, grace))
    try:
        async with asyncio.timeout(max(0.0, grace - LATE_REQUEST_SETTLE)):
            await state.wait_idle()
    except TimeoutError:
        # Cancelled here rather than by cleanup, whose cancellation does not interrupt a handler
        # that is sleeping between tokens: it would wait its own timeout a second time.
        logger.warning("%d request(s) cut off after the %gs grace", state.cancel_in_flight(), grace)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLEANUP_TIMEOUT):
                await state.wait_idle()


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is outside 0..65535")
    return port


def _seconds(text: str) -> float:
    seconds = float(text)
    if not seconds >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds >= 0")
    return seconds


def _count(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        count = int(text)
        if count < least:
            raise argparse.ArgumentTypeError(f"{text} is less than {least}")
        return count

    return parse


def _fraction(text: str) -> float:
    fraction = float(text)
    if not 0 <= fraction <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction between 0 and 1")
    return fraction


def parse_settings(argv: Sequence[str] | None, environ: Mapping[str, str]) -> TokenServerSettings:
    """Settings from flags, falling back to TOKENS_* variables, then to the defaults. Exits 2 on
    invalid values, as argparse does."""

    def env(name: str) -> str | None:
        # An empty variable counts as unset: TOKENS_FAIL_FILE="" must not mean the file ".".
        return environ.get(f"TOKENS_{name}") or None

    defaults = TokenServerSettings(name="")
    parser = argparse.ArgumentParser(
        prog="python -m vk_devtools.demo.tokens",
        description="An inference-like HTTP server (deterministic words, no model) for the demo. "
        "Each flag falls back to the TOKENS_<FLAG> environment variable, e.g. TOKENS_TOKEN_DELAY.",
    )
    # String defaults go through `type` like typed values, so variables are checked the same way.
    parser.add_argument("--host", default=env("HOST") or defaults.host)
    parser.add_argument("--port", type=_port, default=env("PORT") or str(defaults.port))
    parser.add_argument("--name", default=env("NAME"), help="X-Served-By value (default: the hostname)")
    parser.add_argument(
        "--token-delay", type=_seconds, default=env("TOKEN_DELAY") or str(defaults.token_delay)
    )
    parser.add_argument("--fail-file", type=Path, default=env("FAIL_FILE"))
    parser.add_argument("--error-rate", type=_fraction, default=env("ERROR_RATE") or str(defaults.error_rate))
    parser.add_argument(
        "--shutdown-grace", type=_seconds, default=env("SHUTDOWN_GRACE") or str(defaults.shutdown_grace)
    )
    parser.add_argument(
        "--drain-delay", type=_seconds, default=env("DRAIN_DELAY") or str(defaults.drain_delay)
    )
    parser.add_argument(
        "--max-running",
        type=_count(0),
        default=env("MAX_RUNNING") or str(defaults.max_running),
        help="completions generated at once, the others wait (default: 0, no bound)",
    )
    parser.add_argument(
        "--kv-cache-tokens",
        type=_count(1),
        default=env("KV_CACHE_TOKENS") or str(defaults.kv_cache_tokens),
        help="the KV cache's size in tokens, of which vllm:kv_cache_usage_perc is the share held",
    )
    args = parser.parse_args(argv)
    return TokenServerSettings(
        name=args.name or socket.gethostname(),
        host=args.host,
        port=args.port,
        token_delay=args.token_delay,
        fail_file=args.fail_file,
        error_rate=args.error_rate,
        shutdown_grace=args.shutdown_grace,
        drain_delay=args.drain_delay,
        max_running=args.max_running,
        kv_cache_tokens=args.kv_cache_tokens,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_settings(argv, os.environ)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s tokens %(levelname)s %(message)s"
    )
    return asyncio.run(until_signalled(lambda stop: serve(settings, stop), slow_stop_seconds=None))


if __name__ == "__main__":
    sys.exit(main())
