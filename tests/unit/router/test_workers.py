"""`--worker-processes N`: the supervisor's merged status and metrics (its admin answers), and real worker
processes on 127.0.0.1 serving a fixed table (the supervisor's table source is whoever calls `update`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.router import Backend, backends, route, table
from vk_provider import __version__
from vk_provider.controller.sideindex import parse_side_sample
from vk_provider.router import Endpoint, RouterMetrics, RouteTable
from vk_provider.router.merging import (
    cumulative_only,
    exposition_of,
    families_of,
    merged_status,
    summed,
)
from vk_provider.router.proxy import ProxySettings, Router
from vk_provider.router.running import add_router_arguments, cpu_quota, usable_cpus
from vk_provider.router.worker import WorkerState
from vk_provider.router.workerprotocol import (
    Channel,
    Listening,
    NumberedTable,
    Request,
    Start,
    TableChange,
    WorkerConfig,
    WorkerStatus,
)
from vk_provider.router.workers import WORKER_COMMAND, Supervisor, WorkerStartError, restart_delay

# --- The merge of the workers' status documents -------------------------------------------------


def entry(
    name: str, *, generation: int, weight: int, usable: int = 2, outstanding: int = 0
) -> dict[str, Any]:
    """A route as one worker's `Router.status()` lists it."""
    return {
        "namespace": "ml",
        "name": name,
        "generation": generation,
        "away_weight": weight,
        "match": {"hosts": [f"{name}.test"], "path_prefix": ""},
        "endpoints": {
            "home": {"total": 2, "usable": usable, "terminating": 0, "ejected": 2 - usable, "outstanding": 0},
            "away": {"total": 1, "usable": 1, "terminating": 0, "ejected": 0, "outstanding": outstanding},
        },
        "away_kept_on_active_checks": [],
    }


def status(slot: int, sequence: int, *routes: dict[str, Any]) -> WorkerStatus:
    return WorkerStatus(
        slot=slot,
        pid=1000 + slot,
        sequence=sequence,
        in_flight=0,
        requests=0,
        document={"routes": list(routes), "active_checks": {}},
    )


def test_each_route_is_reported_as_the_worker_with_the_oldest_table_serves_it() -> None:
    # Worker 1 already has table 8 (the controller's new weight, one generation on); worker 0 not.
    behind = status(0, 7, entry("chat", generation=3, weight=50, usable=2, outstanding=1))
    ahead = status(1, 8, entry("chat", generation=4, weight=100, usable=1, outstanding=2))
    checks = {"http://10.0.0.1:80": {"healthy": True}}

    for order in ([behind, ahead], [ahead, behind]):
        document = merged_status(order, active_checks=checks, table=8)
        (chat,) = document["routes"]
        assert (chat["generation"], chat["away_weight"]) == (3, 50)
        assert chat["endpoints"]["home"] == {
            "total": 2,
            "usable": 1,  # the fewest any worker can use
            "terminating": 0,
            "ejected": 1,  # ejected by some worker
            "outstanding": 0,
        }
        assert chat["endpoints"]["away"]["outstanding"] == 3  # in flight in the whole router
        assert document["active_checks"] == checks  # the supervisor's, not a worker's
        assert document["table"] == 8
        assert [(w["slot"], w["pid"], w["table"]) for w in document["workers"]] == [
            (0, 1000, 7),
            (1, 1001, 8),
        ]


def test_a_weight_change_shows_only_once_every_worker_applies_it() -> None:
    """The weight lives in the Offload's status, so both tables carry the same generation: the
    table's number must decide, or the merge could report the new weight of the newer worker."""
    old = status(0, 4, entry("chat", generation=2, weight=0))
    new = status(1, 5, entry("chat", generation=2, weight=50))
    for order in ([old, new], [new, old]):
        (chat,) = merged_status(order, active_checks={}, table=5)["routes"]
        assert chat["away_weight"] == 0
    both = [status(0, 5, entry("chat", generation=2, weight=50)), new]
    (chat,) = merged_status(both, active_checks={}, table=5)["routes"]
    assert chat["away_weight"] == 50


def test_a_route_missing_from_any_worker_is_left_out() -> None:
    behind = status(0, 3, entry("chat", generation=1, weight=0), entry("gone", generation=5, weight=0))
    ahead = status(1, 4, entry("chat", generation=1, weight=0), entry("new", generation=1, weight=0))
    document = merged_status([ahead, behind], active_checks={}, table=4)
    assert [route["name"] for route in document["routes"]] == ["chat"]


# --- Tables pushed as changes ----------------------------------------------------------------------


def test_a_table_travels_as_the_change_from_the_one_before() -> None:
    """Workers get the routes that changed and the keys of those that did not, and rebuild the very
    table the supervisor holds: order, changed, added and removed routes, and host owners."""
    home = (Endpoint("http://10.0.0.1:80"),)
    kept, changed, removed = (route(home=home, name=name) for name in ("a", "b", "c"))
    base = NumberedTable(4, RouteTable.of([kept, changed, removed], {"chat.example": "ml"}))
    new_routes = [route(home=home, name="0-new"), kept, route(home=home, name="b", weight=50)]
    new = NumberedTable(5, RouteTable.of(new_routes, {"chat.example": "ml"}))

    change = TableChange.between(base, new)
    assert (change.sequence, change.base) == (5, 4)
    assert change.routes == (new_routes[0], "ml/a", new_routes[2])
    assert change.host_owners is None  # the same as the base table's
    assert change.applied_to(base.table) == new.table

    claimed = NumberedTable(6, RouteTable.of(new_routes, {"chat.example": "other"}))
    again = TableChange.between(new, claimed)
    assert again.routes == ("ml/0-new", "ml/a", "ml/b")
    assert again.applied_to(new.table) == claimed.table


def test_a_worker_that_gets_a_change_to_a_table_it_does_not_serve_stops() -> None:
    """It would otherwise serve a table the supervisor never built; stopped, it is started again with
    the whole table."""
    first = NumberedTable(1, table(route(home=(Endpoint("http://10.0.0.1:80"),))))
    stop = asyncio.Event()
    state = WorkerState(0, Router(first.table), first, stop)
    second = NumberedTable(2, table(route(home=(Endpoint("http://10.0.0.2:80"),), generation=2)))
    skipped = NumberedTable(3, table(route(home=(Endpoint("http://10.0.0.3:80"),), generation=3)))

    state.on_notice(TableChange.between(second, skipped))
    assert stop.is_set()
    assert (state.sequence, state.router.table) == (1, first.table)

    stop.clear()
    state.on_notice(TableChange.between(first, second))
    assert not stop.is_set()
    assert (state.sequence, state.router.table) == (2, second.table)


# --- The sum of the workers' metrics --------------------------------------------------------------


def worker_metrics(requests: int, errors: int, seconds: float) -> RouterMetrics:
    metrics = RouterMetrics()
    for _ in range(requests):
        metrics.response("ml", "chat", "away", 200, seconds)
    metrics.response("ml", "chat", "away", 503, seconds)
    for _ in range(errors):
        metrics.error("ml", "chat", "away", "upstream")
    metrics.kept_on_active_checks({("ml", "chat"): 1})
    return metrics


def test_metrics_are_summed_sample_by_sample_as_the_controller_reads_them() -> None:
    first, second = worker_metrics(10, 1, 0.004), worker_metrics(5, 2, 0.2)
    texts = [metrics.exposition().decode() for metrics in (first, second)]
    merged = exposition_of(summed(families_of(text) for text in texts)).decode()

    expected = parse_side_sample(texts[0], "ml", "chat", "away") + parse_side_sample(
        texts[1], "ml", "chat", "away"
    )
    got = parse_side_sample(merged, "ml", "chat", "away")
    assert got == expected
    assert (got.responses, got.server_errors, got.proxy_errors) == (17, 2, 3)
    assert dict(got.buckets)[0.005] == 11
    assert "_created" not in merged  # a sum of creation times means nothing
    names = [family.name for family in text_string_to_metric_families(merged)]
    assert len(names) == len(set(names))


def registry_of_a_worker(served: dict[str, int], *, in_flight: float) -> CollectorRegistry:
    """A registry with each kind of family, and label values that a naive reader would split wrongly."""
    registry = CollectorRegistry()
    requests = Counter("requests", "Requests.", ["route", "reason"], registry=registry)
    for name, count in served.items():
        requests.labels(name, 'no "upstream", at all\\').inc(count)
    latency = Histogram("latency_seconds", "Latency.", ["route"], buckets=(0.1, 1.0), registry=registry)
    for name, count in served.items():
        for _ in range(count):
            latency.labels(name).observe(0.5)
    Gauge("in_flight", "Requests in flight.", registry=registry).set(in_flight)
    Counter("worker_restarts", "A supervisor's own family.", registry=registry).inc()
    return registry


def parsed_sums(texts: list[str]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """What prometheus_client's own parser reads from `texts`, each sample summed over them."""
    sums: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                sums[key] = sums.get(key, 0.0) + sample.value
    return sums


def test_the_text_sum_reads_as_prometheus_clients_parser_sums() -> None:
    """The workers' expositions are summed as lines of text: the result must read, through
    prometheus_client's parser, as the sum of what that parser reads from each, with a series only one
    worker has, escaped label values, a histogram and a gauge; without `_created` series, and without
    the families `keep` leaves out (a counter's by its name without `_total`)."""
    texts = [
        generate_latest(registry_of_a_worker({"chat": 3, "only-here": 2}, in_flight=4)).decode(),
        generate_latest(registry_of_a_worker({"chat": 5}, in_flight=1)).decode(),
    ]
    assert "_created" in texts[0]
    keep = lambda name: name != "worker_restarts"  # noqa: E731
    merged = exposition_of(summed(families_of(text, keep=keep) for text in texts)).decode()

    expected = {
        key: value
        for key, value in parsed_sums(texts).items()
        if not key[0].endswith("_created") and not key[0].startswith("worker_restarts")
    }
    assert parsed_sums([merged]) == expected
    assert expected[("requests_total", (("reason", 'no "upstream", at all\\'), ("route", "chat")))] == 8
    assert expected[("latency_seconds_bucket", (("le", "1.0"), ("route", "only-here")))] == 2
    assert expected[("in_flight", ())] == 5
    kinds = {family.name: family.type for family in text_string_to_metric_families(merged)}
    assert kinds == {"requests": "counter", "latency_seconds": "histogram", "in_flight": "gauge"}


def test_a_retired_worker_leaves_its_counters_not_its_gauges() -> None:
    text = generate_latest(registry_of_a_worker({"chat": 3}, in_flight=4)).decode()
    retired = cumulative_only(families_of(text))
    assert sorted(retired) == ["latency_seconds", "requests", "worker_restarts"]
    again = exposition_of(summed([retired, families_of(text)])).decode()
    assert parsed_sums([again])[("in_flight", ())] == 4
    assert parsed_sums([again])[("latency_seconds_count", (("route", "chat"),))] == 6


# --- Restarting --------------------------------------------------------------------------------


def test_a_worker_that_keeps_exiting_is_started_again_ever_later() -> None:
    assert restart_delay(0) == 0  # after a steady run: at once
    assert restart_delay(1) == 0  # the first quick exit too: a killed worker serves again at once
    assert [restart_delay(n) for n in (2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0]
    assert restart_delay(20) == 30.0


# --- Real workers --------------------------------------------------------------------------------

GRACE_SECONDS = 10.0


@contextlib.asynccontextmanager
async def supervised(first: RouteTable, *, count: int = 2, port: int = 0) -> AsyncIterator[Supervisor]:
    config = WorkerConfig("127.0.0.1", port, ProxySettings(), shutdown_grace=GRACE_SECONDS)
    supervisor = Supervisor(config, count)
    supervisor.update(first)
    try:
        await supervisor.start()
        yield supervisor
    finally:
        await supervisor.stop()


@contextlib.asynccontextmanager
async def fresh_connections() -> AsyncIterator[aiohttp.ClientSession]:
    """A client that opens a connection per request, so the kernel spreads them over the workers."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        yield session


async def fetch(
    session: aiohttp.ClientSession, supervisor: Supervisor, path: str = "/", *, method: str = "GET"
) -> tuple[int, str]:
    async with session.request(method, f"http://127.0.0.1:{supervisor.port}{path}") as response:
        return response.status, await response.text()


async def admin(supervisor: Supervisor, path: str) -> tuple[int, str]:
    """What the admin listener would answer for `path` (`admin.start_admin` serves this)."""
    answer = await supervisor.answer(path)
    return answer.status, answer.body.decode()


async def router_status(supervisor: Supervisor) -> dict[str, Any]:
    code, text = await admin(supervisor, "/-/status")
    assert code == 200, text
    document: dict[str, Any] = json.loads(text)
    return document


async def until_status(
    supervisor: Supervisor, holds: Any, within: float = 30.0, *, through_a_death: bool = False
) -> dict[str, Any]:
    """Ask for the status until `holds`. `through_a_death`: a worker was just killed, so an answer
    may be a 503 (the dead worker never replies) and is asked again."""
    async with asyncio.timeout(within):
        while True:
            code, text = await admin(supervisor, "/-/status")
            if code == 200:
                document: dict[str, Any] = json.loads(text)
                if holds(document):
                    return document
            elif not through_a_death:
                raise AssertionError(f"the status answered {code}: {text}")
            await asyncio.sleep(0.05)  # a bounded poll (noqa: sleep-ok)


def metric_value(text: str, sample: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == sample and found.labels == labels:
                return float(found.value)
    return None


async def test_workers_share_the_port_and_the_table_and_the_whole_router_answers() -> None:
    async with backends("home", "away") as (home, away):
        kept = Endpoint(away.url, kept_on_active_checks=True)
        async with (
            supervised(table(route(home=(home.endpoint(),), away=(kept,)))) as supervisor,
            fresh_connections() as session,
        ):
            answers = [await fetch(session, supervisor, f"/n{number}") for number in range(40)]
            assert {code for code, _ in answers} == {200}  # the first request too: no 404 at start
            document = await router_status(supervisor)
            workers = document["workers"]
            assert len({worker["pid"] for worker in workers}) == 2
            assert all(worker["requests"] > 0 for worker in workers), workers  # both served
            assert sum(worker["requests"] for worker in workers) == 40

            _, metrics = await admin(supervisor, "/-/metrics")
            labels = {"namespace": "ml", "name": "web"}
            assert (
                metric_value(metrics, "vk_provider_router_requests_total", code="2xx", side="home", **labels)
                == 40
            )
            # The supervisor's series, once: not one per worker.
            assert metric_value(metrics, "vk_provider_router_endpoints_kept_on_active_checks", **labels) == 1
            assert metrics.count("# TYPE vk_provider_router_endpoints_kept_on_active_checks gauge") == 1
            assert metric_value(metrics, "vk_provider_router_workers") == 2
            assert metric_value(metrics, "vk_provider_router_worker_restarts_total") == 0
            # Once for the router, not summed over its workers.
            assert metric_value(metrics, "vk_provider_build_info", version=__version__) == 1

            # The traffic port serves routes only: the status path goes to the route's backend.
            code, text = await fetch(session, supervisor, "/-/status")
            assert (code, text.split()[0]) == (200, "home"), text


async def test_a_new_table_reaches_every_worker() -> None:
    async with (
        backends("old", "new") as (old, new),
        supervised(table(route(home=(old.endpoint(),)))) as supervisor,
        fresh_connections() as session,
    ):
        assert {text.split()[0] for _, text in [await fetch(session, supervisor) for _ in range(6)]} == {
            "old"
        }

        supervisor.update(table(route(home=(new.endpoint(),), generation=2)))
        document = await until_status(
            supervisor, lambda doc: all(worker["table"] == 2 for worker in doc["workers"])
        )
        assert document["routes"][0]["generation"] == 2
        assert {text.split()[0] for _, text in [await fetch(session, supervisor) for _ in range(20)]} == {
            "new"
        }


async def in_flight_on_both_workers(
    session: aiohttp.ClientSession, supervisor: Supervisor, backend: Backend
) -> tuple[list[asyncio.Task[tuple[int, str]]], dict[int, int]]:
    """Held requests until each worker relays at least one; the tasks and each worker's count by pid.

    POSTs: aiohttp sends an idempotent request again when its connection closes before an answer,
    which would hide the failure a killed worker causes."""
    held: list[asyncio.Task[tuple[int, str]]] = []
    for _ in range(40):
        held.append(asyncio.create_task(fetch(session, supervisor, method="POST")))
        async with asyncio.timeout(10):
            while backend.in_flight < len(held):  # noqa: ASYNC110 - a counter, not an event
                await asyncio.sleep(0.005)  # a bounded poll (noqa: sleep-ok)
        workers = (await router_status(supervisor))["workers"]
        if all(worker["in_flight"] for worker in workers):
            return held, {worker["pid"]: worker["in_flight"] for worker in workers}
    raise AssertionError("40 connections all went to one worker")


async def test_a_worker_killed_is_started_again_and_only_its_requests_fail() -> None:
    async with (
        backends("old", "new") as (old, new),
        supervised(table(route(home=(old.endpoint(),)))) as supervisor,
        fresh_connections() as session,
    ):
        for _ in range(10):
            await fetch(session, supervisor)
        _, before = await admin(supervisor, "/-/metrics")  # the counters the sum keeps
        supervisor.update(table(route(home=(new.endpoint(),), generation=2)))
        new.hold()
        held, in_flight = await in_flight_on_both_workers(session, supervisor, new)
        victim, survivor = sorted(in_flight)

        os.kill(victim, signal.SIGKILL)
        document = await until_status(
            supervisor,
            lambda doc: (
                len(doc["workers"]) == 2 and victim not in {worker["pid"] for worker in doc["workers"]}
            ),
            through_a_death=True,
        )
        assert all(worker["table"] == 2 for worker in document["workers"])  # the current table
        new.release()
        outcomes = await asyncio.gather(*held, return_exceptions=True)
        served = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
        assert len(served) == in_flight[survivor]  # the other worker's requests finished
        assert {text for _, text in served} == {"new POST /"}
        assert len(outcomes) - len(served) == in_flight[victim]  # only the killed worker's failed

        answers = [await fetch(session, supervisor) for _ in range(20)]
        assert {(code, text.split()[0]) for code, text in answers} == {(200, "new")}
        _, after = await admin(supervisor, "/-/metrics")
        assert metric_value(after, "vk_provider_router_worker_restarts_total") == 1
        labels = {"namespace": "ml", "name": "web", "side": "home", "code": "2xx"}
        counted_before = metric_value(before, "vk_provider_router_requests_total", **labels)
        # What the killed worker had counted by the last scrape stays in the sum: no counter goes back.
        assert counted_before == 10
        counted_after = metric_value(after, "vk_provider_router_requests_total", **labels)
        assert counted_after == 10 + len(served) + 20


async def test_stopping_finishes_the_requests_in_flight_and_refuses_new_ones() -> None:
    async with backends("slow") as (slow,), fresh_connections() as session:
        supervisor = Supervisor(
            WorkerConfig("127.0.0.1", 0, ProxySettings(), shutdown_grace=GRACE_SECONDS), 2
        )
        supervisor.update(table(route(home=(slow.endpoint(),))))
        try:
            await supervisor.start()
            slow.hold()
            held, in_flight = await in_flight_on_both_workers(session, supervisor, slow)
            stopping = asyncio.create_task(supervisor.stop())
            async with asyncio.timeout(10):
                while True:  # every worker stops listening at once; their requests run on
                    try:
                        _, writer = await asyncio.open_connection("127.0.0.1", supervisor.port)
                    except ConnectionRefusedError:
                        break
                    writer.close()
                    await asyncio.sleep(0.02)  # a bounded poll (noqa: sleep-ok)
            assert not stopping.done()
            slow.release()
            outcomes = await asyncio.gather(*held)
            assert [code for code, _ in outcomes] == [200] * sum(in_flight.values())
            async with asyncio.timeout(10):
                await stopping
            assert not supervisor.serving()
        finally:
            await supervisor.stop()


async def test_a_port_that_cannot_be_shared_fails_the_start() -> None:
    with socket.socket() as taken:  # listening without SO_REUSEPORT: nobody may share it
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(WorkerStartError, match="could not serve"):
            async with supervised(table(route(home=(Endpoint("http://127.0.0.1:9"),))), port=port):
                pass


# --- A worker without its supervisor --------------------------------------------------------------


async def test_a_worker_stops_when_the_supervisor_closes_its_end() -> None:
    ours, theirs = socket.socketpair()
    process = await asyncio.create_subprocess_exec(
        *WORKER_COMMAND, "--control-fd", str(theirs.fileno()), pass_fds=(theirs.fileno(),)
    )
    theirs.close()
    channel = await Channel.over(ours)
    try:
        config = WorkerConfig("127.0.0.1", 0, ProxySettings(), shutdown_grace=GRACE_SECONDS)
        start = Start(0, config, NumberedTable(1, table(route(home=(Endpoint("http://127.0.0.1:9"),)))))
        channel.send(Request(1, start))
        reply = await channel.receive()
        assert isinstance(getattr(reply, "body", None), Listening)
        channel.close()
        async with asyncio.timeout(10):
            assert await process.wait() == 0  # drained (nothing in flight) and exited
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


PARENT = """
import pickle, socket, struct, subprocess, sys
from vk_provider.router.proxy import ProxySettings
from vk_provider.routetable.table import RouteTable
from vk_provider.router.workerprotocol import NumberedTable, Request, Start, WorkerConfig

ours, theirs = socket.socketpair()
quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}  # the test's pipes close with us
worker = subprocess.Popen(
    [*sys.argv[1:], "--control-fd", str(theirs.fileno())], pass_fds=(theirs.fileno(),), **quiet
)
config = WorkerConfig("127.0.0.1", 0, ProxySettings(), shutdown_grace=10.0)
payload = pickle.dumps(Request(1, Start(0, config, NumberedTable(1, RouteTable()))))
ours.sendall(struct.pack("!I", len(payload)) + payload)
ours.recv(1)  # the worker listens: it asked to die with its parent before it read the request
# Another process holds our end open: the worker can learn of our death from the kernel alone.
# (It only has to live past the test, which kills it: not a wait.)
holder = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(60)"],  # noqa: sleep-ok
    pass_fds=(ours.fileno(),),
    **quiet,
)
print(worker.pid, holder.pid, flush=True)
sys.stdin.read()
"""


async def test_a_worker_dies_with_its_supervisor() -> None:
    parent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PARENT, *WORKER_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert parent.stdout is not None
    worker_pid, holder_pid = map(int, (await parent.stdout.readline()).split())
    try:
        parent.kill()
        await parent.wait()
        async with asyncio.timeout(10):
            while pid_alive(worker_pid):  # noqa: ASYNC110 - another process's state, not an event
                await asyncio.sleep(0.02)  # a bounded poll (noqa: sleep-ok)
    finally:
        for pid in (worker_pid, holder_pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not reaped yet by whoever adopted it, counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# --- The command line ------------------------------------------------------------------------


def test_workers_default_to_the_cpus_the_router_may_use_and_one_keeps_it_in_process() -> None:
    parser = argparse.ArgumentParser()
    add_router_arguments(parser)
    assert parser.parse_args([]).worker_processes == usable_cpus()
    assert parser.parse_args(["--worker-processes", "1"]).worker_processes == 1
    with pytest.raises(SystemExit):
        parser.parse_args(["--worker-processes", "0"])


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, None),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "150000 100000\n"}, 1.5),
        ({"cpu.max": "garbage"}, None),
        ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2.0),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ],
    ids=["no-cgroup", "v2-unlimited", "v2-limited", "v2-unreadable", "v1-limited", "v1-unlimited"],
)
def test_a_cgroup_cpu_limit_is_read_as_cpus(
    tmp_path: Path, files: dict[str, str], expected: float | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cpu_quota(tmp_path) == expected


def test_the_default_worker_count_is_capped_by_the_cpu_limit_rounded_up(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("50000 100000\n")  # half a CPU: one worker
    assert usable_cpus(tmp_path) == 1
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert usable_cpus(tmp_path) == len(os.sched_getaffinity(0))
