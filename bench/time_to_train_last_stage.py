"""The last stage of time_to_train's wait, from the move away's end to all the Job's pods bound, taken
apart: when the home pods were marked for deletion and when they were gone (the GPUs free), when each
Job pod was first seen bound, and when kube-scheduler tried the gang (its log's retry lines).

The scheduler's lines are the ones its -v=1 log keeps for a gang that cannot be placed ("Error
scheduling pod; retrying ... podGroup=..."): one per attempt of the gang. They show whether the gang
was retried when the GPUs came free or only on the scheduler's own backoff, which the wait's last stage
is then quantised to."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vk_provider.kit.kube import KubeApi, RawObject

POLL_SECONDS = 0.5
KLOG_LINE = re.compile(r"^[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6})\s")
GANG_RETRY_MARK = "Error scheduling pod; retrying"


class LastStageWatch:
    """Polls the home pods (those of `home_selector`) and the Job's pods (`job_selector`) every
    POLL_SECONDS; times are seconds after `origin` (time.monotonic())."""

    def __init__(self, api: KubeApi, namespace: str, *, home_selector: str, job_selector: str, origin: float):
        self.api = api
        self.namespace = namespace
        self.home_selector = home_selector
        self.job_selector = job_selector
        self.origin = origin
        self.home_deleting: dict[str, float] = {}
        self.home_gone: dict[str, float] = {}
        self.home_known: set[str] = set()
        self.job_bound_seen: dict[str, float] = {}

    async def pods(self, selector: str) -> list[RawObject]:
        listing = await self.api.get(
            f"/api/v1/namespaces/{self.namespace}/pods", query={"labelSelector": selector}
        )
        items: list[RawObject] = listing.get("items") or []
        return items

    def sample(self, home: list[RawObject], job: list[RawObject], now: float) -> None:
        present = {pod["metadata"]["name"] for pod in home}
        for pod in home:
            name = pod["metadata"]["name"]
            self.home_known.add(name)
            if pod["metadata"].get("deletionTimestamp"):
                self.home_deleting.setdefault(name, now)
        for name in self.home_known - present:
            self.home_gone.setdefault(name, now)
        for pod in job:
            if (pod.get("spec") or {}).get("nodeName"):
                self.job_bound_seen.setdefault(pod["metadata"]["name"], now)

    async def run(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # one failed read is one missed sample, no more
                home, job = await asyncio.gather(self.pods(self.home_selector), self.pods(self.job_selector))
                self.sample(home, job, time.monotonic() - self.origin)
            await asyncio.sleep(POLL_SECONDS)  # sampling the pods (noqa: sleep-ok)

    def report(self) -> dict[str, Any]:
        return {
            "home_pods_deleting_seen_seconds": dict(sorted(self.home_deleting.items())),
            "home_pods_gone_seen_seconds": dict(sorted(self.home_gone.items())),
            "job_pods_bound_seen_seconds": dict(sorted(self.job_bound_seen.items())),
        }


def gang_retries(scheduler_log: Path, pod_group: str, origin: datetime) -> list[float]:
    """Seconds after `origin` (UTC) of the scheduler's retry lines for `pod_group` ("namespace/name").
    klog stamps carry no year and the plane's scheduler logs in UTC: the year is `origin`'s."""
    seconds = []
    mark = f'podGroup="{pod_group}"'
    for line in scheduler_log.read_text(errors="replace").splitlines():
        if GANG_RETRY_MARK not in line or mark not in line:
            continue
        stamp = KLOG_LINE.match(line)
        if stamp is None:
            continue
        month, day, hour, minute, second, micro = (int(part) for part in stamp.groups())
        moment = datetime(origin.year, month, day, hour, minute, second, micro, tzinfo=UTC)
        seconds.append(round((moment - origin).total_seconds(), 3))
    return seconds


def summary(last_stage: dict[str, Any], succeeded_seconds: float | None) -> dict[str, float | None]:
    """The stage's moments: the home pods' last one gone, the first gang retry after that, and the last
    Job pod seen bound (seconds after the Job's creation); None where not seen."""
    gone = list(last_stage.get("home_pods_gone_seen_seconds", {}).values())
    bound = list(last_stage.get("job_pods_bound_seen_seconds", {}).values())
    home_gone = max(gone) if gone else None
    retries = last_stage.get("gang_retries_seconds") or []
    after = [moment for moment in retries if home_gone is not None and moment >= home_gone]
    return {
        "succeeded": succeeded_seconds,
        "home_pods_gone": home_gone,
        "last_gang_retry_before_gone": max(
            (moment for moment in retries if home_gone is not None and moment < home_gone), default=None
        ),
        "first_gang_retry_after_gone": min(after, default=None),
        "all_bound_seen": max(bound) if bound else None,
    }
