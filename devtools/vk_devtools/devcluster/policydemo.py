"""The demo's automatic story: training arrives, the OffloadPolicy moves inference out and back.

Nobody runs `kubectl offload flip` here. A training Job that needs every GPU of the home node is
created; the policy sees its pods wait for GPUs, moves the example service to the burst node, reserves
the home pool, and the Job's pods all start. When the Job is done, the policy brings the service home
step by step. Each stage is waited for on the cluster's own objects and timed; the load generator
counts failed requests throughout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from vk_devtools.devcluster import cluster, traffic
from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject
from vk_provider.offload.names import offload_path

JOB_NAME = "pretrain"
POLICY_NAME = "training-first"
STAGE_TIMEOUT_SECONDS = 300.0
POLL_SECONDS = 0.5
JOBS = "/apis/batch/v1/namespaces/default/jobs"


class StageTimeout(Exception):
    """A stage of the story did not happen in time; the message says which and what was seen."""


@dataclass
class Timeline:
    """Seconds since the Job's creation at which each stage was seen."""

    created: float = 0.0
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, stage: str) -> float:
        self.marks[stage] = time.monotonic() - self.created
        return self.marks[stage]


async def _until(
    probe: Callable[[], Awaitable[Any]], what: str, *, timeout_seconds: float = STAGE_TIMEOUT_SECONDS
) -> Any:
    """Poll `probe` until it returns something truthy; StageTimeout after `timeout_seconds`."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        result = await probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise StageTimeout(f"timed out after {timeout_seconds:.0f}s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)  # polling the API, the demo's own pace (noqa: sleep-ok)


def _phase(offload: RawObject) -> tuple[str, str]:
    status = offload.get("status") or {}
    return str(status.get("targetPlacement") or ""), str(status.get("phase") or "")


async def _settled(api: KubeApi, placement: str) -> bool:
    offload = await api.get(offload_path("default", traffic.EXAMPLE_NAME))
    return _phase(offload) == (placement, "Succeeded")


async def _job_pods(api: KubeApi) -> list[RawObject]:
    listing = await api.get(
        "/api/v1/namespaces/default/pods", query={"labelSelector": f"job-name={JOB_NAME}"}
    )
    items: list[RawObject] = listing.get("items") or []
    return items


async def _all_bound(api: KubeApi, count: int) -> bool:
    pods = await _job_pods(api)
    return len([pod for pod in pods if (pod.get("spec") or {}).get("nodeName")]) >= count


async def _job_done(api: KubeApi) -> str:
    job = await api.get(f"{JOBS}/{JOB_NAME}")
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return str(condition["type"])
    return ""


async def _remove_job(api: KubeApi) -> None:
    """A Job left by an earlier demo run would be demand from the start: delete it and its pods."""
    try:
        await api.delete(f"{JOBS}/{JOB_NAME}", body={"propagationPolicy": "Foreground"})
    except KubeApiError as error:
        if not error.not_found:
            raise

    async def gone() -> bool:
        try:
            await api.get(f"{JOBS}/{JOB_NAME}")
        except KubeApiError as error:
            if error.not_found:
                return not await _job_pods(api)
            raise
        return False

    await _until(gone, f"the Job {JOB_NAME} of an earlier run to be deleted")


async def create_training_job(api: KubeApi, manifest: Path, out: TextIO) -> tuple[int, Timeline]:
    """Create the Job of `manifest` (once an earlier run's is gone) and echo the `kubectl apply` a person
    would type; returns the Job's parallelism and a timeline that starts as the Job is created."""
    await _remove_job(api)
    job = traffic.load_manifest(manifest)
    parallelism = int(job["spec"]["parallelism"])
    print(f"\n$ kubectl apply -f {manifest.relative_to(traffic.SOURCE_TREE)}", file=out)
    timeline = Timeline(created=time.monotonic())
    await api.create(JOBS, job)
    return parallelism, timeline


async def training_story(state: cluster.ClusterState, out: TextIO) -> Timeline:
    """Create the training Job and follow the policy's moves to the end; returns the timeline."""
    api = await KubeApi.from_kubeconfig(str(state.kubeconfig))
    try:
        parallelism, timeline = await create_training_job(api, traffic.TRAINING_JOB, out)
        print(
            f"training Job {JOB_NAME} created: {parallelism} pods x 1 GPU at priority `training`; "
            "the home node has 8 GPUs and the service holds some of them",
            file=out,
            flush=True,
        )
        await _until(
            lambda: _started_moving(api, "away"), "the policy to move the service away (FlipOutStarted)"
        )
        print(f"[{timeline.mark('flip out started'):6.1f}s] the policy moves the service away", file=out)
        await _until(lambda: _settled(api, "away"), "the service to be served away (Succeeded)")
        print(f"[{timeline.mark('served away'):6.1f}s] the service is served away", file=out, flush=True)
        await _until(lambda: _all_bound(api, parallelism), f"all {parallelism} training pods bound")
        print(
            f"[{timeline.mark('training bound'):6.1f}s] all {parallelism} training pods are bound",
            file=out,
            flush=True,
        )
        outcome = await _until(lambda: _job_done(api), f"the Job {JOB_NAME} to finish")
        print(f"[{timeline.mark('training done'):6.1f}s] the Job finished: {outcome}", file=out, flush=True)
        await _until(lambda: _started_moving(api, "home"), "the policy to bring the service home")
        print(f"[{timeline.mark('flip back started'):6.1f}s] the policy brings the service home", file=out)
        await _until(lambda: _settled(api, "home"), "the service to be served home again (Succeeded)")
        print(f"[{timeline.mark('served home'):6.1f}s] the service is home again", file=out, flush=True)
        return timeline
    finally:
        await api.close()


async def _started_moving(api: KubeApi, placement: str) -> bool:
    offload = await api.get(offload_path("default", traffic.EXAMPLE_NAME))
    return _phase(offload)[0] == placement
