"""The router's own active health checks of away endpoints.

Why the router checks at all: an away pod's `Ready` condition comes from its virtual node, and when
the node daemon is down (both replicas), the node goes Unknown and the node lifecycle controller
marks every pod there `Ready=False`, though the workloads run on at the provider. The router must not
turn that into an outage, so it checks every away address itself, all the time, and
`vk_provider.routetable.building` keeps the pods of a not-Ready node serving while these checks pass.

A check is an HTTP GET of the target's `check_url` (the traffic address plus the pod's readiness probe
path, else `/`); 200..399 passes, as for a kubelet's probe. A target turns healthy after
`healthy_threshold` passes in a row and unhealthy after `unhealthy_threshold` failures in a row; until
then it has no verdict, and a target without a verdict is never kept. A changed verdict calls
`on_change`, so the table is rebuilt at once. Signed endpoints are not checked (a managed endpoint's
invocation URL takes no GET); they are served only while their pods are Ready.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp

from vk_provider.routetable.building import CheckTarget
from vk_provider.routetable.metrics import FeedMetrics

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CheckSettings:
    interval_seconds: float = 2.0
    timeout_seconds: float = 2.0
    healthy_threshold: int = 1
    unhealthy_threshold: int = 3

    def __post_init__(self) -> None:
        if self.interval_seconds <= 0 or self.timeout_seconds <= 0:
            raise ValueError("the active check interval and timeout must be positive")
        if self.healthy_threshold < 1 or self.unhealthy_threshold < 1:
            raise ValueError("the active check thresholds must be at least 1")


@dataclasses.dataclass
class _Target:
    check_url: str
    healthy: bool | None = None
    passes: int = 0
    failures: int = 0
    last_result: str = ""
    last_checked: float | None = None


class ActiveChecks:
    """Checks the current targets every interval; `verdicts` is what `build_routes` reads."""

    def __init__(
        self,
        settings: CheckSettings | None = None,
        *,
        on_change: Callable[[], None] = lambda: None,
        metrics: FeedMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings if settings is not None else CheckSettings()
        self._on_change = on_change
        self._metrics = metrics
        self._clock = clock
        self._targets: dict[str, _Target] = {}
        self._wake = asyncio.Event()
        self.rounds = 0

    @property
    def verdicts(self) -> dict[str, bool]:
        """Endpoint URL → passing, for the targets that have a verdict."""
        return {url: target.healthy for url, target in self._targets.items() if target.healthy is not None}

    def set_targets(self, targets: Iterable[CheckTarget]) -> None:
        """Check these from now on; a target kept keeps its history, a new one is checked at once."""
        wanted = {target.url: target.check_url for target in targets}
        for url in self._targets.keys() - wanted.keys():
            del self._targets[url]
        for url, check_url in wanted.items():
            known = self._targets.get(url)
            if known is None or known.check_url != check_url:
                self._targets[url] = _Target(check_url)
                self._wake.set()

    def status(self) -> dict[str, Any]:
        """For the router's `/-/status`: each target's verdict and latest result."""
        return {
            url: {
                "check_url": target.check_url,
                "healthy": target.healthy,
                "consecutive_passes": target.passes,
                "consecutive_failures": target.failures,
                "last_result": target.last_result,
                "last_checked": target.last_checked,
            }
            for url, target in sorted(self._targets.items())
        }

    async def run(self) -> None:
        """Check until cancelled."""
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_seconds)
        connector = aiohttp.TCPConnector(
            force_close=True
        )  # a check must open a connection, as a client would
        async with aiohttp.ClientSession(
            timeout=timeout, connector=connector, cookie_jar=aiohttp.DummyCookieJar()
        ) as session:
            while True:
                self._wake.clear()
                await self.check_all(session)
                try:
                    async with asyncio.timeout(self.settings.interval_seconds):
                        await self._wake.wait()
                except TimeoutError:
                    pass

    async def check_all(self, session: aiohttp.ClientSession) -> None:
        """One round: every target at once; `on_change` once if any verdict changed."""
        targets = list(self._targets.items())
        results = await asyncio.gather(*(self._check(session, target.check_url) for _, target in targets))
        self.rounds += 1
        changed = False
        for (url, target), (passed, result) in zip(targets, results, strict=True):
            if self._targets.get(url) is not target:
                continue  # dropped or replaced while checked
            changed |= self._record(url, target, passed, result)
        if changed:
            self._on_change()

    async def _check(self, session: aiohttp.ClientSession, check_url: str) -> tuple[bool, str]:
        try:
            async with session.get(check_url, allow_redirects=False) as response:
                await response.read()
                return 200 <= response.status < 400, f"HTTP {response.status}"
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            return False, f"{type(error).__name__}: {error}".rstrip(": ")

    def _record(self, url: str, target: _Target, passed: bool, result: str) -> bool:
        target.last_result = result
        target.last_checked = self._clock()
        if self._metrics is not None:
            self._metrics.active_check("pass" if passed else "fail")
        if passed:
            target.passes, target.failures = target.passes + 1, 0
        else:
            target.passes, target.failures = 0, target.failures + 1
        verdict = target.healthy
        if target.passes >= self.settings.healthy_threshold:
            verdict = True
        elif target.failures >= self.settings.unhealthy_threshold:
            verdict = False
        if verdict == target.healthy:
            return False
        log = logger.info if verdict else logger.warning
        log("active check of %s: %s (%s)", url, "passing" if verdict else "failing", result)
        target.healthy = verdict
        return True
