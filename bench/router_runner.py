"""Serve one `vk_provider.router` Router on a port, for bench/router_overhead.py.

The benchmark starts this in its own process group, as the real router runs. The route matches the
host `bench.local`, sends `--away-weight` percent of requests away, and has the home and away
endpoints given on the command line; `--routes N` adds N-1 more like it for the hosts
`route-00001.bench.local`... (bench/scale_router.py). Nothing here is tuned for the benchmark: the Router, its
balancer, its metrics and its proxy settings are the shipped defaults.

uvloop's event loop is installed when uvloop is importable, as `vk-provider router` does; the line
printed when ready says which loop runs, e.g. `ready port=8080 loop=uvloop-0.23.0 pid=1234 workers=1`.

    .venv/bin/python bench/router_runner.py --port 8080 \
        --home http://127.0.0.1:9001,http://127.0.0.1:9002 \
        --away http://127.0.0.1:9003,http://127.0.0.1:9004 [--workers 2]

`--workers N` (N > 1) serves the port from N worker processes that share it with SO_REUSEPORT (the
kernel spreads connections over them), each a whole Router on its own event loop:

- `--workers-mode supervisor` (the default): `vk_provider.router.workers.Supervisor`, what
  `vk-provider router --worker-processes N` runs, with this static table as its table source instead of the
  cluster feed: it starts the workers (`python -m vk_provider.router.worker`) and pushes them the
  table (the router's admin listener, which answers status and metrics, is not started here);
- `--workers-mode processes`: N processes of this script with `--reuse-port`, started by this one,
  which then only waits: the same data path without the supervisor, which is off it anyway.

Either way the workers stay in this process's group, so the group's CPU time is the whole router's.
`ready ... workers=N worker_pids=... mode=...` is printed once every worker serves.

`--profile FILE` runs the server under cProfile and writes its stats to FILE on exit (SIGTERM or
SIGINT); for finding where the time goes, never for the benchmark's numbers. One worker only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from benchkit import optional_uvloop
from vk_provider.router import Endpoint, ProxySettings, Route, RouteMatch, Router, RouteTable, start
from vk_provider.router.workerprotocol import WorkerConfig
from vk_provider.router.workers import Supervisor
from vk_provider.runtime.signals import until_signalled

BENCH_HOST = "bench.local"  # router_overhead.py sends its requests for this host
SHUTDOWN_GRACE_SECONDS = 2.0
"""Requests in flight get this long to finish when a supervised router stops (the benchmark's are
done by then)."""
WORKER_STOP_SECONDS = 5.0
"""After a stop signal, how long the workers get to exit on their own (the benchmark signals the
whole group, so they have the signal already) before they are sent SIGTERM, then SIGKILL."""


def other_host(index: int) -> str:
    """The host of the `index`th route besides the bench route (`--routes`), counted from 1."""
    return f"route-{index:05d}.{BENCH_HOST}"


def build_table(home: Sequence[str], away: Sequence[str], away_weight: int, routes: int = 1) -> RouteTable:
    """The bench route for `BENCH_HOST`, and `routes - 1` more like it for `other_host(1..)`, all with
    the same endpoints: a table the size of a cluster's, whichever host a request names."""
    home_endpoints = tuple(Endpoint(url) for url in home)
    away_endpoints = tuple(Endpoint(url) for url in away)
    hosts = [BENCH_HOST, *(other_host(index) for index in range(1, routes))]
    return RouteTable.of(
        Route(
            namespace="bench",
            name="router-overhead" if index == 0 else f"route-{index:05d}",
            generation=1,
            match=RouteMatch(hosts=(host,)),
            away_weight=away_weight,
            home=home_endpoints,
            away=away_endpoints,
        )
        for index, host in enumerate(hosts)
    )


def loop_name() -> str:
    """Install uvloop's event loop when it is importable; the name of the loop that will run."""
    uvloop = optional_uvloop()
    if uvloop is None:
        return "asyncio"
    uvloop.install()
    return f"uvloop {uvloop.__version__}"


async def serve(
    table: RouteTable,
    host: str,
    port: int,
    loop_label: str,
    stop: asyncio.Event,
    *,
    reuse_port: bool,
    settings: ProxySettings,
) -> None:
    server = await start(Router(table, settings=settings), host, port, reuse_port=reuse_port)
    try:
        print(
            f"ready port={port} loop={loop_label.replace(' ', '-')} pid={os.getpid()} workers=1", flush=True
        )
        await stop.wait()
    finally:
        await server.close()


def serve_one(args: argparse.Namespace) -> int:
    table = build_table(args.home, args.away, args.away_weight, args.routes)
    label = loop_name()
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(
                until_signalled(
                    lambda stop: serve(
                        table,
                        args.host,
                        args.port,
                        label,
                        stop,
                        reuse_port=args.reuse_port,
                        settings=ProxySettings(header_timeout=args.header_timeout),
                    )
                )
            )
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
    return 0


class StopRequested(Exception):
    """SIGTERM or SIGINT reached the process that started the workers."""


def on_stop_signal(signum: int, _frame: FrameType | None) -> None:
    raise StopRequested(signal.Signals(signum).name)


def stop_workers(workers: Sequence[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + WORKER_STOP_SECONDS
    for step in (None, signal.SIGTERM, signal.SIGKILL):
        for worker in workers:
            if step is not None and worker.poll() is None:
                worker.send_signal(step)
        for worker in workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=max(0.0, deadline - time.monotonic()))
        if all(worker.poll() is not None for worker in workers):
            return
        deadline = time.monotonic() + WORKER_STOP_SECONDS


def serve_workers(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Start `args.workers` processes of this script with `--reuse-port` on the same port; wait.

    Exits 1 (stopping the others) as soon as a worker exits on its own: the benchmark then sees the
    group's leader gone and reports the log.
    """
    signal.signal(signal.SIGTERM, on_stop_signal)
    signal.signal(signal.SIGINT, on_stop_signal)
    worker_argv = [sys.executable, str(Path(__file__).resolve()), *argv, "--workers", "1", "--reuse-port"]
    workers: list[subprocess.Popen[bytes]] = []
    try:
        labels = []
        for _ in range(args.workers):
            # Same process group as this one (no new session): the benchmark meters and stops the group.
            worker = subprocess.Popen(worker_argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
            workers.append(worker)
            said = worker.stdout.readline() if worker.stdout is not None else b""
            line = said.decode(errors="replace").strip()
            if not line.startswith("ready "):
                print(f"worker {worker.pid} did not start (said {line!r})", file=sys.stderr, flush=True)
                return 1
            labels.append(dict(part.partition("=")[::2] for part in line.split()[1:]).get("loop", "?"))
        print(
            f"ready port={args.port} loop={labels[0]} pid={os.getpid()} workers={args.workers} "
            f"worker_pids={','.join(str(worker.pid) for worker in workers)} mode=reuse-port-processes",
            flush=True,
        )
        pid, status = os.wait()
        print(f"worker {pid} exited (wait status {status}): stopping", file=sys.stderr, flush=True)
        return 1
    except StopRequested:
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop_workers(workers)


async def supervise(
    args: argparse.Namespace, table: RouteTable, loop_label: str, stop: asyncio.Event
) -> None:
    config = WorkerConfig(
        host=args.host,
        port=args.port,
        proxy=ProxySettings(header_timeout=args.header_timeout),
        shutdown_grace=SHUTDOWN_GRACE_SECONDS,
        log_level="WARNING",
    )
    supervisor = Supervisor(config, args.workers)
    supervisor.update(table)
    try:
        await supervisor.start()
        pids = ",".join(str(worker.pid) for worker in supervisor.serving())
        print(
            f"ready port={supervisor.port} loop={loop_label.replace(' ', '-')} pid={os.getpid()} "
            f"workers={args.workers} worker_pids={pids} mode=supervisor",
            flush=True,
        )
        await stop.wait()
    finally:
        await supervisor.stop()


def serve_supervised(args: argparse.Namespace) -> int:
    table = build_table(args.home, args.away, args.away_weight, args.routes)
    label = loop_name()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(until_signalled(lambda stop: supervise(args, table, label, stop)))
    return 0


def urls(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Serve a vk-provider Router with one bench route.")
    parser.add_argument("--host", default="127.0.0.1", help="listen address (%(default)s)")
    parser.add_argument("--port", type=int, required=True, help="listen port")
    parser.add_argument("--home", type=urls, required=True, help="home endpoint URLs, comma-separated")
    parser.add_argument("--away", type=urls, required=True, help="away endpoint URLs, comma-separated")
    parser.add_argument("--away-weight", type=int, default=50, help="percent sent away (%(default)s)")
    parser.add_argument(
        "--routes",
        type=int,
        default=1,
        help="routes in the table: the bench route and ROUTES-1 more for route-NNNNN.bench.local, with "
        "the same endpoints (%(default)s); scale_router.py serves 10 and 1,000",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="worker processes sharing the port (%(default)s)"
    )
    parser.add_argument(
        "--workers-mode",
        choices=("supervisor", "processes"),
        default="supervisor",
        help="how --workers N > 1 runs: under the router's Supervisor, or as N processes of this "
        "script (%(default)s)",
    )
    parser.add_argument(
        "--reuse-port", action="store_true", help="listen with SO_REUSEPORT (set for each of --workers)"
    )
    parser.add_argument("--profile", type=Path, help="write cProfile stats here on exit (one worker only)")
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=ProxySettings().header_timeout,
        help="seconds a request head may take (%(default)s); slow_clients.py sets a huge one for its peer",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.workers < 1:
        raise SystemExit("--workers must be at least 1")
    if args.workers == 1:
        return serve_one(args)
    if args.profile is not None:
        raise SystemExit("--profile runs with one worker only")
    if args.workers_mode == "supervisor":
        return serve_supervised(args)
    return serve_workers(args, argv)


if __name__ == "__main__":
    sys.exit(main())
