"""A real Prometheus (Debian's package, see `vk_devtools.devcluster.debian`) scraping what a test names.

The targets are read from a file (`file_sd_configs`) that Prometheus re-reads when it changes, so a
test can start Prometheus before the processes it will scrape exist (the controller must be told the
Prometheus URL when it starts) and add them once they listen. Scrapes every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import aiohttp
import yaml

from tests.integration.daemons import ManagedProcess
from tests.integration.waiting import wait_for
from vk_devtools.devcluster.debian import debian_program
from vk_devtools.devcluster.ports import PortPicker

SCRAPE_SECONDS = 1


@dataclasses.dataclass
class Prometheus:
    url: str
    process: ManagedProcess
    targets_file: Path

    def scrape(self, job: str, targets: Iterable[str], metrics_path: str) -> None:
        """Add a job: `targets` as host:port, scraped at `metrics_path`."""
        current = json.loads(self.targets_file.read_text())
        current.append({"targets": list(targets), "labels": {"job": job, "__metrics_path__": metrics_path}})
        partial = self.targets_file.with_suffix(".partial")
        partial.write_text(json.dumps(current))
        partial.replace(self.targets_file)

    async def query(self, promql: str) -> list[dict[str, object]]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{self.url}/api/v1/query", params={"query": promql}) as response,
        ):
            document = await response.json()
        assert document["status"] == "success", document
        result: list[dict[str, object]] = document["data"]["result"]
        return result

    async def wait_for_scrapes_after(self, moment: float, *jobs: str) -> None:
        """Until each job has been scraped after `moment` (a `time.time()`): queries then see
        everything counted before it."""

        async def scraped() -> bool:
            for job in jobs:
                samples = await self.query(f'timestamp(up{{job="{job}"}})')
                if not samples or float(samples[0]["value"][1]) <= moment:  # type: ignore[index]
                    return False
            return True

        wait = max(0.0, moment - time.time()) + 30
        await wait_for(scraped, timeout_seconds=wait, what=f"Prometheus to scrape {jobs} again")

    async def wait_until_up(self, job: str) -> None:
        async def up() -> bool:
            return any(
                sample["value"][1] == "1"  # type: ignore[index]
                for sample in await self.query(f'up{{job="{job}"}}')
            )

        await wait_for(
            up, timeout_seconds=60, what=f"Prometheus to scrape job {job}:\n{self.process.log_tail()}"
        )


def _prepare(folder: Path) -> tuple[Path, Path, Path]:
    """The binary (fetched on first use), an empty targets file and the configuration reading it."""
    binary = debian_program("prometheus", "usr/bin/prometheus")
    folder.mkdir(parents=True, exist_ok=True)
    targets_file = folder / "targets.json"
    targets_file.write_text("[]")
    config = {
        "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": f"{SCRAPE_SECONDS}s"},
        "scrape_configs": [
            {
                "job_name": "tests",
                "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "1s"}],
            }
        ],
    }
    config_path = folder / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    return binary, targets_file, config_path


@contextlib.asynccontextmanager
async def running_prometheus(folder: Path) -> AsyncIterator[Prometheus]:
    binary, targets_file, config_path = await asyncio.to_thread(_prepare, folder)
    port = PortPicker().pick()
    process = ManagedProcess(
        folder=folder,
        arguments=[
            f"--config.file={config_path}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        log_name="prometheus.log",
        program=(str(binary),),
    )
    process.start()
    prometheus = Prometheus(f"http://127.0.0.1:{port}", process, targets_file)
    try:

        async def ready() -> bool:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{prometheus.url}/-/ready") as response,
            ):
                return response.status == 200

        await wait_for(ready, timeout_seconds=60, what=f"Prometheus ready:\n{process.log_tail()}")
        yield prometheus
    finally:
        if process.alive():
            process.stop()
        process.close()
