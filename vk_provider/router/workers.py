"""`vk-provider router --worker-processes N`: N worker processes serve one port; one supervisor feeds them.

Why processes: one Python process proxies on one core. N workers (`vk_provider.router.worker`) each
listen on the same port with SO_REUSEPORT, and the kernel spreads new connections over them.

Why this supervisor watches the cluster for all of them, rather than each worker on its own: N
times fewer watches on the apiserver (four reflectors per router, not 4N), one set of active checks
of the away endpoints (not N workers probing every endpoint), and one table version everywhere:
each table the supervisor's `TableFeed` builds is numbered and pushed to every worker, so workers
never hold different readings of the cluster for longer than a push takes, and `/-/status` can say
exactly which table every worker serves. The cost: each new table travels over a pipe to every
worker instead of being built where it is used, as the change from the table before it (the routes
that changed, and the keys of the others: a few kilobytes for one change among a thousand routes;
`vk_provider.router.workerprotocol.TableChange`).

A worker starts from a `Start` request that carries the current table and answers only once it
listens, so no worker serves without a table (never a 404 for a route that exists), and `start()`
returns only once every worker listens. The supervisor answers `/-/status` and `/-/metrics` for the
whole router (`/-/healthz` each worker answers itself), merging what every serving worker says
(`vk_provider.router.merging`). A worker that exits is started again with the current table: at
once, unless it keeps exiting soon after starting, then after a delay that doubles each time (its
in-flight requests are lost with it; the other workers' are not touched). Its last scraped
counters stay in the sum, so the router's counters never go down when a worker is replaced (the
controller's gates take a counter that went down for a restarted router and skip the interval).
Workers die with the supervisor (PR_SET_PDEATHSIG) and stop when their socket closes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from vk_provider.kit.buildinfo import register_build_info
from vk_provider.router.admin import JSON, METRICS_PATH, STATUS_PATH, TEXT, AdminAnswer
from vk_provider.router.merging import (
    Families,
    cumulative_only,
    exposition_of,
    families_of,
    merged_status,
    summed,
)
from vk_provider.router.metrics import CONTENT_TYPE, NAMESPACE, RouterMetrics
from vk_provider.router.proxy import Router
from vk_provider.router.workerprotocol import (
    Channel,
    ChannelClosedError,
    Listening,
    MetricsQuery,
    NumberedTable,
    RemoteError,
    Start,
    StartFailed,
    StatusQuery,
    Stop,
    TableChange,
    WorkerConfig,
    WorkerStatus,
)
from vk_provider.routetable.table import RouteTable

logger = logging.getLogger(__name__)

WORKER_COMMAND = (sys.executable, "-m", "vk_provider.router.worker")
START_TIMEOUT_SECONDS = 60.0
"""A worker imports the router and binds the port within this, or it is taken for failed."""
QUERY_TIMEOUT_SECONDS = 2.0
"""A worker answers a status or metrics query within this (it only reads its own state); the
controller waits 5 s for a router's whole answer."""
STOP_MARGIN_SECONDS = 5.0
"""After the shutdown grace, how long stopping workers get to exit before they are killed."""
STEADY_SECONDS = 10.0
"""A worker that exits sooner than this after its start counts as a quick exit: the second such
exit in a row waits before the worker is started again, and each further one twice as long."""
FIRST_RESTART_DELAY_SECONDS = 0.5
MAX_RESTART_DELAY_SECONDS = 30.0

FEED_FAMILIES = frozenset(
    {
        f"{NAMESPACE}_endpoints_kept_on_active_checks",
        f"{NAMESPACE}_active_checks",
        f"{NAMESPACE}_ignored_objects",
    }
)
"""The series of the active checks and of the objects left out of the table. The supervisor's feed
makes them; every worker's Router has the same families too, never counted (its checks do not run, it
builds no table) or counted again (its gauge repeats the table's), so the workers' are left out of the
sum."""
SUPERVISOR_FAMILIES = FEED_FAMILIES | {f"{NAMESPACE}_worker_restarts", f"{NAMESPACE}_workers"}


class WorkerStartError(OSError):
    """A worker did not start listening (an OSError, as binding the port is what usually fails)."""


@dataclasses.dataclass(eq=False)
class Worker:
    slot: int
    process: asyncio.subprocess.Process
    channel: Channel
    reading: asyncio.Task[None] | None = None
    listening: bool = False
    """Serving, as far as the supervisor knows: answered `Start`, and its channel is open."""
    last_metrics: Families = dataclasses.field(default_factory=dict)
    """Its families at the last scrape; the cumulative ones stay in the sum once it exits."""
    gone: bool = False
    serving_since: float = 0.0
    """When it started listening (monotonic seconds)."""

    @property
    def pid(self) -> int:
        return self.process.pid


def restart_delay(quick_exits: int) -> float:
    """Seconds before starting a worker again after `quick_exits` exits in a row that each came
    soon after its start: none for the first (a worker killed once should serve again at once),
    then doubling, so a worker that cannot run does not spin."""
    if quick_exits <= 1:
        return 0.0
    return float(min(FIRST_RESTART_DELAY_SECONDS * 2 ** (quick_exits - 2), MAX_RESTART_DELAY_SECONDS))


def described_exit(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"


class Supervisor:
    """Starts `count` workers serving `config`, keeps them serving, and feeds them tables.

    The table source is whoever calls `update` (the `TableFeed` in `vk-provider router`, a fixed
    table in tests); `router` holds the current table and the supervisor's own series (the feed's
    active checks count into `router.metrics`; `router.check_status` reports them). Call `update`
    with the first table, then `start()`, and `stop()` at the end (also after a failed start).
    """

    def __init__(
        self,
        config: WorkerConfig,
        count: int,
        *,
        metrics: RouterMetrics | None = None,
        command: Sequence[str] = WORKER_COMMAND,
    ) -> None:
        if count < 1:
            raise ValueError(f"a router needs at least 1 worker, not {count}")
        self.config = config
        self.count = count
        self.router = Router(metrics=metrics)
        self.sequence = 0
        self.port = config.port
        """The port the workers share: the configured one, or the one the first worker bound for 0."""
        self._command = tuple(command)
        self._workers: dict[int, Worker] = {}
        self._keepers: list[asyncio.Task[None]] = []
        self._retired: Families = {}
        self._stopping = False
        self.registry = CollectorRegistry(auto_describe=True)
        register_build_info(self.registry)  # here, once: the workers' families are summed
        self.restarts = Counter(
            "worker_restarts",
            "Worker processes started again after one exited (crashed, was killed) while serving.",
            namespace=NAMESPACE,
            registry=self.registry,
        )
        Gauge(
            "workers",
            "Worker processes serving now.",
            namespace=NAMESPACE,
            registry=self.registry,
        ).set_function(lambda: len(self.serving()))

    def update(self, table: RouteTable) -> None:
        """Number `table` and push it to every worker (those starting too: they take it after `Start`),
        as the change from the table before it, which every worker serves or is about to (one
        stream per worker carries `Start` and the changes in order)."""
        base = self._numbered()
        self.sequence += 1
        self.router.update(table)
        change = TableChange.between(base, self._numbered())
        for worker in self._workers.values():
            worker.channel.send(change)

    def _numbered(self) -> NumberedTable:
        return NumberedTable(self.sequence, self.router.table)

    def serving(self) -> list[Worker]:
        return [worker for worker in self._workers.values() if worker.listening]

    async def start(self) -> None:
        """Start every worker; return once all listen. WorkerStartError if one cannot."""
        first = await self._launch(0)
        started = [first]
        # With port 0 the first worker picked the port; the others must share that one.
        others = await asyncio.gather(
            *(self._launch(slot) for slot in range(1, self.count)), return_exceptions=True
        )
        for outcome in others:
            if isinstance(outcome, BaseException):
                raise outcome
            started.append(outcome)
        self._keepers = [
            asyncio.create_task(self._keep_serving(worker), name=f"router-worker-{worker.slot}")
            for worker in started
        ]

    async def _launch(self, slot: int) -> Worker:
        ours, theirs = socket.socketpair()
        channel = await Channel.over(ours)
        try:
            process = await asyncio.create_subprocess_exec(
                *self._command,
                "--control-fd",
                str(theirs.fileno()),
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            channel.close()
            raise
        finally:
            theirs.close()  # the worker has its own copy; ours open would hide the worker's exit
        # Registered before anything else is awaited: `stop()` must find every worker started.
        worker = Worker(slot, process, channel)
        self._workers[slot] = worker
        worker.reading = asyncio.create_task(
            channel.serve(self._on_request, self._on_notice), name=f"router-worker-{slot}-channel"
        )
        config = dataclasses.replace(self.config, port=self.port)
        try:
            answer = await worker.channel.request(
                Start(slot, config, self._numbered()), within=START_TIMEOUT_SECONDS
            )
        except (ChannelClosedError, TimeoutError, RemoteError) as error:
            await self._discard(worker)
            why = "answered nothing" if isinstance(error, TimeoutError) else str(error)
            raise WorkerStartError(f"worker {slot} (pid {worker.pid}) did not start: {why}") from None
        if not isinstance(answer, Listening):
            await self._discard(worker)
            reason = answer.reason if isinstance(answer, StartFailed) else repr(answer)
            raise WorkerStartError(f"worker {slot} (pid {worker.pid}) could not serve: {reason}")
        self.port = answer.port
        worker.listening = not worker.channel.closed
        worker.serving_since = time.monotonic()
        logger.info("worker %d (pid %d) serving on %s:%d", slot, worker.pid, self.config.host, answer.port)
        return worker

    async def _discard(self, worker: Worker) -> None:
        """A worker that failed to start: make sure it is gone."""
        if worker.process.returncode is None:
            worker.process.kill()
        await worker.process.wait()
        self._forget(worker)

    def _forget(self, worker: Worker) -> None:
        """`worker` exited: stop asking it, keep its counters in the sum (once)."""
        if worker.gone:
            return
        worker.gone = True
        worker.listening = False
        worker.channel.close()
        if self._workers.get(worker.slot) is worker:
            del self._workers[worker.slot]
        self._retired = summed([self._retired, cumulative_only(worker.last_metrics)])

    async def _keep_serving(self, worker: Worker) -> None:
        """Start the slot's worker again whenever it exits, until the router stops."""
        slot = worker.slot
        current: Worker | None = worker
        quick_exits = 0
        while True:
            if current is not None:
                returncode = await current.process.wait()
                self._forget(current)
                served = time.monotonic() - current.serving_since
                how = described_exit(returncode)
                what = f"worker {slot} (pid {current.pid}) {how} after serving {served:.1f}s"
            else:
                served = 0.0
                what = f"worker {slot} did not start"
            if self._stopping:
                return
            quick_exits = quick_exits + 1 if served < STEADY_SECONDS else 0
            delay = restart_delay(quick_exits)
            logger.warning("%s; starting it again in %gs", what, delay)
            await asyncio.sleep(delay)
            self.restarts.inc()
            try:
                current = await self._launch(slot)
            except WorkerStartError as error:
                logger.error("%s", error)
                current = None

    async def stop(self) -> None:
        """Every worker stops listening, finishes its requests (up to the shutdown grace) and exits;
        those still running after the grace and a margin are killed."""
        self._stopping = True
        for keeper in self._keepers:
            keeper.cancel()
        await asyncio.gather(*self._keepers, return_exceptions=True)
        workers = list(self._workers.values())
        for worker in workers:
            worker.channel.send(Stop())
        exits = [asyncio.create_task(worker.process.wait()) for worker in workers]
        if exits:
            await asyncio.wait(exits, timeout=self.config.shutdown_grace + STOP_MARGIN_SECONDS)
            for worker in workers:
                if worker.process.returncode is None:
                    logger.warning("worker %d (pid %d) is still running: killing it", worker.slot, worker.pid)
                    worker.process.kill()
            await asyncio.gather(*exits)
        for worker in workers:
            self._forget(worker)
            if worker.reading is not None:
                worker.reading.cancel()

    # --- Answering for the whole router ---

    async def _on_request(self, body: object) -> object:
        raise TypeError(f"unexpected request from a worker: {body!r}")

    def _on_notice(self, message: object) -> None:
        logger.warning("ignoring an unexpected message from a worker: %r", message)

    async def answer(self, path: str) -> AdminAnswer:
        """The whole router's status or metrics (`admin.Answer`); 503 when a worker does not answer."""
        try:
            if path == STATUS_PATH:
                document = await self.status()
                return AdminAnswer(200, JSON, json.dumps(document).encode())
            if path == METRICS_PATH:
                return AdminAnswer(200, CONTENT_TYPE, await self.exposition())
        except (TimeoutError, RemoteError, _NoWorkerError) as error:
            return AdminAnswer(503, TEXT, f"{error}\n".encode())
        return AdminAnswer(404, TEXT, f"no admin path {path}\n".encode())

    async def status(self) -> dict[str, Any]:
        replies = await self._ask_serving(StatusQuery())
        statuses = [reply for _, reply in replies if isinstance(reply, WorkerStatus)]
        return merged_status(statuses, active_checks=self.router.check_status(), table=self.sequence)

    async def exposition(self) -> bytes:
        # A worker that exited while the others answered is already in `_retired`, with what it
        # said at the scrape before: counting its answer too would count it twice.
        replies = [
            (worker, reply) for worker, reply in await self._ask_serving(MetricsQuery()) if not worker.gone
        ]
        for worker, reply in replies:
            if isinstance(reply, bytes):
                worker.last_metrics = families_of(
                    reply.decode(), keep=lambda name: name not in SUPERVISOR_FAMILIES
                )
        workers = summed([self._retired, *(worker.last_metrics for worker, _ in replies)])
        feed = families_of(self.router.metrics.exposition().decode(), keep=FEED_FAMILIES.__contains__)
        own = families_of(generate_latest(self.registry).decode())
        return exposition_of(workers, feed, own)

    async def _ask_serving(self, query: object) -> list[tuple[Worker, object]]:
        """Every serving worker's reply to `query`. A worker that exits meanwhile is left out (what
        it served is gone with it); one that does not answer in time makes the whole answer fail
        (TimeoutError), since leaving it out could report a table it does not serve yet."""
        workers = self.serving()
        if not workers:
            raise _NoWorkerError("no worker is serving")

        async def ask(worker: Worker) -> object:
            try:
                return await worker.channel.request(query, within=QUERY_TIMEOUT_SECONDS)
            except TimeoutError:
                waited = f"{QUERY_TIMEOUT_SECONDS:g}s"
                raise TimeoutError(
                    f"worker {worker.slot} (pid {worker.pid}) did not answer in {waited}"
                ) from None

        replies = await asyncio.gather(*(ask(worker) for worker in workers), return_exceptions=True)
        answered = []
        for worker, reply in zip(workers, replies, strict=True):
            if isinstance(reply, ChannelClosedError):
                continue
            if isinstance(reply, BaseException):
                raise reply
            answered.append((worker, reply))
        if not answered:
            raise _NoWorkerError("no worker is serving")
        return answered


class _NoWorkerError(Exception):
    pass
