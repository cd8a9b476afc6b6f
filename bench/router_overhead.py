"""Router overhead benchmark: what our traffic router costs per request, next to nginx doing the same job.

Why: every request of an offloaded model passes through `vk_provider.router` (an aiohttp reverse
proxy in one Python process), which picks home or away by weight and streams the answer back. The
issue's target is that the router adds at most 2 ms to p99 latency at 500 requests/s; nginx, the
usual answer to "just put a proxy in front", is the peer it is measured against.

One run, on this machine, with the same load tools for every path:

- backends: one nginx instance (its own prefix and config in a temporary folder, `return 200` with a
  small body and an `X-Backend` header naming the endpoint) listening on four loopback ports, which
  act as the endpoints home-0, home-1, away-0 and away-1;
- paths measured:
  (a) `direct`: straight to home-0, the floor every proxy adds to;
  (b) `router`: our Router (bench/router_runner.py, a separate process), one route for the host
      `bench.local`, away weight 50, home-0/home-1 at home and away-0/away-1 away, everything else
      as shipped;
  (c) `nginx-1w`: nginx as the equivalent weighted proxy, one worker process like our one process:
      `split_clients` on `$request_id` picks the home or away upstream group 50/50 per request,
      `least_conn` within a group, keepalive to the upstreams, `proxy_buffering off` and
      `proxy_request_buffering off` so it streams like ours;
  (c') `nginx-auto`: the same with `worker_processes auto` (one worker per CPU), a second row;
- metrics:
  1. maximum throughput with wrk (closed loop, `wrk -t2 -c64 -d10s --latency`), and the CPU time
     each proxy spent per request while doing it (from /proc, over the proxy's process group);
  2. latency at a fixed offered rate of 500 requests/s from an open-loop client written here (raw
     asyncio streams over kept-alive HTTP/1.1 connections; a request is sent at its scheduled time
     whether or not earlier ones have answered, on a new connection when none is idle): p50 and p99
     per path, and the latency (b) and (c) add over (a); in rounds that interleave the paths, so
     that a burst of other work on the machine does not land on one path only;
  3. a sanity check that (b) and (c) really split home/away about 50/50 (the `X-Backend` header of
     every answer in the latency runs is counted).

Everything (wrk or the latency client, the proxy under test and the backends) shares this machine's
CPUs, so the numbers compare the paths in the same run; they are not capacity figures. The machine
may also be running other work: the run measures it before each measurement (waiting a little for
it to calm down), measures the CPU its own processes were not charged for during each latency round,
does a round again when that was high (a few times at most), and reports all of it.

Usage (see bench/README.md):

    apt-get install -y nginx-light wrk     # once; the script only checks and says so
    .venv/bin/python bench/router_overhead.py [--quick]

Results go to bench/results/router_overhead-<UTC time>.{json,md}. Every process this starts (the
nginx instances, the router, wrk) runs in its own process group and is stopped on exit, on error and
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
from typing import Any, NoReturn

from benchkit import (
    BENCH_DIR,
    REPO_DIR,
    BenchError,
    add_results_dir_option,
    cell,
    describe_machine,
    free_port,
    optional_uvloop,
    percentile,
    ratio,
    report_head,
    run_main,
    run_text,
    tail,
    write_report,
)
from vk_provider.kit import procfs

RUNNER = BENCH_DIR / "router_runner.py"
INSTALL_COMMAND = "apt-get install -y nginx-light wrk"

BENCH_HOST = "bench.local"  # the host of router_runner.py's one route (its BENCH_HOST)
BACKEND_HEADER = "X-Backend"
ENDPOINTS = ("home-0", "home-1", "away-0", "away-1")
AWAY_WEIGHT = 50
TARGET_ADDED_P99_MS = 2.0
TARGET_TEXT = "p99 added latency <= 2 ms at 500 requests/s"

STARTUP_TIMEOUT_SECONDS = 20.0
STOP_GRACE_SECONDS = 5.0
TOOL_TIMEOUT_SECONDS = 30.0
"""For the short commands run to completion: versions, `nginx -t`, git."""
LOG_TAIL_LINES = 20
REQUEST_TIMEOUT_SECONDS = 5.0
PREOPENED_CONNECTIONS = 8
QUIET_WAIT_SECONDS = 5.0
QUIET_TOTAL_WAIT_SECONDS = 30.0
QUIET_SAMPLE_SECONDS = 0.5
REDO_BUDGET = 4
REDOS_PER_MEASUREMENT = 2
SPLIT_TOLERANCE = 0.05
"""Away share accepted by the sanity check: 0.50 +/- this (about 7 standard deviations at 10k requests)."""


@dataclasses.dataclass(frozen=True)
class Target:
    """One path under test: where the load goes, and the process group that does the proxying."""

    key: str
    label: str
    port: int
    proxy: str | None
    """Name of the process (in `Processes`) whose CPU is the proxy's, None for the direct path."""


@dataclasses.dataclass(frozen=True)
class Settings:
    quick: bool
    wrk_threads: int
    wrk_connections: int
    throughput_seconds: int
    throughput_warmup_seconds: int
    rate: float
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

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        quick = bool(args.quick)
        return cls(
            quick=quick,
            wrk_threads=args.wrk_threads,
            wrk_connections=args.wrk_connections,
            throughput_seconds=args.throughput_seconds or (3 if quick else 10),
            throughput_warmup_seconds=1 if quick else 2,
            rate=args.rate,
            latency_seconds=args.latency_seconds or (5.0 if quick else 8.0),
            latency_warmup_seconds=1.0,
            latency_rounds=args.latency_rounds or (1 if quick else 4),
            quiet_cores=args.quiet_cores,
            quiet_wait_seconds=0.0 if quick else QUIET_WAIT_SECONDS,
            noisy_cores=args.noisy_cores,
            redo_budget=0 if quick else REDO_BUDGET,
        )

    def wrk_command(self, seconds: int) -> str:
        return (
            f"wrk -t{self.wrk_threads} -c{self.wrk_connections} -d{seconds}s --latency "
            f'--timeout {REQUEST_TIMEOUT_SECONDS:.0f}s -H "Host: {BENCH_HOST}" http://127.0.0.1:PORT/'
        )


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
    import aiohttp  # noqa: PLC0415 - only for its version and whether its C parser is in use
    from aiohttp import http_parser  # noqa: PLC0415

    from vk_provider import __version__  # noqa: PLC0415

    uvloop = optional_uvloop()
    return {
        "vk-provider": __version__,
        "python": platform.python_version(),
        "aiohttp": aiohttp.__version__,
        "aiohttp_c_parser": http_parser.HttpRequestParser.__module__ == "aiohttp._http_parser",
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

    def stop_all(self) -> None:
        for name in reversed(list(self.started)):
            stop_group(self.started.pop(name))

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


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of every live process in a process group (from /proc/<pid>/stat)."""
    ticks = 0
    for fields in group_stat_fields(pgid):
        with contextlib.suppress(IndexError, ValueError):
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


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


async def read_reply(reader: asyncio.StreamReader) -> Reply:
    """One response: its status, its X-Backend header, and whether the connection stays open."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length: int | None = None
    chunked = False
    backend = ""
    keep_alive = True
    for line in lines[1:]:
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
    sent: float
    done: float
    status: int
    backend: str
    error: str = ""


class OpenLoopClient:
    """Sends GET / at a fixed rate, each at its scheduled time, whatever earlier requests are doing.

    Idle kept-alive connections are reused; when none is idle a new one is opened (its connect time
    is part of that request's latency, and `opened` counts them). Latency is measured from the moment
    the request is started (`sent`) to the last byte of its answer; `intended` keeps the scheduled
    time too, so the client's own lateness is visible.
    """

    def __init__(self, port: int, host: str = BENCH_HOST) -> None:
        self.port = port
        self.request = request_bytes(host)
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.opened = 0
        self.all_writers: list[asyncio.StreamWriter] = []

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.opened += 1
        self.all_writers.append(writer)
        return reader, writer

    async def preopen(self, count: int) -> None:
        for _ in range(count):
            self.idle.append(await self._connect())
        self.opened = 0

    async def _one(self, intended: float) -> Sample:
        sent = time.perf_counter()
        connection = None
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                connection = self.idle.pop() if self.idle else await self._connect()
                connection[1].write(self.request)
                reply = await read_reply(connection[0])
        except (
            OSError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            TimeoutError,
            ValueError,
        ) as error:
            if connection is not None:
                connection[1].close()
            return Sample(intended, sent, time.perf_counter(), 0, "", f"{type(error).__name__}: {error}")
        done = time.perf_counter()
        if reply.keep_alive:
            self.idle.append(connection)
        else:
            connection[1].close()
        return Sample(intended, sent, done, reply.status, reply.backend)

    async def run(self, rate: float, seconds: float) -> list[Sample]:
        count = max(1, round(rate * seconds))
        interval = 1.0 / rate
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[Sample]] = []
        start = time.perf_counter() + 0.01
        for index in range(count):
            intended = start + index * interval
            delay = intended - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(loop.create_task(self._one(intended)))
        return list(await asyncio.gather(*tasks))

    async def close(self) -> None:
        for writer in self.all_writers:
            writer.close()
        for writer in self.all_writers:
            with contextlib.suppress(OSError):
                await writer.wait_closed()


# --- statistics -----------------------------------------------------------------------------------


def latency_summary(samples: Sequence[Sample]) -> dict[str, Any]:
    ok = [sample for sample in samples if not sample.error and 200 <= sample.status < 300]
    latencies = [(sample.done - sample.sent) * 1000.0 for sample in ok]
    from_intended = [(sample.done - sample.intended) * 1000.0 for sample in ok]
    lateness = [max(0.0, sample.sent - sample.intended) * 1000.0 for sample in samples]
    span = samples[-1].sent - samples[0].sent if len(samples) > 1 else math.nan
    return {
        "requests": len(samples),
        "ok": len(ok),
        "errors": len(samples) - len(ok),
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
        spent = {name: group_cpu_seconds(pgid) for name, pgid in self.groups.items()}
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
    settings: Settings, target: Target, processes: Processes, warmup: float, gate: QuietGate
) -> tuple[list[Sample], dict[str, Any]]:
    client = OpenLoopClient(target.port)
    await client.preopen(PREOPENED_CONNECTIONS)
    try:
        quiet = await gate.wait()
        if warmup > 0:
            await client.run(settings.rate, warmup)
        groups = {"backend": processes.pgid("backend")}
        if target.proxy is not None:
            groups["proxy"] = processes.pgid(target.proxy)
        opened_before = client.opened
        gc.collect()
        gc.disable()  # the client's own pauses would land in every path's tail
        try:
            meter = CpuMeter(groups)
            samples = await client.run(settings.rate, settings.latency_seconds)
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


async def start_everything(
    tools: dict[str, str], folder: Path, processes: Processes, profile: Path | None
) -> tuple[list[Target], dict[str, Any]]:
    ports = {name: free_port() for name in ENDPOINTS}
    argv = write_nginx(tools["nginx"], folder, "backend", backend_config(folder, ports))
    processes.start("backend", argv, folder / "backend.out", folder)
    for name, port in ports.items():
        await wait_ready(processes, "backend", port, expect_backend=name)

    def url(name: str) -> str:
        return f"http://127.0.0.1:{ports[name]}"

    router_port = free_port()
    router_argv = [
        sys.executable,
        str(RUNNER),
        "--port",
        str(router_port),
        "--home",
        ",".join(url(name) for name in ENDPOINTS if name.startswith("home")),
        "--away",
        ",".join(url(name) for name in ENDPOINTS if name.startswith("away")),
        "--away-weight",
        str(AWAY_WEIGHT),
    ]
    if profile is not None:
        router_argv += ["--profile", str(profile)]
    processes.start("router", router_argv, folder / "router.log", REPO_DIR)
    await wait_ready(processes, "router", router_port)
    ready = re.search(r"ready port=\d+ loop=(\S+)", (folder / "router.log").read_text())
    router_loop = ready.group(1) if ready else "?"

    nginx_ports = {}
    for name, workers in (("nginx-1w", "1"), ("nginx-auto", "auto")):
        nginx_ports[name] = free_port()
        config = proxy_config(folder, name, workers, nginx_ports[name], ports)
        argv = write_nginx(tools["nginx"], folder, name, config)
        processes.start(name, argv, folder / f"{name}.out", folder)
        await wait_ready(processes, name, nginx_ports[name])
    # A request for another host is not routed: a quick check that both proxies route by Host.
    for name, port in (("router", router_port), *nginx_ports.items()):
        reply = await fetch_once(port, host="other.local")
        if reply.status != 404:
            raise BenchError(f"{name} answered {reply.status} for an unrouted host, expected 404")

    # Processes per group, master included: says how many workers `auto` gave.
    group_sizes = {name: count_group(processes.pgid(name)) for name in ("backend", "router", *nginx_ports)}
    targets = [
        Target("direct", "(a) direct to a backend", ports["home-0"], None),
        Target("router", "(b) vk-provider Router, 1 process", router_port, "router"),
        Target("nginx-1w", "(c) nginx proxy, 1 worker", nginx_ports["nginx-1w"], "nginx-1w"),
        Target("nginx-auto", "(c') nginx proxy, workers auto", nginx_ports["nginx-auto"], "nginx-auto"),
    ]
    setup = {
        "backend_ports": ports,
        "router_loop": router_loop,
        "router_command": " ".join(router_argv),
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
    throughput: dict[str, Any] = {}
    gate = QuietGate(settings, processes)
    redos = Redos(settings)
    for target in targets:
        print(f"\n== max throughput: {target.label} ({target.key}, port {target.port}) ==", flush=True)
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
        throughput[target.key] = entry

    pooled: dict[str, list[Sample]] = {target.key: [] for target in targets}
    rounds: dict[str, list[dict[str, Any]]] = {target.key: [] for target in targets}
    redone: dict[str, list[dict[str, Any]]] = {target.key: [] for target in targets}
    for number in range(settings.latency_rounds):
        for target in targets:
            print(
                f"\n== {settings.rate:.0f} requests/s for {settings.latency_seconds:.0f} s "
                f"(round {number + 1}/{settings.latency_rounds}): {target.label} ==",
                flush=True,
            )
            warmup = settings.latency_warmup_seconds * (2 if number == 0 else 1)
            repeats = 0
            while True:
                samples, extra = await measure_latency(settings, target, processes, warmup, gate)
                summary = {**latency_summary(samples), **extra}
                other = extra["cpu"]["other"]["cores"]
                print(
                    f"   p50 {summary['p50_ms']:.3f} ms, p99 {summary['p99_ms']:.3f} ms, "
                    f"achieved {summary['achieved_rps']:.0f} requests/s, errors {summary['errors']}, "
                    f"new connections {extra['connections_opened']}; other work before "
                    f"{extra['before']['background_cores']:.2f} cores, during {other:.2f}",
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
        achieved = [item["achieved_rps"] for item in rounds[target.key]]
        entry["achieved_rps"] = sum(achieved) / len(achieved)
        entry["median_round_p50_ms"] = statistics.median(item["p50_ms"] for item in rounds[target.key])
        entry["median_round_p99_ms"] = statistics.median(item["p99_ms"] for item in rounds[target.key])
        entry["split"] = split_summary(pooled[target.key])
        entry["rounds"] = rounds[target.key]
        entry["redone_rounds"] = redone[target.key]
        latency[target.key] = entry
    return throughput, latency


def derived(throughput: dict[str, Any], latency: dict[str, Any]) -> dict[str, Any]:
    """Added latency over the direct path, the ratios against nginx, and the issue's target."""
    direct = latency["direct"]
    added = {
        key: {
            "p50_ms": entry["p50_ms"] - direct["p50_ms"],
            "p99_ms": entry["p99_ms"] - direct["p99_ms"],
            "median_round_p99_ms": entry["median_round_p99_ms"] - direct["median_round_p99_ms"],
            "from_intended_p99_ms": entry["from_intended_p99_ms"] - direct["from_intended_p99_ms"],
        }
        for key, entry in latency.items()
        if key != "direct"
    }

    def cpu_per_request(key: str) -> float | None:
        value = throughput[key]["cpu"].get("proxy", {}).get("cpu_us_per_request")
        return value if isinstance(value, float) else None

    ours_added = added["router"]["p99_ms"]
    ours_added_median = added["router"]["median_round_p99_ms"]
    ratios = {
        f"{name}_router_vs_{peer}": value
        for peer in ("nginx-1w", "nginx-auto")
        for name, value in (
            ("throughput", ratio(throughput["router"]["rps"], throughput[peer]["rps"])),
            ("added_p99", ratio(ours_added, added[peer]["p99_ms"])),
            (
                "added_median_round_p99",
                ratio(ours_added_median, added[peer]["median_round_p99_ms"]),
            ),
            ("cpu_per_request", ratio(cpu_per_request("router"), cpu_per_request(peer))),
        )
    }
    return {
        "added_latency": added,
        "ratios": ratios,
        "target": {
            "text": TARGET_TEXT,
            "router_added_p99_ms": ours_added,
            "router_added_median_round_p99_ms": ours_added_median,
            "limit_ms": TARGET_ADDED_P99_MS,
            "met": bool(ours_added <= TARGET_ADDED_P99_MS),
            "met_on_median_of_rounds": bool(ours_added_median <= TARGET_ADDED_P99_MS),
        },
    }


def sanity_checks(settings: Settings, throughput: dict[str, Any], latency: dict[str, Any]) -> list[str]:
    """What makes this run's comparison doubtful; empty when all is well."""
    problems = []
    for key, entry in throughput.items():
        if entry["non_2xx_3xx"]:
            problems.append(f"{key}: {entry['non_2xx_3xx']} non-2xx/3xx answers under wrk")
        if any(entry["socket_errors"].values()):
            problems.append(f"{key}: wrk socket errors {entry['socket_errors']}")
    for key, entry in latency.items():
        if entry["errors"]:
            problems.append(f"{key}: {entry['errors']} failed requests at the fixed rate")
        if entry["achieved_rps"] < 0.95 * settings.rate:
            problems.append(f"{key}: the client achieved only {entry['achieved_rps']:.0f} requests/s")
        share = entry["split"]["away_share"]
        if key != "direct" and not abs(share - AWAY_WEIGHT / 100) <= SPLIT_TOLERANCE:
            problems.append(
                f"{key}: away share {share:.3f}, expected {AWAY_WEIGHT / 100:.2f} +/- {SPLIT_TOLERANCE}"
            )
    return problems


# --- results --------------------------------------------------------------------------------------


def throughput_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    direct_rps = report["throughput"]["direct"]["rps"]
    for target in report["targets"]:
        entry = report["throughput"][target["key"]]
        proxy = entry["cpu"].get("proxy", {})
        rows.append(
            [
                target["label"],
                cell(entry["rps"], "{:,.0f}"),
                cell(entry["rps"] / direct_rps, "{:.2f}"),
                cell(entry["latency_ms"].get("p50"), "{:.2f}"),
                cell(entry["latency_ms"].get("p99"), "{:.2f}"),
                cell(proxy.get("cores"), "{:.2f}"),
                cell(proxy.get("cpu_us_per_request"), "{:.0f}"),
                cell(entry["cpu"]["backend"]["cores"], "{:.2f}"),
                cell(entry["cpu"]["machine"]["cores"], "{:.2f}"),
                cell(entry["cpu"]["other"]["cores"], "{:.2f}") + ("*" if entry["noisy"] else ""),
            ]
        )
    return rows


def latency_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for target in report["targets"]:
        key = target["key"]
        entry = report["latency"][key]
        added = report["derived"]["added_latency"].get(key, {})
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
                cell(entry["achieved_rps"], "{:.0f}"),
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
    "proxy CPU us/req",
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
    "achieved rps",
    "away share",
]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    align = ["---", *["---:" for _ in header[1:]]]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(row[index])) for row in [header, *rows]) for index in range(len(header))]
    return [
        "  ".join(
            str(value).ljust(widths[index]) if index == 0 else str(value).rjust(widths[index])
            for index, value in enumerate(row)
        )
        for row in [header, *rows]
    ]


def ratio_lines(report: dict[str, Any]) -> list[str]:
    ratios = report["derived"]["ratios"]
    target = report["derived"]["target"]
    return [
        f"throughput, ours / nginx (1 worker): {cell(ratios['throughput_router_vs_nginx-1w'], '{:.2f}')}"
        f"  (ours / nginx workers auto: {cell(ratios['throughput_router_vs_nginx-auto'], '{:.2f}')})",
        f"added p99 at {report['settings']['rate_rps']:.0f} rps, ours / nginx (1 worker): "
        f"{cell(ratios['added_p99_router_vs_nginx-1w'], '{:.2f}')}"
        f"  (ours / nginx workers auto: {cell(ratios['added_p99_router_vs_nginx-auto'], '{:.2f}')}); "
        "on the median of the rounds' p99s: "
        f"{cell(ratios['added_median_round_p99_router_vs_nginx-1w'], '{:.2f}')}"
        f" (workers auto: {cell(ratios['added_median_round_p99_router_vs_nginx-auto'], '{:.2f}')})",
        f"CPU per request at max load, ours / nginx (1 worker): "
        f"{cell(ratios['cpu_per_request_router_vs_nginx-1w'], '{:.1f}')}",
        f"target: {target['text']}: ours adds {target['router_added_p99_ms']:.3f} ms (pooled p99) -> "
        + ("MET" if target["met"] else "NOT MET")
        + "; on the median of the rounds' p99s it adds "
        + f"{target['router_added_median_round_p99_ms']:.3f} ms -> "
        + ("MET" if target["met_on_median_of_rounds"] else "NOT MET"),
    ]


def conditions_text(report: dict[str, Any]) -> list[str]:
    """How busy the machine was with other work around each measurement."""
    before = [entry["before"]["background_cores"] for entry in report["throughput"].values()]
    waited = [entry["before"]["waited_s"] for entry in report["throughput"].values()]
    other = []
    for entry in report["latency"].values():
        for item in entry["rounds"]:
            before.append(item["before"]["background_cores"])
            waited.append(item["before"]["waited_s"])
            other.append(item["cpu"]["other"]["cores"])
    load = report.get("load_average_at_start", [])
    redone = sum(len(entry["redone_rounds"]) for entry in report["latency"].values())
    redone += sum(len(entry["redone"]) for entry in report["throughput"].values())
    noisy = sum(item["noisy"] for entry in report["latency"].values() for item in entry["rounds"])
    noisy += sum(entry["noisy"] for entry in report["throughput"].values())
    return [
        "Other work on the machine (all CPU less this run's own processes), measured over 0.5 s "
        f"before each measurement while this run sent nothing: median {statistics.median(before):.2f} "
        f"cores, max {max(before):.2f}"
        + (
            f" (the run waited up to {report['settings']['quiet_wait_s']:.0f} s per measurement for it "
            f"to drop below {report['settings']['quiet_cores']:.2f}; {sum(waited):.0f} s in all). "
            if report["settings"]["quiet_wait_s"] > 0
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
            f"{report['settings']['noisy_cores']:.2f} cores was done again (at most "
            + (
                f"{report['settings']['redos_per_measurement']} times each, "
                if "redos_per_measurement" in report["settings"]
                else ""
            )
            + f"{report['settings']['redo_budget']} times a run): "
            f"{redone} redone, {noisy} kept although "
            "noisy (marked *); the redone ones' numbers are in the JSON."
            if report["settings"]["redo_budget"]
            else ""
        ),
    ]


def round_rows(report: dict[str, Any]) -> list[list[str]]:
    """Per path, each latency round's p99 with the CPU other work took during it."""
    return [
        [
            target["label"],
            *(
                f"{cell(item['p99_ms'], '{:.2f}')} ms ({item['cpu']['other']['cores']:.2f})"
                + ("*" if item["noisy"] else "")
                for item in report["latency"][target["key"]]["rounds"]
            ),
        ]
        for target in report["targets"]
    ]


def bound_text(report: dict[str, Any]) -> list[str]:
    """What limits the router's throughput, from this run's own numbers."""
    router = report["throughput"]["router"]
    nginx = report["throughput"]["nginx-1w"]
    ours = router["cpu"]["proxy"]
    theirs = nginx["cpu"]["proxy"]
    machine = router["cpu"]["machine"]["cores"]
    cpus = report["machine"]["cpus"]
    if ours["cores"] >= 0.85:
        state = "its one core was saturated: the router is CPU-bound"
    else:
        state = (
            f"short of a full core because it shared the {cpus} cores with wrk, the backends, the "
            f"kernel's loopback work and whatever else ran ({machine:.2f} of {cpus} cores were busy)"
        )
    return [
        f"At maximum load the router process used {ours['cores']:.2f} of a core, {state}. It spent "
        f"{ours['cpu_us_per_request']:.0f} us of CPU per request; nginx with one worker spent "
        f"{theirs['cpu_us_per_request']:.0f} us, with its worker {theirs['cores']:.2f} busy while the "
        f"machine was {nginx['cpu']['machine']['cores']:.2f} of {cpus} cores busy (wrk and the backends "
        "need as much CPU as nginx does, so its throughput here is a share of 2 cores, not what one "
        "worker can do: CPU per request is the fairer comparison). The router "
        "is one Python process with one event loop, so however many cores a machine has it uses one, "
        "and its throughput is that core divided by its CPU time per request.",
        "",
        "Where a request's CPU goes in the router (all Python on the event loop, in aiohttp and in "
        "vk_provider.router): parsing the request and building aiohttp's `Request`; matching the route "
        "and drawing/picking an endpoint; copying the headers into a new `CIMultiDict` plus the "
        "X-Forwarded-* set; `ClientSession.request` (a `ClientRequest`, a pooled connection, a "
        "`ClientResponse`, timers, a yarl `URL` parsed per request); a `StreamResponse` with the "
        "upstream's headers copied again and sent on their own, then one `readany()`/`write()` per "
        "chunk and `write_eof()`; and two prometheus-client series lookups plus a histogram "
        "observation. nginx does the same job in C, and writes headers and body in one call. Run "
        "this script with `--profile-router FILE` (or `bench/router_runner.py --profile FILE`) for a "
        "breakdown.",
        "",
        f"The {cpus} cores are shared by everything: wrk (or the latency client), the proxy under "
        "test and the backend nginx all run on them. So the direct path's throughput is wrk's and "
        "nginx's ceiling on this machine, not the backends' capacity.",
    ]


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    settings = report["settings"]
    versions = report["versions"]
    machine = report["machine"]
    lines = [
        f"# Router overhead: vk-provider Router vs nginx ({report['started_at']})",
        "",
        f"Machine: {describe_machine(machine)}, Linux {machine['kernel']}. The load tool, the proxy under "
        f"test and the backends share the {machine['cpus']} cores, which bounds every number here; "
        "compare paths within this run.",
        "",
        f"Versions: vk-provider {versions['vk-provider']} (Python {versions['python']}, aiohttp "
        f"{versions['aiohttp']}, C parser {'on' if versions['aiohttp_c_parser'] else 'OFF'}, event loop "
        f"{report['setup']['router_loop']}); {versions['nginx']} "
        f"(Debian {versions.get('debian:nginx', '?')}); {versions['wrk']}.",
        "",
        "Backends: one nginx (workers auto) on four loopback ports, `return 200` with an "
        f"{len(backend_body('home-0'))}-byte body and an `{BACKEND_HEADER}` header: home-0, home-1, "
        f"away-0, away-1. Route: host `{BENCH_HOST}`, away "
        f"weight {AWAY_WEIGHT}. nginx proxy: `split_clients` on `$request_id` {AWAY_WEIGHT}/"
        f"{100 - AWAY_WEIGHT} between two upstream groups, `least_conn`, `keepalive 64`, "
        "`proxy_buffering off`, `proxy_request_buffering off`, HTTP/1.1 to the upstreams.",
        "",
        "## Maximum throughput",
        "",
        f"`{settings['wrk_command']}` after a {settings['throughput_warmup_s']} s warm-up, "
        "one path at a time. "
        "Proxy and backend cores: CPU time of their process groups over the run, divided by its length.",
        "",
        *markdown_table(THROUGHPUT_HEADER, throughput_rows(report)),
        "",
        f"## Latency at {settings['rate_rps']:.0f} requests/s",
        "",
        f"Open-loop client (bench/router_overhead.py, asyncio streams, kept-alive HTTP/1.1): a GET every "
        f"{1000 / settings['rate_rps']:.1f} ms at its scheduled time, "
        f"{settings['latency_rounds']} round(s) of {settings['latency_seconds']:.0f} s per path "
        f"(paths interleaved, {settings['latency_warmup_s']:.0f} s warm-up each), samples pooled. "
        "Latency: request start to last byte of the answer. Added = the path's percentile minus the "
        "direct path's.",
        "",
        *markdown_table(LATENCY_HEADER, latency_rows(report)),
        "",
        "## Ratios and target",
        "",
        *(f"- {line}" for line in ratio_lines(report)),
        "",
        "## Conditions",
        "",
        *conditions_text(report),
        "",
        "Each round's p99, with the cores other work took during it in brackets:",
        "",
        *markdown_table(
            ["path", *(f"round {number + 1}" for number in range(settings["latency_rounds"]))],
            round_rows(report),
        ),
        "",
        "## What bounds our throughput",
        "",
        *bound_text(report),
        "",
        "## Home/away split (sanity check)",
        "",
    ]
    for key in ("router", "nginx-1w", "nginx-auto"):
        split = report["latency"][key]["split"]
        counts = ", ".join(f"{name} {count}" for name, count in split["by_backend"].items())
        lines.append(f"- {key}: away share {split['away_share']:.3f} ({counts})")
    lines += ["", "Checks: " + ("all passed." if not report["problems"] else "")]
    lines += [f"- PROBLEM: {problem}" for problem in report["problems"]]
    if report["settings"]["quick"]:
        lines += ["", "This was a --quick run: short durations, numbers are rough."]
    if report["settings"].get("profiled"):
        lines += ["", "The router ran under cProfile in this run: its numbers are NOT representative."]
    lines += ["", "Raw numbers (wrk output, per-round latency, CPU, nginx configs) are in the JSON file."]
    path.write_text("\n".join(lines) + "\n")


def print_summary(report: dict[str, Any]) -> None:
    print(f"\nmax throughput ({report['settings']['wrk_command']}):")
    print("\n".join("  " + line for line in text_table(THROUGHPUT_HEADER, throughput_rows(report))))
    print(f"\nlatency at {report['settings']['rate_rps']:.0f} requests/s (open loop):")
    print("\n".join("  " + line for line in text_table(LATENCY_HEADER, latency_rows(report))))
    print()
    print("\n".join(ratio_lines(report)))
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
    targets, setup = await start_everything(tools, folder, processes, args.profile_router)
    throughput, latency = await measure_all(settings, tools, targets, processes)
    report: dict[str, Any] = {
        **report_head("router_overhead", started_at),
        "load_average_at_start": load_at_start,
        "versions": versions,
        "source": source_state(),
        "settings": {
            "quick": settings.quick,
            "profiled": args.profile_router is not None,
            "wrk_command": settings.wrk_command(settings.throughput_seconds),
            "throughput_s": settings.throughput_seconds,
            "throughput_warmup_s": settings.throughput_warmup_seconds,
            "rate_rps": settings.rate,
            "latency_seconds": settings.latency_seconds,
            "latency_warmup_s": settings.latency_warmup_seconds,
            "latency_rounds": settings.latency_rounds,
            "quiet_cores": settings.quiet_cores,
            "quiet_wait_s": settings.quiet_wait_seconds,
            "noisy_cores": settings.noisy_cores,
            "redo_budget": settings.redo_budget,
            "redos_per_measurement": REDOS_PER_MEASUREMENT,
            "latency_client": "open loop, asyncio streams, HTTP/1.1 keep-alive, "
            f"{PREOPENED_CONNECTIONS} connections pre-opened, GC off while measuring",
            "away_weight": AWAY_WEIGHT,
            "host": BENCH_HOST,
        },
        "setup": setup,
        "targets": [dataclasses.asdict(target) for target in targets],
        "throughput": throughput,
        "latency": latency,
        "derived": derived(throughput, latency),
        "problems": sanity_checks(settings, throughput, latency),
    }
    json_path, markdown_path = write_report(args.results_dir, report, write_markdown)
    print_summary(report)
    print(f"\nwrote {json_path}\nwrote {markdown_path}")
    return 1 if report["problems"] else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Measure what vk-provider's router adds per request, next to nginx, in one run.",
    )
    parser.add_argument("--quick", action="store_true", help="short runs (about 1 minute), rough numbers")
    add_results_dir_option(parser)
    parser.add_argument(
        "--rate", type=float, default=500.0, help="fixed offered rate, requests/s (%(default)s)"
    )
    parser.add_argument("--latency-seconds", type=float, help="per path and round (default 8, quick 5)")
    parser.add_argument(
        "--latency-rounds", type=int, help="interleaved rounds over the paths (default 4, quick 1)"
    )
    parser.add_argument("--throughput-seconds", type=int, help="wrk duration (default 10, quick 3)")
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
        "--profile-router",
        type=Path,
        help="run the router under cProfile and write its stats here (distorts the router's numbers)",
    )
    return parser


def raise_interrupt(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.rate <= 0:
        raise SystemExit("--rate must be positive")
    if args.profile_router is not None:
        args.profile_router = args.profile_router.resolve()
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
