"""Slow clients against the router: does a slowloris flood starve normal traffic, and how long does it
hold its connections?

The router (`router_runner.py`, one process, one route to a local backend) serves a steady load of
normal requests (`--rate` per second) in three phases of `--seconds` each:

1. `baseline`: the load alone;
2. `attack`: the load while `--slow-clients` connections each send a partial request head and then a
   header line every `--line-every` seconds, opening a new connection whenever the router closes one
   (as slowhttptest's slowloris mode does), against the router as shipped (`--header-timeout` 10 s);
3. `attack-no-deadline`: the same against the peer, the same router started with a header deadline of
   a day, which is how the router behaved before it had one.

For each phase: normal requests sent and failed, their p50 and p99 latency, and the ratio of the p99
to the baseline's; for the attacks, how long the router let a slow connection live (median, max) and
how many were open at the end. Results go to bench/results/slow_clients-<time>.{json,md}.

Run: `.venv/bin/python bench/slow_clients.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from router_runner import BENCH_HOST

from benchkit import (
    BenchError,
    add_results_dir_option,
    free_port,
    markdown_table,
    percentile,
    ratio,
    report_head,
    run_main,
    write_report,
)

RUNNER = Path(__file__).with_name("router_runner.py")
A_DAY = 86_400.0


@contextlib.asynccontextmanager
async def backend() -> AsyncIterator[str]:
    async def answer(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def router(backend_url: str, header_timeout: float) -> AsyncIterator[int]:
    port = free_port()
    argv = [sys.executable, str(RUNNER), "--port", str(port), "--home", backend_url, "--away", backend_url]
    process = await asyncio.create_subprocess_exec(
        *argv,
        "--away-weight",
        "0",
        "--header-timeout",
        str(header_timeout),
        stdout=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    try:
        line = await process.stdout.readline() if process.stdout else b""
        if not line.startswith(b"ready "):
            raise BenchError(f"the router did not start: {line!r}")
        yield port
    finally:
        process.terminate()
        async with asyncio.timeout(10):
            await process.wait()


async def normal_load(port: int, rate: float, seconds: float) -> tuple[list[float], int]:
    """`rate` requests a second for `seconds`, each on its own schedule; (latencies, failures)."""
    latencies: list[float] = []
    failures = 0
    timeout = aiohttp.ClientTimeout(total=10)

    async def one(session: aiohttp.ClientSession) -> None:
        nonlocal failures
        started = time.perf_counter()
        try:
            async with session.get(f"http://127.0.0.1:{port}/", headers={"Host": BENCH_HOST}) as response:
                await response.read()
                if response.status != 200:
                    failures += 1
                    return
        except (aiohttp.ClientError, TimeoutError):
            failures += 1
            return
        latencies.append(time.perf_counter() - started)

    async with aiohttp.ClientSession(timeout=timeout) as session:
        tasks = []
        start = time.monotonic()
        for number in range(int(rate * seconds)):
            delay = start + number / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)  # the load's schedule (noqa: sleep-ok)
            tasks.append(asyncio.create_task(one(session)))
        await asyncio.gather(*tasks)
    return latencies, failures


class Slowloris:
    """`clients` connections dribbling a request head; a closed one is replaced at once."""

    def __init__(self, port: int, clients: int, line_every: float) -> None:
        self.port = port
        self.clients = clients
        self.line_every = line_every
        self.lifetimes: list[float] = []
        self.open = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        await asyncio.gather(*(self._client() for _ in range(self.clients)))

    def stop(self) -> None:
        self._stop.set()

    async def _client(self) -> None:
        while not self._stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.1)  # the router refused: try again shortly (noqa: sleep-ok)
                continue
            opened = time.monotonic()
            self.open += 1
            try:
                writer.write(b"GET / HTTP/1.1\r\nHost: " + BENCH_HOST.encode() + b"\r\n")
                number = 0
                while not self._stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.line_every):
                            await reader.read(65536)
                            break  # the router answered (408) or closed: either ends this one
                    writer.write(b"X-Slow-%d: v\r\n" % number)
                    number += 1
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                self.open -= 1
                if not self._stop.is_set():
                    self.lifetimes.append(time.monotonic() - opened)
                writer.close()


async def phase(
    name: str, backend_url: str, args: argparse.Namespace, *, header_timeout: float, attack: bool
) -> dict[str, Any]:
    async with router(backend_url, header_timeout) as port:
        slow = Slowloris(port, args.slow_clients, args.line_every) if attack else None
        attacking = asyncio.create_task(slow.run()) if slow is not None else None
        if attacking is not None:
            await asyncio.sleep(2.0)  # the flood opens its connections first (noqa: sleep-ok)
        latencies, failures = await normal_load(port, args.rate, args.seconds)
        open_at_end = slow.open if slow is not None else 0
        if slow is not None and attacking is not None:
            slow.stop()
            async with asyncio.timeout(30):
                await attacking
    result: dict[str, Any] = {
        "phase": name,
        "header_timeout_s": header_timeout,
        "requests": len(latencies) + failures,
        "failed": failures,
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }
    if slow is not None:
        lifetimes = slow.lifetimes
        result["slow_connections_closed"] = len(lifetimes)
        result["slow_lifetime_median_s"] = statistics.median(lifetimes) if lifetimes else None
        result["slow_lifetime_max_s"] = max(lifetimes) if lifetimes else None
        result["slow_open_at_end"] = open_at_end
    return result


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    rows = []
    for result in report["phases"]:
        rows.append(
            [
                result["phase"],
                f"{result['header_timeout_s']:g}",
                str(result["requests"]),
                str(result["failed"]),
                f"{result['p50_ms']:.1f}",
                f"{result['p99_ms']:.1f}",
                f"{result['p99_ratio_to_baseline']:.2f}" if result.get("p99_ratio_to_baseline") else "",
                str(result.get("slow_connections_closed", "")),
                f"{result['slow_lifetime_median_s']:.1f}" if result.get("slow_lifetime_median_s") else "",
                str(result.get("slow_open_at_end", "")),
            ]
        )
    lines = [
        f"# Slow clients against the router ({report['started_at']})",
        "",
        f"{report['settings']['slow_clients']} slowloris connections (a header line every "
        f"{report['settings']['line_every_s']:g} s, replaced when closed) during "
        f"{report['settings']['rate']:g} normal requests/s for {report['settings']['seconds']:g} s "
        "per phase.",
        "",
        *markdown_table(
            [
                "phase",
                "header deadline (s)",
                "requests",
                "failed",
                "p50 ms",
                "p99 ms",
                "p99 / baseline",
                "slow connections closed",
                "slow lifetime median (s)",
                "slow open at end",
            ],
            rows,
        ),
        "",
    ]
    path.write_text("\n".join(lines))


async def main(args: argparse.Namespace) -> int:
    started_at = datetime.now(UTC)
    async with backend() as backend_url:
        phases = [
            await phase("baseline", backend_url, args, header_timeout=args.header_timeout, attack=False),
            await phase("attack", backend_url, args, header_timeout=args.header_timeout, attack=True),
            await phase("attack-no-deadline", backend_url, args, header_timeout=A_DAY, attack=True),
        ]
    for result in phases:
        result["p99_ratio_to_baseline"] = ratio(result["p99_ms"], phases[0]["p99_ms"])
    report = report_head("slow_clients", started_at) | {
        "settings": {
            "slow_clients": args.slow_clients,
            "line_every_s": args.line_every,
            "rate": args.rate,
            "seconds": args.seconds,
        },
        "phases": phases,
    }
    json_path, markdown_path = write_report(args.results_dir, report, write_markdown)
    print(markdown_path.read_text())
    print(f"wrote {json_path} and {markdown_path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow-clients", type=int, default=500)
    parser.add_argument("--line-every", type=float, default=5.0, help="seconds between a slow client's lines")
    parser.add_argument("--rate", type=float, default=50.0, help="normal requests per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase's load")
    parser.add_argument("--header-timeout", type=float, default=10.0, help="the shipped router's deadline")
    add_results_dir_option(parser)
    return parser


if __name__ == "__main__":
    sys.exit(run_main(main(build_parser().parse_args()), interrupted="the slow-client benchmark"))
