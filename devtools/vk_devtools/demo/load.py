"""An open-loop load generator for the zero-failure migration tests and the demo.

Requests start on a fixed schedule (`rate` per second) whatever became of the ones already sent, so a
slow or stuck backend shows up as requests in flight and timeouts, never as a quietly lower offered
load: a closed-loop generator, which waits for answers before sending more, would hide exactly the
stalls a migration must not cause.

A share of the requests stream (SSE completions, checked token by token) and the rest are short.
Each request leaves one `Outcome`; `failures`, `window` and `share_by` slice and count them for the
tests' verdicts, and `python -m vk_devtools.demo.load` prints them live for the demo.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import math
import signal
import sys
import time
from collections.abc import AsyncIterable, Callable, Hashable, Iterable, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar

import aiohttp
from yarl import URL

from vk_devtools.demo.tokens import COMPLETIONS_PATH, SERVED_BY

Kind = Literal["short", "stream"]
ShortRequest = Literal["completion", "root"]
K = TypeVar("K", bound=Hashable)

# Failure categories: short fixed strings, so outcomes can be grouped and counted by them.
CONNECTION_ERROR = "connection error"
TIMEOUT = "timeout"
BROKEN_STREAM = "broken stream"
BROKEN_RESPONSE = "broken response"
TOKENS_OUT_OF_ORDER = "tokens out of order"
WRONG_TOKEN_COUNT = "wrong token count"  # noqa: S105 - a failure category, not a secret
MALFORMED_EVENT = "malformed event"
CANCELLED = "cancelled"

STOP_MARGIN = 1.0
"""Seconds `stop()` waits beyond the request timeout before cancelling what is still running."""


def status_failure(status: int) -> str:
    return f"status {status}"


@dataclasses.dataclass(frozen=True)
class LoadSettings:
    url: str
    """Base URL of the service (the router), e.g. http://127.0.0.1:8080; requests use its scheme,
    host and port, with the paths /v1/completions and /."""
    more_urls: tuple[str, ...] = ()
    """Further base URLs of the same service (router replicas): requests take `url` and these in turn."""
    host_header: str | None = None
    """Host header to send: the router picks the route by it. None sends the URL's host."""
    rate: float = 100.0
    """Requests started per second."""
    stream_share: float = 0.3
    """Share of requests that stream, 0..1; spread evenly over the schedule, not drawn at random."""
    stream_tokens: int = 4
    """max_tokens of every completion, streamed or not."""
    timeout: float = 10.0
    """Seconds one request may take, from sending to its last byte."""
    short_request: ShortRequest = "completion"
    """What a short request is: a non-streamed completion, or `GET /`."""
    prompt: str = "the quick brown fox"
    model: str = "tokens"
    """The body's `model`: OpenAI's API requires it, and an InferencePool's endpoint picker refuses a
    completion without one (400); the token server ignores it."""
    extra_headers: tuple[tuple[str, str], ...] = ()
    """Headers sent with every request besides Host, e.g. one that makes the server fail it."""

    def __post_init__(self) -> None:
        if not self.rate > 0:
            raise ValueError(f"rate {self.rate} must be above 0")
        if not 0 <= self.stream_share <= 1:
            raise ValueError(f"stream share {self.stream_share} is outside 0..1")
        if not 1 <= self.stream_tokens <= 4096:
            raise ValueError(f"stream tokens {self.stream_tokens} is outside 1..4096")
        if not self.timeout > 0:
            raise ValueError(f"timeout {self.timeout} must be above 0")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What became of one request."""

    kind: Kind
    start: float
    """`time.monotonic()` when the request was started."""
    end: float
    status: int | None
    """HTTP status, None when no response arrived."""
    served_by: str | None
    """The response's X-Served-By, None when it had none."""
    failure: str | None
    """None for success, else one of the categories above, `status_failure(code)`, or
    "unexpected <ExceptionName>" for an error none of those describe."""

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def duration(self) -> float:
        return self.end - self.start


def failures(outcomes: Iterable[Outcome]) -> list[Outcome]:
    return [outcome for outcome in outcomes if not outcome.ok]


def window(outcomes: Iterable[Outcome], start: float, end: float) -> list[Outcome]:
    """The outcomes of requests started in [start, end) (monotonic seconds)."""
    return [outcome for outcome in outcomes if start <= outcome.start < end]


def share_by(outcomes: Iterable[Outcome], key: Callable[[str | None], K]) -> collections.Counter[K]:
    """How many outcomes each group served, grouping by `key(served_by)`, e.g. pod name to side."""
    return collections.Counter(key(outcome.served_by) for outcome in outcomes)


def is_stream(index: int, share: float) -> bool:
    """Whether request number `index` streams: spreads `share` evenly (every third or so for 0.3),
    so even a short run has the intended mix."""
    return math.floor((index + 1) * share) > math.floor(index * share)


async def check_sse(lines: AsyncIterable[bytes], expected_tokens: int) -> str | None:
    """Read an SSE completion to its end: None when tokens 0..n-1 came in order and then [DONE]."""
    next_index = 0
    done = False
    async for raw in lines:
        line = raw.rstrip(b"\r\n")
        # Blank lines separate events; comments and other fields carry no token.
        if done or not line.startswith(b"data:"):
            continue
        payload = line[len(b"data:") :].strip()
        if payload == b"[DONE]":
            # Keep reading to the end of the body, so the connection can be reused and a body
            # cut after [DONE] is still noticed (as a payload error).
            done = True
            continue
        try:
            index = json.loads(payload)["index"]
        except (ValueError, TypeError, KeyError):
            return MALFORMED_EVENT
        if index != next_index:
            return TOKENS_OUT_OF_ORDER
        next_index += 1
    if not done:
        return BROKEN_STREAM
    return None if next_index == expected_tokens else WRONG_TOKEN_COUNT


@dataclasses.dataclass
class _Attempt:
    """What is known of one request so far; a failure may come before or after the response head."""

    kind: Kind
    start: float
    status: int | None = None
    served_by: str | None = None


class LoadGenerator:
    """Starts requests on schedule from `start()` until `stop()`, recording one `Outcome` each.

    Also an async context manager (start on entry, stop on exit). `outcomes` is in completion order.
    """

    def __init__(self, settings: LoadSettings) -> None:
        self.settings = settings
        self.outcomes: list[Outcome] = []
        self.issued = 0
        """Requests started so far."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        self._scheduler: asyncio.Task[None] | None = None
        self.set_urls([settings.url, *settings.more_urls])

    def set_urls(self, urls: Sequence[str]) -> None:
        """Send the requests started from now on to `urls`, in turn: what a Service does when its
        endpoints change (a replica replaced). Requests in flight keep the replica they went to."""
        if not urls:
            raise ValueError("the load needs at least one URL")
        bases = [URL(url) for url in urls]
        self._completions_urls = [base.with_path(COMPLETIONS_PATH) for base in bases]
        self._root_urls = [base.with_path("/") for base in bases]

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def start(self) -> None:
        if self._session is not None:
            raise RuntimeError("the load generator was already started")
        headers = {"Host": self.settings.host_header} if self.settings.host_header else {}
        headers.update(self.settings.extra_headers)
        self._session = aiohttp.ClientSession(
            # No connection limit: a limit would queue new requests behind slow ones, which is
            # closed-loop behaviour in disguise.
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=self.settings.timeout),
            headers=headers,
        )
        self._scheduler = asyncio.create_task(self._schedule(self._session), name="load schedule")

    async def stop(self) -> None:
        """Stop starting requests, then wait for those in flight (each is bounded by the timeout)."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.cancel()
            await asyncio.wait([scheduler])
            if not scheduler.cancelled() and (error := scheduler.exception()) is not None:
                raise error
        if self._tasks:
            _, unfinished = await asyncio.wait(set(self._tasks), timeout=self.settings.timeout + STOP_MARGIN)
            for task in unfinished:
                task.cancel()  # each records itself as CANCELLED
            if unfinished:
                await asyncio.wait(unfinished)
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> LoadGenerator:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _schedule(self, session: aiohttp.ClientSession) -> None:
        interval = 1.0 / self.settings.rate
        began = time.monotonic()
        while True:
            # Due times come from the start, not from the last send: a late wake-up is caught up
            # by sending at once, so the count over any stretch matches the rate.
            delay = began + self.issued * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            kind: Kind = "stream" if is_stream(self.issued, self.settings.stream_share) else "short"
            self.issued += 1
            task = asyncio.create_task(self._request(session, kind, self.issued - 1))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _request(self, session: aiohttp.ClientSession, kind: Kind, index: int) -> None:
        attempt = _Attempt(kind, time.monotonic())
        broken = BROKEN_STREAM if kind == "stream" else BROKEN_RESPONSE
        failure: str | None
        try:
            failure = await self._send(session, attempt, index)
        except asyncio.CancelledError:
            self._record(attempt, CANCELLED)
            raise
        except TimeoutError:  # before aiohttp.ClientError: some timeouts are both
            failure = TIMEOUT
        except aiohttp.ClientPayloadError:
            failure = broken
        except aiohttp.ClientError:
            failure = CONNECTION_ERROR if attempt.status is None else broken
        except Exception as error:  # a request must leave an outcome, whatever broke
            failure = f"unexpected {type(error).__name__}"
        self._record(attempt, failure)

    def _body(self, tokens: int) -> dict[str, Any]:
        return {"model": self.settings.model, "prompt": self.settings.prompt, "max_tokens": tokens}

    async def _send(self, session: aiohttp.ClientSession, attempt: _Attempt, index: int) -> str | None:
        tokens = self.settings.stream_tokens
        completions_url = self._completions_urls[index % len(self._completions_urls)]
        if attempt.kind == "stream":
            body = {**self._body(tokens), "stream": True}
            request = session.post(completions_url, json=body)
        elif self.settings.short_request == "completion":
            body = {**self._body(tokens), "stream": False}
            request = session.post(completions_url, json=body)
        else:
            request = session.get(self._root_urls[index % len(self._root_urls)])
        async with request as response:
            attempt.status = response.status
            attempt.served_by = response.headers.get(SERVED_BY)
            if response.status != 200:
                await response.read()
                return status_failure(response.status)
            if attempt.kind == "stream":
                return await check_sse(response.content, tokens)
            await response.read()
            return None

    def _record(self, attempt: _Attempt, failure: str | None) -> None:
        self.outcomes.append(
            Outcome(
                kind=attempt.kind,
                start=attempt.start,
                end=time.monotonic(),
                status=attempt.status,
                served_by=attempt.served_by,
                failure=failure,
            )
        )


def _shares(outcomes: Sequence[Outcome]) -> str:
    counts = share_by((outcome for outcome in outcomes if outcome.ok), lambda served_by: served_by or "?")
    total = sum(counts.values())
    if not total:
        return "-"
    return " ".join(f"{name} {count / total:.0%}" for name, count in sorted(counts.items()))


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def final_summary(outcomes: Sequence[Outcome], issued: int, elapsed: float) -> list[str]:
    failed = failures(outcomes)
    by_reason = collections.Counter(outcome.failure for outcome in failed)
    reasons = ", ".join(f"{reason} x{count}" for reason, count in by_reason.most_common()) or "none"
    counts = share_by((outcome for outcome in outcomes if outcome.ok), lambda served_by: served_by or "?")
    served = ", ".join(f"{name} {count}" for name, count in sorted(counts.items())) or "-"
    lines = [
        f"total: sent {issued} in {elapsed:.1f}s ({issued / elapsed:.0f}/s), done {len(outcomes)}, "
        f"failed {len(failed)} ({reasons})",
        f"served by: {served}",
    ]
    for kind in ("short", "stream"):
        durations = [outcome.duration for outcome in outcomes if outcome.kind == kind and outcome.ok]
        if durations:
            lines.append(
                f"{kind} latency: p50 {_percentile(durations, 0.5) * 1000:.0f} ms, "
                f"p99 {_percentile(durations, 0.99) * 1000:.0f} ms ({len(durations)} ok)"
            )
    return lines


async def _run_cli(settings: LoadSettings, duration: float) -> int:
    interrupted = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, interrupted.set)
    load = LoadGenerator(settings)
    began = time.monotonic()
    async with load:
        reported = issued = 0
        for second in range(1, math.ceil(duration) + 1):
            tick = began + min(second, duration)
            try:
                async with asyncio.timeout(max(0.0, tick - time.monotonic())):
                    await interrupted.wait()
                break  # Ctrl-C: stop early, still print the summary
            except TimeoutError:
                pass
            new = load.outcomes[reported:]
            print(
                f"{second:4d}s  sent {load.issued - issued:4d}  done {len(new):4d}  "
                f"failed {len(failures(new)):3d}  in flight {load.in_flight:3d}  {_shares(new)}",
                flush=True,
            )
            reported, issued = len(load.outcomes), load.issued
        sending = time.monotonic() - began  # the rate is over the sending time, not the drain after it
    for line in final_summary(load.outcomes, load.issued, sending):
        print(line)
    return 1 if failures(load.outcomes) else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vk_devtools.demo.load",
        description="Open-loop load on a tokens service: prints each second, exits 1 if any request failed.",
    )
    parser.add_argument("--url", required=True, help="base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--host", help="Host header to send (the router routes by it)")
    parser.add_argument("--rate", type=float, default=100.0, help="requests started per second")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds to send for")
    parser.add_argument("--stream-share", type=float, default=0.3, help="share of streamed requests, 0..1")
    parser.add_argument("--stream-tokens", type=int, default=4, help="tokens per completion")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds one request may take")
    parser.add_argument("--short", choices=("completion", "root"), default="completion", help="short request")
    args = parser.parse_args(argv)
    if not args.duration > 0:
        parser.error("--duration must be above 0")
    try:
        settings = LoadSettings(
            url=args.url,
            host_header=args.host,
            rate=args.rate,
            stream_share=args.stream_share,
            stream_tokens=args.stream_tokens,
            timeout=args.timeout,
            short_request=args.short,
        )
    except ValueError as invalid:
        parser.error(str(invalid))
    return asyncio.run(_run_cli(settings, args.duration))


if __name__ == "__main__":
    sys.exit(main())
