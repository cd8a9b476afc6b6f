"""The router at scale: what its route table costs with 10, 100 and 1,000 Offloads (issue 35).

Three sets of figures per table size R, from the route table's own code, without a control plane (the
router's feed is a set of mirrors of the cluster's objects, handed to `build_routes`; here the mirrors
are built, not watched):

- **rebuild**: the inputs are what the router's reflectors hold for R Offloads
  (`vk_devtools.routescale`: per Offload the Offload, its home Service's EndpointSlice with two
  endpoints, two sealed away pods; their virtual nodes), parsed from JSON as the API client parses a
  list. Timed: a first build from nothing (`build_routes` without a memo: the router's start, or a
  traffic-key rotation), and the rebuild the feed does after one change (an away pod turning Ready or
  not Ready: `build_routes` with the feed's `BuildMemo`, then the comparison with the table applied),
  median and p99 over the repeats; the router's `update` with the new table; and the xDS server's
  (`XdsServer.update`: the same table as Envoy's resources, for the `envoy` data plane), first from
  nothing, then after the change.
- **memory per route**: tracemalloc's count of the bytes the mirrors hold, and of those the built
  table and the memo hold, divided by R.
- **request latency through the real router**: `router_runner.py --routes R` (the shipped Router, in
  its own process, uvloop when importable) for R = 10 and R = 1,000, side by side, both in front of
  one backend process (a fixed `200 ok`); one client sends requests one at a time on a kept-alive
  connection to each, to the two routers in turn (so that whatever else the machine does lands on
  both alike), each request for the next of its table's hosts. p50 and p99 per size, and the ratio.

Targets (issue 35): memory per Offload in the router at most 50 KB; p99 with 1,000 routes within 10%
of the p99 with 10; rebuild time growing at most linearly (from 100 to 1,000 routes: at most
`LINEAR_SLACK` times the tenfold).

`measure(...)` returns the report's figures (bench/scale.py calls it); run as a script it writes
bench/results/scale_router-<UTC time>.{json,md}:

    .venv/bin/python bench/scale_router.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import gc
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router_runner import BENCH_HOST, other_host

from benchkit import (
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
    write_report,
)
from vk_devtools.routescale import SCALE_KEY, RouteInputs, route_inputs
from vk_provider.kit.kube import decode_compact
from vk_provider.router import Router
from vk_provider.routetable.building import BuildMemo, away_pod_fields, build_routes
from vk_provider.xds.server import XdsServer

BENCHMARK = "scale_router"
RUNNER = Path(__file__).with_name("router_runner.py")
SIZES = (10, 100, 1000)
LATENCY_SIZES = (10, 1000)
MEMORY_TARGET_BYTES = 50 * 1024
P99_TARGET_RATIO = 1.10
LINEAR_SLACK = 1.25
"""Rebuild growth counts as linear when 10 times the routes take at most this times 10 the time: the
allowance for a working set that outgrows the CPU's caches (the same work per object costs ~10-20%
more at 1,000 routes than at 100, with the garbage collector off too), not for a scan."""
REQUEST_TIMEOUT_SECONDS = 5.0
BACKEND_BODY = b"ok"


# --- rebuild --------------------------------------------------------------------------------------


def mirrors(routes: int) -> RouteInputs:
    """The reflectors' objects for `routes` Offloads, as the feed's reflectors keep them: each kind
    decoded from one JSON list (`decode_compact`: keys and short strings shared), the away pods cut
    to the fields the table reads (`away_pod_fields`, the away pods reflector's `keep`)."""
    offloads, slices, pods, nodes = (
        decode_compact(json.dumps(objects)) for objects in _kinds(route_inputs(routes))
    )
    return RouteInputs(offloads, slices, [away_pod_fields(pod) for pod in pods], nodes)


def _kinds(inputs: RouteInputs) -> tuple[list[dict[str, Any]], ...]:
    return (inputs.offloads, inputs.endpoint_slices, inputs.away_pods, inputs.virtual_nodes)


def _build(inputs: RouteInputs, memo: BuildMemo | None) -> Any:
    return build_routes(
        inputs.offloads,
        inputs.endpoint_slices,
        inputs.away_pods,
        virtual_nodes=inputs.virtual_nodes,
        traffic_keys=(SCALE_KEY,),
        memo=memo,
    )


def _flipped(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as its next status update brings it: a new object (as a watch event is), Ready flipped."""
    changed = copy.deepcopy(pod)
    for condition in changed["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "False" if condition["status"] == "True" else "True"
    version = int(changed["metadata"]["resourceVersion"]) + 1
    changed["metadata"]["resourceVersion"] = str(version)
    return changed


def _summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    values = [value * 1000.0 for value in seconds]
    return {
        "min_ms": min(values),
        "median_ms": statistics.median(values),
        "p99_ms": percentile(values, 0.99),
        "max_ms": max(values),
        "samples": len(values),
    }


class _Timings:
    """Wall-clock and CPU times of one kind of step.

    The CPU time (the thread's) is what the step costs; the wall time is what a change waits, which on
    a machine running other work includes the time the step waited for a core. A step of 200 ms is
    preempted far more often than one of 20 ms, so growth is judged on the CPU time.
    """

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.thread_time()
        yield
        self.cpu.append(time.thread_time() - cpu)
        self.wall.append(time.perf_counter() - wall)

    def summary(self) -> dict[str, float]:
        return {
            **_summary_ms(self.wall),
            "cpu_min_ms": min(self.cpu) * 1000.0,
            "cpu_median_ms": statistics.median(self.cpu) * 1000.0,
        }


class _Rebuilding:
    """One table size's mirrors, the feed's memo, the table applied, and a Router and an XdsServer
    that apply it."""

    def __init__(self, routes: int) -> None:
        self.routes = routes
        self.inputs = mirrors(routes)
        first = _build(self.inputs, None)
        if len(first.table.routes) != routes or first.skipped or first.unverified:
            raise BenchError(
                f"the scale inputs built {len(first.table.routes)} routes of {routes} "
                f"(skipped {len(first.skipped)}, unverified {len(first.unverified)})"
            )
        self.memo = BuildMemo()
        self.applied = _build(self.inputs, self.memo).table
        self.router = Router(self.applied)
        self.xds = XdsServer()
        self.xds.update(self.applied)
        self.changes = 0
        self.first_builds = _Timings()
        self.rebuilds = _Timings()
        self.updates = _Timings()
        self.xds_first = _Timings()
        self.xds_updates = _Timings()

    def first_build(self) -> None:
        with self.first_builds.timed():
            _build(self.inputs, None)
        with self.xds_first.timed():
            XdsServer().update(self.applied)

    def one_change(self) -> None:
        """Flip one away pod's Ready (a different one each time, spread over the table), rebuild as the
        feed does, and apply the new table to the router and the xDS server."""
        pods = self.inputs.away_pods
        index = (self.changes * 7919) % len(pods)
        self.changes += 1
        pods[index] = _flipped(pods[index])
        with self.rebuilds.timed():
            table = _build(self.inputs, self.memo).table
            changed = table != self.applied
        if not changed:
            raise BenchError(f"flipping away pod {index}'s Ready did not change the table")
        with self.updates.timed():
            self.router.update(table)
        with self.xds_updates.timed():
            self.xds.update(table)
        self.applied = table

    def figures(self) -> dict[str, Any]:
        return {
            "routes": self.routes,
            "first_build": self.first_builds.summary(),
            "rebuild_after_one_change": self.rebuilds.summary(),
            "router_update": self.updates.summary(),
            "xds_first_update": self.xds_first.summary(),
            "xds_update_after_one_change": self.xds_updates.summary(),
        }


def measure_rebuilds(sizes: Sequence[int], repeats: int) -> list[dict[str, Any]]:
    """For each size: a first build's time, a rebuild's after one change and the router's `update`.

    The sizes take turns (one build of each, then again), so that whatever else the machine does at
    some moment lands on all of them, not on the size that was being measured then; and all sizes'
    mirrors are alive throughout, so every build works in the same heap.
    """
    sizes_measured = [_Rebuilding(size) for size in sorted(sizes)]
    for _ in range(max(3, repeats // 4)):
        for rebuilding in sizes_measured:
            rebuilding.first_build()
    for _ in range(repeats):
        for rebuilding in sizes_measured:
            rebuilding.one_change()
    return [rebuilding.figures() for rebuilding in sizes_measured]


# --- memory ---------------------------------------------------------------------------------------


def _traced(make: Any) -> tuple[Any, int]:
    """What `make()` returns, and the bytes allocated by it that are still held."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    made = make()
    gc.collect()
    return made, tracemalloc.get_traced_memory()[0] - before


def measure_memory(routes: int) -> dict[str, Any]:
    """Bytes per route the mirrors hold, and the table with the feed's memo (tracemalloc)."""
    tracemalloc.start()
    try:
        inputs, mirror_bytes = _traced(lambda: mirrors(routes))
        memo = BuildMemo()
        result, table_bytes = _traced(lambda: _build(inputs, memo))
        del result
    finally:
        tracemalloc.stop()
    return {
        "routes": routes,
        "mirror_bytes_per_route": mirror_bytes / routes,
        "table_and_memo_bytes_per_route": table_bytes / routes,
        "bytes_per_route": (mirror_bytes + table_bytes) / routes,
    }


# --- latency --------------------------------------------------------------------------------------


@contextlib.contextmanager
def started(argv: list[str], what: str) -> Iterator[str]:
    """Run `argv` in its own process group until the block ends; yields its first line (`ready ...`)."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    try:
        line = process.stdout.readline().decode(errors="replace").strip() if process.stdout else ""
        if not line.startswith("ready"):
            raise BenchError(f"{what} did not start (said {line!r}, exit status {process.poll()})")
        yield line
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class Client:
    """One kept-alive HTTP/1.1 connection; `get(host)` sends a request and times its whole answer."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_SECONDS)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def get(self, host: str) -> float:
        request = f"GET /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
        started_at = time.perf_counter()
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._receive()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = next(
            (int(line.split(":", 1)[1]) for line in lines[1:] if line.lower().startswith("content-length:")),
            None,
        )
        if length is None:
            raise BenchError(f"an answer without Content-Length: {lines}")
        while len(rest) < length:
            rest += self._receive()
        self.buffer = rest[length:]
        elapsed = time.perf_counter() - started_at
        if status != 200:
            raise BenchError(f"the router answered {status} for host {host}")
        return elapsed

    def _receive(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise BenchError("the router closed the connection")
        return data

    def close(self) -> None:
        self.sock.close()


def _hosts(routes: int) -> list[str]:
    return [BENCH_HOST, *(other_host(index) for index in range(1, routes))]


def measure_latency(sizes: Sequence[int], requests: int, rounds: int) -> dict[str, Any]:
    """p50/p99 of requests through a router with each table size, sent to the routers in turn."""
    backend_port = free_port()
    backend_url = f"http://127.0.0.1:{backend_port}"
    with contextlib.ExitStack() as stack:
        stack.enter_context(
            started([sys.executable, __file__, "--serve-backend", str(backend_port)], "the backend")
        )
        ports: dict[int, int] = {}
        for size in sizes:
            ports[size] = free_port()
            argv = [sys.executable, str(RUNNER), "--port", str(ports[size]), "--routes", str(size)]
            argv += ["--home", backend_url, "--away", backend_url, "--away-weight", "50"]
            stack.enter_context(started(argv, f"the router with {size} routes"))
        clients = {size: Client(port) for size, port in ports.items()}
        for client in clients.values():
            stack.callback(client.close)
        samples: dict[int, list[float]] = {size: [] for size in sizes}
        round_p99: dict[int, list[float]] = {size: [] for size in sizes}
        for size, client in clients.items():  # warm up: connections to the backend, the code paths
            hosts = _hosts(size)
            for index in range(min(requests, 500)):
                client.get(hosts[index % size])
        hosts_of = {size: _hosts(size) for size in sizes}
        for number in range(rounds):
            taken: dict[int, list[float]] = {size: [] for size in sizes}
            for index in range(number * requests, (number + 1) * requests):
                # One request to each router in turn, the first one alternating: a moment the machine
                # is busy elsewhere lands on both sizes alike.
                for size in sizes if index % 2 == 0 else reversed(sizes):
                    hosts = hosts_of[size]
                    taken[size].append(clients[size].get(hosts[index % size]) * 1000.0)
            for size in sizes:
                samples[size].extend(taken[size])
                round_p99[size].append(percentile(taken[size], 0.99))
    per_size: dict[str, dict[str, Any]] = {
        str(size): {
            "routes": size,
            "requests": len(samples[size]),
            "p50_ms": percentile(samples[size], 0.50),
            "p99_ms": percentile(samples[size], 0.99),
            "median_round_p99_ms": statistics.median(round_p99[size]),
            "round_p99_ms": round_p99[size],
        }
        for size in sizes
    }
    low, high = str(min(sizes)), str(max(sizes))
    return {
        "sizes": per_size,
        "p50_ratio": ratio(per_size[high]["p50_ms"], per_size[low]["p50_ms"]),
        "p99_ratio": ratio(per_size[high]["p99_ms"], per_size[low]["p99_ms"]),
        "median_round_p99_ratio": ratio(
            per_size[high]["median_round_p99_ms"], per_size[low]["median_round_p99_ms"]
        ),
        "low": int(low),
        "high": int(high),
        "requests_per_round": requests,
        "rounds": rounds,
        "client": "one kept-alive connection per router, one request at a time, to each router in turn, "
        "each router's hosts in turn",
    }


# --- all of it ------------------------------------------------------------------------------------


def measure(
    sizes: Sequence[int] = SIZES,
    *,
    latency_sizes: Sequence[int] = LATENCY_SIZES,
    repeats: int = 100,
    requests: int = 2000,
    rounds: int = 6,
) -> dict[str, Any]:
    """The router's figures at each table size, and the targets met or missed (see the module)."""
    sizes = sorted(sizes)
    rebuild = measure_rebuilds(sizes, repeats)
    memory = [measure_memory(size) for size in sizes]
    latency = measure_latency(sorted(latency_sizes), requests, rounds) if latency_sizes else None
    return {
        "sizes": list(sizes),
        "rebuild": rebuild,
        "memory": memory,
        "latency": latency,
        "targets": targets(rebuild, memory, latency),
    }


def _growth(rebuild: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """How the CPU time of `key` (median) grew from the second-largest size to the largest, against
    linear: the step's own cost, without the waits for a core that the wall times carry on a busy
    machine (those are in the table)."""
    if len(rebuild) < 2:
        return None
    small, large = rebuild[-2], rebuild[-1]
    scale = large["routes"] / small["routes"]
    grew = ratio(large[key]["cpu_median_ms"], small[key]["cpu_median_ms"])
    return {
        "from_routes": small["routes"],
        "to_routes": large["routes"],
        "time_ratio": grew,
        "routes_ratio": scale,
        "met": None if grew is None else grew <= scale * LINEAR_SLACK,
    }


def targets(
    rebuild: list[dict[str, Any]], memory: list[dict[str, Any]], latency: dict[str, Any] | None
) -> dict[str, Any]:
    largest = max(memory, key=lambda entry: entry["routes"])
    compares = latency is not None and latency["high"] > latency["low"]
    p99_ratio = latency["p99_ratio"] if latency is not None and compares else None
    compared = (
        f"{latency['high']} vs {latency['low']}" if latency is not None and compares else "not compared"
    )
    return {
        "memory_per_offload": {
            "value_kib": largest["bytes_per_route"] / 1024,
            "at_routes": largest["routes"],
            "limit_kib": MEMORY_TARGET_BYTES / 1024,
            "met": largest["bytes_per_route"] <= MEMORY_TARGET_BYTES,
        },
        "p99_ratio": {
            "compared": compared,
            "value": p99_ratio,
            "limit": P99_TARGET_RATIO,
            "met": None if p99_ratio is None else p99_ratio <= P99_TARGET_RATIO,
        },
        "rebuild_growth": _growth(rebuild, "rebuild_after_one_change"),
        "first_build_growth": _growth(rebuild, "first_build"),
        "xds_update_growth": _growth(rebuild, "xds_update_after_one_change"),
    }


# --- report ---------------------------------------------------------------------------------------


def _verdict(met: bool | None) -> str:
    return "—" if met is None else ("met" if met else "**missed**")


def target_rows(report: dict[str, Any]) -> list[list[str]]:
    found = report["targets"]
    memory = found["memory_per_offload"]
    p99 = found["p99_ratio"]
    rows = [
        [
            f"memory per Offload in the router (at {memory['at_routes']} routes)",
            f"{memory['value_kib']:.1f} KiB",
            f"≤ {memory['limit_kib']:.0f} KiB",
            _verdict(memory["met"]),
        ],
        [
            f"router p99, routes {p99['compared']}",
            cell(p99["value"], "{:.3f}"),
            f"≤ {p99['limit']:.2f}",
            _verdict(p99["met"]),
        ],
    ]
    for key, what in (
        ("rebuild_growth", "rebuild after one change"),
        ("first_build_growth", "first build"),
        ("xds_update_growth", "xDS update after one change"),
    ):
        growth = found[key]
        if growth is not None:
            rows.append(
                [
                    f"{what}: CPU time ratio, {growth['from_routes']} → {growth['to_routes']} routes",
                    cell(growth["time_ratio"], "{:.1f}"),
                    f"≤ {growth['routes_ratio'] * LINEAR_SLACK:.1f} (linear: {growth['routes_ratio']:.0f})",
                    _verdict(growth["met"]),
                ]
            )
    return rows


def figure_rows(report: dict[str, Any]) -> list[list[str]]:
    memory = {entry["routes"]: entry for entry in report["memory"]}
    rows = []
    for entry in report["rebuild"]:
        size = entry["routes"]
        rows.append(
            [
                str(size),
                _wall_and_cpu(entry["first_build"]),
                _wall_and_cpu(entry["rebuild_after_one_change"]),
                cell(entry["rebuild_after_one_change"]["p99_ms"], "{:.2f}"),
                cell(entry["router_update"]["median_ms"], "{:.2f}"),
                _wall_and_cpu(entry["xds_first_update"]),
                _wall_and_cpu(entry["xds_update_after_one_change"]),
                cell(memory[size]["mirror_bytes_per_route"] / 1024, "{:.1f}"),
                cell(memory[size]["table_and_memo_bytes_per_route"] / 1024, "{:.1f}"),
                cell(memory[size]["bytes_per_route"] / 1024, "{:.1f}"),
            ]
        )
    return rows


def _wall_and_cpu(timings: dict[str, Any]) -> str:
    return f"{cell(timings['median_ms'], '{:.2f}')} / {cell(timings['cpu_median_ms'], '{:.2f}')}"


FIGURE_HEADER = [
    "routes",
    "first build ms",
    "rebuild after one change ms",
    "rebuild p99 ms (wall)",
    "router update ms (wall)",
    "xDS first update ms",
    "xDS update after one change ms",
    "mirrors KiB/route",
    "table + memo KiB/route",
    "total KiB/route",
]


def latency_rows(report: dict[str, Any]) -> list[list[str]]:
    latency = report["latency"]
    if latency is None:
        return []
    return [
        [
            str(entry["routes"]),
            str(entry["requests"]),
            cell(entry["p50_ms"], "{:.3f}"),
            cell(entry["p99_ms"], "{:.3f}"),
            cell(entry["median_round_p99_ms"], "{:.3f}"),
        ]
        for entry in latency["sizes"].values()
    ]


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    lines = [
        "# The router at scale: route table rebuild, memory per route, latency with 10 and 1,000 routes",
        "",
        f"Run {report['started_at']} to {report['finished_at']} on {describe_machine(report['machine'])}.",
        "Inputs per Offload: the Offload, its home EndpointSlice (2 endpoints), 2 sealed away pods, "
        "and their share of the virtual nodes (`vk_devtools.routescale`), parsed from JSON.",
        "",
        "## Targets",
        "",
        *markdown_table(["target", "measured", "limit", "verdict"], target_rows(report)),
        "",
        "## Rebuild and memory",
        "",
        *markdown_table(FIGURE_HEADER, figure_rows(report)),
        "",
        "Times are medians, wall clock / the thread's CPU time (the machine runs other work: the wall "
        "times include waits for a core). "
        "A rebuild after one change is what the router's feed does when a watched object changes "
        "(`build_routes` with the feed's `BuildMemo`, and the comparison with the applied table); the "
        "first build reads every object (the router's start, a traffic-key rotation). Memory: "
        "tracemalloc's bytes held by the mirrored objects, and by the table with the memo. The xDS "
        "server (the `envoy` data plane's, fed by the same table) turns each table into Envoy's "
        "resources: its first update parses them all, a later one those that changed (`ResourceCache`).",
        "",
    ]
    latency = report["latency"]
    if latency is not None:
        lines += [
            "## Request latency through the router",
            "",
            *markdown_table(
                ["routes", "requests", "p50 ms", "p99 ms", "median of round p99s ms"], latency_rows(report)
            ),
            "",
            f"p50 ratio {cell(latency['p50_ratio'], '{:.3f}')}, "
            f"p99 ratio {cell(latency['p99_ratio'], '{:.3f}')}, "
            f"median-round-p99 ratio {cell(latency['median_round_p99_ratio'], '{:.3f}')} "
            f"({latency['high']} routes / {latency['low']}). {latency['rounds']} rounds of "
            f"{latency['requests_per_round']} requests per router; {latency['client']}; "
            "both routers (`router_runner.py --routes N`) in front of one backend process.",
            "",
        ]
    path.write_text("\n".join(lines))


# --- the backend ----------------------------------------------------------------------------------


def serve_backend(port: int) -> int:
    """A backend that answers every request `200 ok` on kept-alive connections (requests carry no body)."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BACKEND_BODY), BACKEND_BODY)

    class Answering(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.buffer = b""

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            heads = self.buffer.count(b"\r\n\r\n")
            if heads:
                self.buffer = self.buffer.rpartition(b"\r\n\r\n")[2]
                self.transport.write(answer * heads)  # type: ignore[attr-defined]

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Answering, "127.0.0.1", port)
        print(f"ready port={port}", flush=True)
        async with server:
            await server.serve_forever()

    uvloop = optional_uvloop()
    if uvloop is not None:
        uvloop.install()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


# --- command line ---------------------------------------------------------------------------------


def sizes_argument(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected route counts like 10,100,1000, got {text!r}") from error
    if not values or any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"route counts must be at least 1, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=sizes_argument, default=list(SIZES), help="route counts (10,100,1000)"
    )
    parser.add_argument(
        "--latency-sizes",
        type=sizes_argument,
        default=list(LATENCY_SIZES),
        help="route counts the latency is measured at (10,1000)",
    )
    parser.add_argument("--repeats", type=int, default=100, help="rebuilds timed per size (%(default)s)")
    parser.add_argument(
        "--requests", type=int, default=2000, help="requests per round per router (%(default)s)"
    )
    parser.add_argument("--rounds", type=int, default=6, help="latency rounds (%(default)s)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run: 10 and 100 routes, few repeats (a test, not figures)",
    )
    parser.add_argument("--serve-backend", type=int, metavar="PORT", help=argparse.SUPPRESS)
    add_results_dir_option(parser)
    return parser


async def run(args: argparse.Namespace) -> int:
    started_at = datetime.now(UTC)
    if args.quick:
        figures = measure([10, 100], latency_sizes=[10, 100], repeats=10, requests=200, rounds=2)
    else:
        figures = measure(
            args.sizes,
            latency_sizes=args.latency_sizes,
            repeats=args.repeats,
            requests=args.requests,
            rounds=args.rounds,
        )
    report = {**report_head(BENCHMARK, started_at), **figures}
    json_path, markdown_path = write_report(args.results_dir, report, write_markdown)
    for line in markdown_table(["target", "measured", "limit", "verdict"], target_rows(report)):
        print(line)
    print(f"wrote {json_path} and {markdown_path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.serve_backend is not None:
        return serve_backend(args.serve_backend)
    return run_main(run(args), interrupted="the routers and the backend were stopped")


if __name__ == "__main__":
    sys.exit(main())
