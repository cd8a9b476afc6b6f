"""The running exporter: read every interval, serve `/metrics`, `/healthz` and `/readyz` on one port.

Reads happen on the exporter's own clock, not at scrape time, so the `_per_second` gauges are rates
over a fixed interval whoever scrapes and however often. `/readyz` answers 200 once the first read is
done, so a rollout waits for a replica that has something to say.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from vk_provider.interconnect.collector import InterconnectState, build_registry
from vk_provider.interconnect.names import DEFAULT_PORT, METRICS_PATH
from vk_provider.interconnect.nvlink import NvlinkReadError, fetch_nvlink_counters
from vk_provider.interconnect.sysfs import infiniband_class, read_tree
from vk_provider.kit.probes import Readiness, add_probe_routes

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 10.0
DEFAULT_SYSFS_ROOT = Path("/sys")
MAX_REPORTED = 1000


@dataclasses.dataclass(frozen=True)
class ExporterSettings:
    sysfs_root: Path = DEFAULT_SYSFS_ROOT
    listen_address: str = "0.0.0.0"  # noqa: S104 - a DaemonSet's exporter is scraped on its pod IP
    port: int = DEFAULT_PORT
    """0: any free port (tests); `Exporter.port` says which."""
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS
    dcgm_exporter_url: str | None = None
    dcgm_timeout_seconds: float = 5.0


class ListenError(Exception):
    """The exporter cannot listen where it was told; the message says where and why."""


class Exporter:
    """Start it, read (`read_once`, or `run` every interval), close it."""

    def __init__(self, settings: ExporterSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.state = InterconnectState()
        self.registry = build_registry(self.state)
        self.readiness = Readiness(reason="starting: the counters have not been read yet")
        self._clock = clock
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._reported: set[str] = set()
        self.port = settings.port

    async def start(self) -> None:
        """Listen; ListenError (the address in use, not ours) at once, with nothing left open."""
        app = web.Application()
        app.router.add_get(METRICS_PATH, self._metrics)
        add_probe_routes(app, self.readiness)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.settings.listen_address, self.settings.port)
        try:
            await site.start()
        except OSError as error:
            await runner.cleanup()
            where = f"{self.settings.listen_address}:{self.settings.port}"
            raise ListenError(f"cannot listen on {where}: {error.strerror or error}") from None
        self._runner = runner
        if runner.addresses:  # the port bound, for a port of 0
            self.port = int(runner.addresses[0][1])
        self._session = aiohttp.ClientSession()
        if not infiniband_class(self.settings.sysfs_root).is_dir():
            logger.warning(
                "no InfiniBand devices: %s is not there; publishing NVLink counters only",
                infiniband_class(self.settings.sysfs_root),
            )
        logger.info(
            "interconnect exporter on http://%s:%d%s, reading %s every %gs%s",
            self.settings.listen_address,
            self.port,
            METRICS_PATH,
            self.settings.sysfs_root,
            self.settings.interval_seconds,
            f" and {self.settings.dcgm_exporter_url}" if self.settings.dcgm_exporter_url else "",
        )

    async def read_once(self) -> None:
        """Read every source once and record it; a failure is a read error, never an exception."""
        tree = await asyncio.to_thread(read_tree, self.settings.sysfs_root)
        self.state.record_infiniband(tree, self._clock())
        self._report(tree.errors)
        url = self.settings.dcgm_exporter_url
        if url is not None and self._session is not None:
            try:
                gpus = await fetch_nvlink_counters(self._session, url, self.settings.dcgm_timeout_seconds)
            except NvlinkReadError as error:
                self.state.nvlink_failed()
                self._report([str(error)])
            else:
                self.state.record_nvlink(gpus, self._clock())
        self.readiness.set_ready()

    async def run(self, stop: asyncio.Event) -> None:
        """Read now and every interval until `stop` is set."""
        while not stop.is_set():
            await self.read_once()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.interval_seconds):
                    await stop.wait()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    async def _metrics(self, _: web.Request) -> web.Response:
        response = web.Response(body=self.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_PLAIN_0_0_4
        return response

    def _report(self, errors: list[str]) -> None:
        """Log each distinct problem once (it is counted every time in read_errors_total): a missing
        file stays missing, and a line every interval would bury everything else."""
        if len(self._reported) > MAX_REPORTED:  # problems whose text changes every time: log again
            self._reported.clear()
        for problem in errors:
            if problem not in self._reported:
                self._reported.add(problem)
                logger.warning("read error (counted in read_errors_total; logged once): %s", problem)


async def serve(settings: ExporterSettings, stop: asyncio.Event) -> None:
    """Run an exporter until `stop`; ListenError when it cannot listen."""
    exporter = Exporter(settings)
    await exporter.start()
    try:
        await exporter.run(stop)
    finally:
        await exporter.aclose()
