"""`vk-provider router --worker-processes 2` on the real control plane: two processes serving as one router.

The migration rig's router is started again with `--worker-processes 2`, and the rig's controller reads it as
it reads any router. Checked: both workers take traffic and `/-/metrics` sums them; a migration
(an Offload change: a new generation, then a new weight) completes through the supervisor's merged
`/-/status` and `/-/metrics`, which then report exactly the Offload's generation and weight; a worker
killed with kill -9 is started again with the current table, and only the requests it was relaying
fail, at once (long streams held on both workers) and under open-loop load.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.all_away import (
    ONE_STEP_AWAY,
    flip_all_away,
    load,
    router_document,
    wait_for_healthy_checks,
)
from tests.integration.migration_rig import NAME, Rig, RigFor
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import check_sse, failures
from vk_devtools.demo.tokens import COMPLETIONS_PATH

pytestmark = pytest.mark.usefixtures("traffic_rbac")

WORKERS = 2
REPLICAS = 2
LONG_STREAM_TOKENS = 3000
"""About 15 s at the rig's 5 ms per token: long enough to still run when the worker is killed."""
CLIENT_NOTICE_SECONDS = 0.5
"""After a kill -9, how soon the load generator's client has dropped its idle pooled connections
to the killed worker (the kernel closes them at once): a request sent on one before then fails
though it was not in flight at the kill."""


def sample_values(exposition: str, sample: str, **labels: str) -> list[float]:
    return [
        float(found.value)
        for family in text_string_to_metric_families(exposition)
        for found in family.samples
        if found.name == sample and all(found.labels.get(key) == value for key, value in labels.items())
    ]


def routed_requests(exposition: str, rig: Rig) -> float:
    return sum(
        sample_values(exposition, "vk_provider_router_requests_total", namespace=rig.namespace, name=NAME)
    )


async def restart_with_workers(rig: Rig, count: int) -> dict[str, Any]:
    """The rig's router stopped (SIGTERM: it must exit cleanly), then started with
    `--worker-processes count`."""
    assert rig.router.stop() == 0, rig.router.log_tail()
    rig.router.arguments = [*rig.router.arguments, "--worker-processes", str(count)]
    rig.router.start()

    async def serving() -> dict[str, Any] | None:
        assert rig.router.alive(), rig.router.log_tail()
        document: dict[str, Any] = await router_document(rig)
        routes = [route for route in document["routes"] if route["name"] == NAME]
        ready = (
            len(document["workers"]) == count
            and routes
            and routes[0]["endpoints"]["home"]["usable"] == REPLICAS
        )
        return document if ready else None

    return await wait_for(
        serving, timeout_seconds=60, what=f"{count} router workers:\n{rig.router.log_tail(20)}"
    )


@contextlib.asynccontextmanager
async def fresh_connections(rig: Rig) -> AsyncIterator[aiohttp.ClientSession]:
    """A client of the route that opens a connection per request, so the kernel spreads them over
    the workers (a pooled connection stays with one)."""
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True),
        headers={"Host": rig.host},
        timeout=aiohttp.ClientTimeout(total=60),
    ) as session:
        yield session


async def completion(session: aiohttp.ClientSession, rig: Rig, tokens: int, *, stream: bool) -> str | None:
    """None when the completion came whole, else what went wrong. A POST, which aiohttp never sends
    again on a new connection: a request the killed worker was relaying must show as failed."""
    body = {"prompt": "the quick brown fox", "max_tokens": tokens, "stream": stream}
    try:
        async with session.post(f"{rig.router_url}{COMPLETIONS_PATH}", json=body) as response:
            if response.status != 200:
                return f"status {response.status}: {await response.text()}"
            if stream:
                return await check_sse(response.content, tokens)
            await response.read()
            return None
    except aiohttp.ClientError as error:
        return f"{type(error).__name__}: {error}"


async def workers_of(rig: Rig) -> list[dict[str, Any]]:
    workers: list[dict[str, Any]] = (await router_document(rig))["workers"]
    return workers


async def restarted(rig: Rig, killed: int) -> dict[str, Any]:
    """The status once both workers serve again, the killed one replaced."""

    async def replaced() -> dict[str, Any] | None:
        assert rig.router.alive(), rig.router.log_tail()
        document: dict[str, Any] = await router_document(rig)
        pids = {worker["pid"] for worker in document["workers"]}
        return document if len(pids) == WORKERS and killed not in pids else None

    return await wait_for(
        replaced, timeout_seconds=60, what=f"worker {killed} replaced:\n{rig.router.log_tail(20)}"
    )


async def test_two_workers_serve_migrate_and_survive_a_kill(rig_for: RigFor) -> None:
    async with rig_for(ONE_STEP_AWAY, home_replicas=REPLICAS) as rig:
        started = await restart_with_workers(rig, WORKERS)
        assert len({worker["pid"] for worker in started["workers"]}) == WORKERS
        assert "event loop: uvloop" in rig.router.log_tail(200)

        # Both workers take traffic; /-/metrics is their sum.
        async with fresh_connections(rig) as session:
            outcomes = [await completion(session, rig, 4, stream=False) for _ in range(40)]
        assert outcomes == [None] * 40
        workers = await workers_of(rig)
        assert all(worker["requests"] > 0 for worker in workers), workers
        metrics = await router_document(rig, "metrics")
        assert routed_requests(metrics, rig) == sum(worker["requests"] for worker in workers) == 40
        assert sample_values(metrics, "vk_provider_router_workers") == [WORKERS]

        # An Offload change through the controller, which waits for this router (both workers) to
        # apply each weight and judges the step on the summed metrics.
        offload_before = await rig.offload()
        async with load(rig, rate=20) as generator:
            await flip_all_away(rig)
        assert not failures(generator.outcomes), failures(generator.outcomes)[:5]
        offload = await rig.offload()
        generation = offload["metadata"]["generation"]
        assert generation > offload_before["metadata"]["generation"]
        document = await router_document(rig)
        (route,) = [route for route in document["routes"] if route["name"] == NAME]
        assert (route["generation"], route["away_weight"]) == (generation, 100)

        async def converged() -> bool:
            # The table may change again after the flip (a pod's status, a check's verdict): every
            # worker takes the newest one within moments of the supervisor.
            found = await router_document(rig)
            return {worker["table"] for worker in found["workers"]} == {found["table"]}

        await wait_for(converged, timeout_seconds=30, what="both workers on the supervisor's table")
        # The active checks are the supervisor's, reported once whoever answers.
        checked = await wait_for_healthy_checks(rig, REPLICAS)
        assert len(checked["active_checks"]) == REPLICAS
        metrics = await router_document(rig, "metrics")
        assert sample_values(metrics, "vk_provider_router_active_checks_total", result="pass")
        assert metrics.count("# TYPE vk_provider_router_active_checks_total counter") == 1

        # kill -9 while long streams run on both workers: exactly the killed worker's fail.
        async with fresh_connections(rig) as session:
            streams: list[asyncio.Task[str | None]] = []
            while True:
                assert len(streams) < 20, f"20 connections all went to one worker: {workers}"
                streams.append(asyncio.create_task(completion(session, rig, LONG_STREAM_TOKENS, stream=True)))

                async def relayed() -> list[dict[str, Any]] | None:
                    found = await workers_of(rig)
                    return found if sum(worker["in_flight"] for worker in found) == len(streams) else None

                workers = await wait_for(relayed, timeout_seconds=10, what="the new stream relayed")
                if all(worker["in_flight"] for worker in workers):
                    break
            counted_before = routed_requests(await router_document(rig, "metrics"), rig)
            victim = workers[0]
            os.kill(victim["pid"], signal.SIGKILL)
            document = await restarted(rig, victim["pid"])
            assert {worker["table"] for worker in document["workers"]} == {document["table"]}
            results = await asyncio.gather(*streams)
        broken = [result for result in results if result is not None]
        assert len(broken) == victim["in_flight"], results
        assert len(results) - len(broken) == workers[1]["in_flight"]
        metrics = await router_document(rig, "metrics")
        assert sample_values(metrics, "vk_provider_router_worker_restarts_total") == [1]
        assert routed_requests(metrics, rig) >= counted_before  # no counter went back with the worker

        # kill -9 of the other worker under open-loop load: nothing but what it relayed fails.
        survivor = next(worker for worker in document["workers"] if worker["slot"] != victim["slot"])
        async with load(rig, rate=30) as generator:
            await asyncio.sleep(3)  # load before the kill (noqa: sleep-ok)
            in_flight_at_kill = generator.in_flight
            killed_at = time.monotonic()
            os.kill(survivor["pid"], signal.SIGKILL)
            await restarted(rig, survivor["pid"])
            await asyncio.sleep(3)  # load after the restart (noqa: sleep-ok)
        failed = failures(generator.outcomes)
        assert all(outcome.start < killed_at + CLIENT_NOTICE_SECONDS for outcome in failed), failed
        assert len(failed) <= in_flight_at_kill + 30 * CLIENT_NOTICE_SECONDS, failed
        after = [
            outcome for outcome in generator.outcomes if outcome.start >= killed_at + CLIENT_NOTICE_SECONDS
        ]
        assert len(after) > 60
        assert all(outcome.ok for outcome in after)
        metrics = await router_document(rig, "metrics")
        assert sample_values(metrics, "vk_provider_router_worker_restarts_total") == [2]
        log = rig.router.log_tail(400)
        assert f"(pid {victim['pid']}) was killed by SIGKILL" in log
        assert f"(pid {survivor['pid']}) was killed by SIGKILL" in log
