"""Serve one `vk_provider.router` Router on a port, for bench/router_overhead.py.

The benchmark starts this in its own process, as the real router runs: one Python process, one event
loop, one route. The route matches the host `bench.local`, sends `--away-weight` percent of requests
away, and has the home and away endpoints given on the command line. Nothing here is tuned for the
benchmark: the Router, its balancer, its metrics and its proxy settings are the shipped defaults.

uvloop is used only when it is already importable (it is not a dependency of vk-provider); the line
printed when ready says which loop runs, e.g. `ready port=8080 loop=asyncio pid=1234`.

    .venv/bin/python bench/router_runner.py --port 8080 \
        --home http://127.0.0.1:9001,http://127.0.0.1:9002 \
        --away http://127.0.0.1:9003,http://127.0.0.1:9004

`--profile FILE` runs the server under cProfile and writes its stats to FILE on exit (SIGTERM or
SIGINT); for finding where the time goes, never for the benchmark's numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from benchkit import optional_uvloop
from vk_provider.router import Endpoint, Route, RouteMatch, Router, RouteTable, start
from vk_provider.runtime.signals import until_signalled

BENCH_HOST = "bench.local"  # router_overhead.py sends its requests for this host


def build_table(home: Sequence[str], away: Sequence[str], away_weight: int) -> RouteTable:
    route = Route(
        namespace="bench",
        name="router-overhead",
        generation=1,
        match=RouteMatch(hosts=(BENCH_HOST,)),
        away_weight=away_weight,
        home=tuple(Endpoint(url) for url in home),
        away=tuple(Endpoint(url) for url in away),
    )
    return RouteTable.of([route])


def loop_name() -> str:
    """Install uvloop's event loop when it is importable; the name of the loop that will run."""
    uvloop = optional_uvloop()
    if uvloop is None:
        return "asyncio"
    uvloop.install()
    return f"uvloop {uvloop.__version__}"


async def serve(table: RouteTable, host: str, port: int, loop_label: str, stop: asyncio.Event) -> None:
    server = await start(Router(table), host, port)
    try:
        print(f"ready port={port} loop={loop_label.replace(' ', '-')} pid={os.getpid()}", flush=True)
        await stop.wait()
    finally:
        await server.close()


def urls(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Serve a vk-provider Router with one bench route.")
    parser.add_argument("--host", default="127.0.0.1", help="listen address (%(default)s)")
    parser.add_argument("--port", type=int, required=True, help="listen port")
    parser.add_argument("--home", type=urls, required=True, help="home endpoint URLs, comma-separated")
    parser.add_argument("--away", type=urls, required=True, help="away endpoint URLs, comma-separated")
    parser.add_argument("--away-weight", type=int, default=50, help="percent sent away (%(default)s)")
    parser.add_argument("--profile", type=Path, help="write cProfile stats here on exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    table = build_table(args.home, args.away, args.away_weight)
    label = loop_name()
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(until_signalled(lambda stop: serve(table, args.host, args.port, label, stop)))
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
