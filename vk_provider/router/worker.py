"""One worker process of `vk-provider router --worker-processes N`: serves the supervisor's table on the
shared port.

Started by the supervisor (`vk_provider.router.workers`) as `python -m vk_provider.router.worker
--control-fd FD`, FD being its end of a socketpair. It never talks to the apiserver: the first
message (`Start`) brings its settings and the current table, later ones bring new tables, queries of
its status and metrics, and `Stop`. It listens (SO_REUSEPORT) only once it holds a table, and serves
nothing but routes: the supervisor's admin listener answers status, metrics and health for the
whole router. Its AWS signing is its own, built from the same settings as every other worker's.

It stops (stops listening, finishes the requests in flight up to the shutdown grace, exits) on
`Stop`, on SIGTERM (SIGINT is the supervisor's to handle), and when the supervisor's end of the
socket closes. It dies with the supervisor (PR_SET_PDEATHSIG): a worker outliving it would serve a
table nobody updates any more.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence

from vk_provider.router.proxy import Router
from vk_provider.router.running import drain
from vk_provider.router.server import start
from vk_provider.router.signing import RequestSigning, standard_chain
from vk_provider.router.workerprotocol import (
    Channel,
    ChannelClosedError,
    Listening,
    MetricsQuery,
    NumberedTable,
    Request,
    Start,
    StartFailed,
    StatusQuery,
    Stop,
    TableChange,
    WorkerStatus,
)
from vk_provider.runtime import eventloop
from vk_provider.runtime.logsetup import configure_logging

# Named, not `__name__`: run with `python -m`, this module is `__main__`.
logger = logging.getLogger("vk_provider.router.worker")

PR_SET_PDEATHSIG = 1


def die_with_supervisor() -> None:
    """Have the kernel SIGKILL this process when its parent exits (Linux; elsewhere the closing
    socket is what stops it). SIGKILL, because a supervisor that exits while workers still run
    either crashed or was told by a second signal to exit at once, the whole router with it."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        logger.warning("cannot ask to die with the supervisor: %s", os.strerror(ctypes.get_errno()))


class WorkerState:
    """The worker's router and the number of the table it serves; what the supervisor talks to."""

    def __init__(self, slot: int, router: Router, table: NumberedTable, stop: asyncio.Event) -> None:
        self.slot = slot
        self.router = router
        self.sequence = table.sequence
        self._stop = stop

    def on_notice(self, message: object) -> None:
        if isinstance(message, TableChange):
            # One stream carries `Start` and the changes in the supervisor's order, so each change
            # applies to the table before it; if one does not, stop, to be started again with the
            # whole table, rather than serve a table the supervisor never built.
            if message.base != self.sequence:
                logger.error(
                    "table %d is a change to table %d, but this worker serves table %d: stopping",
                    message.sequence,
                    message.base,
                    self.sequence,
                )
                self._stop.set()
                return
            self.router.update(message.applied_to(self.router.table))
            self.sequence = message.sequence
        elif isinstance(message, Stop):
            self._stop.set()
        else:
            logger.warning("ignoring an unexpected message from the supervisor: %r", message)

    async def on_request(self, body: object) -> object:
        if isinstance(body, StatusQuery):
            return WorkerStatus(
                slot=self.slot,
                pid=os.getpid(),
                sequence=self.sequence,
                in_flight=self.router.in_flight,
                requests=self.router.metrics.answered(),
                document=self.router.status(),
            )
        if isinstance(body, MetricsQuery):
            return self.router.metrics.exposition()
        raise TypeError(f"unexpected request from the supervisor: {body!r}")


async def serve_worker(channel: Channel, request: Request, order: Start, stop: asyncio.Event) -> int:
    """Serve until stopped; 1 if the port cannot be served (the supervisor is told why)."""
    config = order.config
    signing = RequestSigning(
        standard_chain(profile=config.aws_profile, credentials_file=config.aws_credentials_file)
    )
    router = Router(order.table.table, settings=config.proxy, signing=signing)
    state = WorkerState(order.slot, router, order.table, stop)
    try:
        server = await start(router, config.host, config.port, reuse_port=True)
    except OSError as error:
        channel.reply(request, StartFailed(str(error)))
        await channel.flush()
        return 1
    channel.reply(request, Listening(os.getpid(), server.port))
    logger.info(
        "serving on %s:%d (table %d, %d routes, event loop: %s)",
        config.host,
        server.port,
        state.sequence,
        len(router.table.routes),
        eventloop.loop_name(),
    )
    reading = asyncio.create_task(channel.serve(state.on_request, state.on_notice), name="supervisor")
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({reading, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set():
            logger.warning("the supervisor closed its end: stopping")
        # The channel stays open meanwhile: a control request in flight still gets its answer.
        await drain(server, router, config.shutdown_grace)
    finally:
        stopped.cancel()
        await server.close()
        reading.cancel()
    return 0


async def run_worker(control: socket.socket) -> int:
    channel = await Channel.over(control)
    try:
        request = await channel.receive()
    except ChannelClosedError:
        return 1  # the supervisor went away before it started this worker
    if not isinstance(request, Request) or not isinstance(request.body, Start):
        raise SystemExit(f"expected a Start request from the supervisor, got {request!r}")
    order = request.body
    configure_logging(order.config.log_level, order.config.log_format, source=f"worker {order.slot}")

    # SIGTERM drains, however often it comes: signalling the router's whole process group (`kill --
    # -PGID`, as `dev down` does) reaches each worker beside the supervisor's own Stop, and must not
    # count as a second, exit-at-once signal. Exiting at once is the supervisor's call: when it exits,
    # its workers die with it.
    # The first waits out the shutdown delay while the worker goes on serving, as the supervisor does
    # before its Stop, which may come first and then drains at once.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    delay = order.config.shutdown_delay
    loop.add_signal_handler(signal.SIGTERM, lambda: loop.call_later(delay, stop.set))
    return await serve_worker(channel, request, order, stop)


def main(argv: Sequence[str] | None = None) -> int:
    # The supervisor stops the workers. A Ctrl-C at a terminal signals the whole process group, so
    # it reaches this process too, maybe before `until_signalled` handles it: then it is ignored
    # here, rather than printing a KeyboardInterrupt per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parser = argparse.ArgumentParser(prog="python -m vk_provider.router.worker")
    parser.add_argument("--control-fd", type=int, required=True, help="this worker's end of the socketpair")
    arguments = parser.parse_args(argv)
    die_with_supervisor()
    control = socket.socket(fileno=arguments.control_fd)
    return eventloop.run(run_worker(control))


if __name__ == "__main__":
    sys.exit(main())
