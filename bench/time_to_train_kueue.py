"""time_to_train's Kueue path: the training Job queued through Kueue behind our AdmissionCheck, and what
its Workload went through on the way to its pods.

The plane runs Kueue (`dev up --with-kueue`); the queue is the demo's (manifests/examples/kueue.yaml:
the AdmissionCheck `gpu-reclaim` served by the OffloadPolicy `training-first`, a ClusterQueue of the 8
home GPUs using it, the LocalQueue `training` in `default`), and the Job is
manifests/examples/kueue-job.yaml: the same 8 pods x 1 GPU, created suspended, no PodGroup. Kueue
reserves the quota and waits on our check; the policy moves the service away; the check turns Ready;
Kueue admits the Workload and unsuspends the Job, whose pods are then created and scheduled together.
No pod exists while the Workload waits, so kube-scheduler's backoff on a gang it cannot place (the
native gang path's 29 s retry grid) plays no part.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchkit import BenchError
from vk_devtools.devcluster import cluster, kueuedemo
from vk_provider.kit.kube import KubeApi, RawObject
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.policy.admission.names import admission_checks_path, workloads_path

JOB_MANIFEST = kueuedemo.KUEUE_JOB
CHECK = kueuedemo.CHECK
POLL_SECONDS = 0.5
ACTIVE_TIMEOUT_SECONDS = 60.0


def queue_for_training(directory: Path) -> None:
    """The demo's queue on the plane in `directory` (Kueue already running: `dev up --with-kueue`),
    `default` labelled for Kueue to act in it."""
    state = cluster.ClusterState.load(directory)
    if state is None:
        raise BenchError(f"no plane state in {directory}")
    output = io.StringIO()
    try:
        kueuedemo.ensure_kueue(state, output)
    except RuntimeError as error:
        said = output.getvalue()[-2000:]
        raise BenchError(f"setting up the Kueue queue failed: {error}; {said}") from error


async def check_active(api: KubeApi) -> dict[str, Any]:
    """Wait until our AdmissionCheck is Active (the policy serves it): a Job queued before that would
    meet an inactive check, which Kueue does not wait on as the bench means it to."""
    deadline = time.monotonic() + ACTIVE_TIMEOUT_SECONDS
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the check may not exist yet a moment after the apply
            raw = await api.get(admission_checks_path(CHECK))
            conditions = (raw.get("status") or {}).get("conditions") or ()
            last = next((dict(item) for item in conditions if item.get("type") == "Active"), {})
            if last.get("status") == "True":
                return last
        await asyncio.sleep(POLL_SECONDS)  # polling the API at the bench's pace (noqa: sleep-ok)
    raise BenchError(
        f"the AdmissionCheck {CHECK} was not Active within {ACTIVE_TIMEOUT_SECONDS:.0f} s: {last}"
    )


def condition_true(obj: RawObject, kind: str) -> dict[str, Any] | None:
    for item in (obj.get("status") or {}).get("conditions") or ():
        if item.get("type") == kind and item.get("status") == "True":
            return dict(item)
    return None


def check_entry(workload: RawObject) -> dict[str, Any]:
    entries = (workload.get("status") or {}).get("admissionChecks") or ()
    return next((dict(entry) for entry in entries if entry.get("name") == CHECK), {})


class WorkloadWatch:
    """Polls the Job's Workload and pods every POLL_SECONDS: when each step of its admission was first
    seen (seconds after `origin`, time.monotonic()), and each change of our check's state or message."""

    def __init__(self, api: KubeApi, namespace: str, *, job_name: str, job_selector: str, origin: float):
        self.api = api
        self.namespace = namespace
        self.job_name = job_name
        self.job_selector = job_selector
        self.origin = origin
        self.seen: dict[str, float] = {}
        self.check_changes: list[dict[str, Any]] = []
        self.last: RawObject = {}

    async def workload(self) -> RawObject:
        """The Job's Workload ({} until Kueue has made it)."""
        listing = await self.api.get(workloads_path(self.namespace))
        for item in listing.get("items") or ():
            owners = item["metadata"].get("ownerReferences") or ()
            if any(owner.get("kind") == "Job" and owner.get("name") == self.job_name for owner in owners):
                return dict(item)
        return {}

    async def pod_count(self) -> int:
        listing = await self.api.get(
            f"/api/v1/namespaces/{self.namespace}/pods", query={"labelSelector": self.job_selector}
        )
        return len(listing.get("items") or ())

    def sample(self, workload: RawObject, pods: int, now: float) -> None:
        if workload:
            self.last = workload
            self.seen.setdefault("workload", now)
        if condition_true(workload, "QuotaReserved"):
            self.seen.setdefault("quota_reserved", now)
        entry = check_entry(workload)
        if entry.get("state"):
            self.seen.setdefault(f"check_{entry['state']}", now)
            change = {"state": entry["state"], "message": entry.get("message", "")}
            if not self.check_changes or {k: self.check_changes[-1][k] for k in change} != change:
                self.check_changes.append({"seconds": round(now, 1), **change})
        if condition_true(workload, "Admitted"):
            self.seen.setdefault("admitted", now)
        if pods:
            self.seen.setdefault("first_pod", now)

    async def run(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # one failed read is one missed sample, no more
                workload, pods = await asyncio.gather(self.workload(), self.pod_count())
                self.sample(workload, pods, time.monotonic() - self.origin)
            await asyncio.sleep(POLL_SECONDS)  # sampling the Workload (noqa: sleep-ok)

    def report(self, job_created_at: datetime | None) -> dict[str, Any]:
        """What was seen, and the API's own times (whole seconds) of the check's Ready and the
        Workload's admission, in seconds after the Job's creationTimestamp."""
        entry = check_entry(self.last)
        ready = entry.get("lastTransitionTime") if entry.get("state") == "Ready" else None
        admitted = (condition_true(self.last, "Admitted") or {}).get("lastTransitionTime")
        return {
            "seen_seconds_after_job": dict(self.seen),
            "check_changes": self.check_changes,
            "check_ready_api_seconds_after_job": seconds_after(ready, job_created_at),
            "admitted_api_seconds_after_job": seconds_after(admitted, job_created_at),
        }


def seconds_after(stamp: str | None, origin: datetime | None) -> float | None:
    moment = parse_timestamp(stamp)
    if moment is None or origin is None:
        return None
    return (moment - origin).total_seconds()
